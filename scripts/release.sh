#!/usr/bin/env bash
# Makes a release of fleet-role from this checkout, for x86_64 and aarch64
# (glibc): everything under target/release-VERSION/ (docs/release.md):
#
#   x86_64-unknown-linux-gnu/{fleet-role,fleet-role-actuator}   release binaries
#   aarch64-unknown-linux-gnu/{fleet-role,fleet-role-actuator}  (stripped)
#   fleet-role-actuator_VERSION-1_{amd64,arm64}.deb             Debian packages
#   fleet-role_VERSION-1_{amd64,arm64}.deb
#   fleet-role-VERSION.oci.tar   the controller's image for linux/amd64 and
#                                linux/arm64, one image index (OCI archive)
#   fleet-role.yaml              `fleet-role manifests all`, the defaults
#   fleet-role-VERSION.tgz       the Helm chart (deploy/chart/fleet-role)
#   RELEASE-NOTES.md             the changelog's entry for VERSION
#   SHA256SUMS                   of every file above
#
#   scripts/release.sh VERSION
#
# VERSION must be the workspace's version (Cargo.toml) and have an entry in
# deploy/debian/changelog; the checkout must be clean (what is released is
# a commit). Installs what it lacks (scripts/prereqs.sh's build, image,
# registry, lint and cross groups: Debian's aarch64 cross toolchain,
# qemu-user, podman, docker-registry, containerd, lintian) and the aarch64
# Rust std. Ends with the checks: the image index imported into containerd
# and pushed to a registry and pulled back (scripts/check-image.sh), lintian
# (no error, no warning) and each package's architecture, and the aarch64
# binaries run under qemu-user (their --version, `manifests all` equal to
# x86_64's, the actuator's `status` on a test host root, the image's files
# enough to start the controller) and the pure core crates' tests run
# there. FLEET_ROLE_RELEASE_CORE_TESTS=0 leaves those tests out.
#
# The Helm chart is packaged with scripts/build-helm.sh's helm; with either
# missing the release stops before building anything.
# FLEET_ROLE_RELEASE_WITHOUT_CHART=1 makes a trial release without it (its
# notes say so); FLEET_ROLE_RELEASE_DIRTY=1, one from uncommitted changes.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# Built under this checkout's target/, where scripts/package.sh's cargo-deb
# and the man pages look.
unset CARGO_TARGET_DIR
export CARGO_INCREMENTAL=0
start=$(date +%s)

die() { echo "release: $*" >&2; exit 2; }
join_and() { local IFS='|'; local all="$*"; echo "${all//|/ and }"; }
step() { echo "== $* ($(( $(date +%s) - start )) s)" >&2; }

[ $# -eq 1 ] || die "usage: scripts/release.sh VERSION (the workspace's, e.g. $(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml))"
version=$1
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "VERSION is MAJOR.MINOR.PATCH, not '$version'"
workspace_version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
[ "$version" = "$workspace_version" ] \
  || die "the workspace's version (Cargo.toml) is $workspace_version, not $version: raise it (and the changelog) first"
# The changelog's entry: its header line `fleet-role (VERSION-N) ...` to its
# signature line ` -- ...`, both kept.
notes=$(awk -v v="$version" '
  $0 ~ "^fleet-role \\(" v "-[0-9]+\\) " { on = 1 }
  on { print }
  on && /^ -- / { exit }' deploy/debian/changelog)
[ -n "$notes" ] || die "deploy/debian/changelog has no entry for $version (fleet-role ($version-1) ...)"
if [ -n "$(git status --porcelain 2>/dev/null)" ] && [ "${FLEET_ROLE_RELEASE_DIRTY:-0}" != 1 ]; then
  git status --short >&2
  die "the checkout has uncommitted changes: a release is of a commit (FLEET_ROLE_RELEASE_DIRTY=1 for a trial)"
fi
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# The release before this one (scripts/previous-release, the commit the
# mixed fleet's lab test builds its actuator from): named in the notes, and
# older than this one, or the file was not moved on after a release.
previous_commit=$(tr -d '[:space:]' < scripts/previous-release)
previous_version=$(git show "$previous_commit:Cargo.toml" 2>/dev/null \
  | sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p')
[ -n "$previous_version" ] || die "scripts/previous-release names $previous_commit, whose Cargo.toml this history lacks (git fetch --unshallow)"
[ "$(printf '%s\n%s\n' "$previous_version" "$version" | sort -V | tail -1)" = "$version" ] && [ "$previous_version" != "$version" ] \
  || die "scripts/previous-release names $previous_version ($previous_commit), not a release before $version"

# The chart is another part of the tree: checked first, so that a release
# without it stops before the long builds.
chart=deploy/chart/fleet-role
with_chart=1
if [ ! -f "$chart/Chart.yaml" ] || [ ! -x scripts/build-helm.sh ]; then
  missing=()
  [ -f "$chart/Chart.yaml" ] || missing+=("the Helm chart ($chart/Chart.yaml)")
  [ -x scripts/build-helm.sh ] || missing+=("scripts/build-helm.sh (builds the helm that packages it)")
  if [ "${FLEET_ROLE_RELEASE_WITHOUT_CHART:-0}" = 1 ]; then
    echo "release: WARNING: no Helm chart in this trial release: missing $(join_and "${missing[@]}")" >&2
    with_chart=0
  else
    die "missing $(join_and "${missing[@]}"): a release ships the chart (FLEET_ROLE_RELEASE_WITHOUT_CHART=1 for a trial without it)"
  fi
fi

step "set-up: Debian's cross toolchain, qemu-user, podman, a registry, containerd, lintian; the aarch64 std"
FLEET_ROLE_PREREQS="build image registry lint cross" source scripts/prereqs.sh
source scripts/cross.sh aarch64-unknown-linux-gnu
arm_sysroot=$FLEET_ROLE_SYSROOT
source scripts/cross.sh x86_64-unknown-linux-gnu
triples=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu)
declare -A deb_arch=([x86_64-unknown-linux-gnu]=amd64 [aarch64-unknown-linux-gnu]=arm64)
declare -A oci_arch=([x86_64-unknown-linux-gnu]=amd64 [aarch64-unknown-linux-gnu]=arm64)
declare -A elf_machine=([x86_64-unknown-linux-gnu]=X86-64 [aarch64-unknown-linux-gnu]=AArch64)
declare -A strip_tool=([x86_64-unknown-linux-gnu]=strip [aarch64-unknown-linux-gnu]=aarch64-linux-gnu-strip)
declare -A readelf_tool=([x86_64-unknown-linux-gnu]=readelf [aarch64-unknown-linux-gnu]=aarch64-linux-gnu-readelf)
declare -A sysroot=([x86_64-unknown-linux-gnu]=/ [aarch64-unknown-linux-gnu]=$arm_sysroot)
qemu=(qemu-aarch64 -L "$arm_sysroot")

out=target/release-$version
rm -rf "$out"
mkdir -p "$out"
work=target/release-work
rm -rf "$work"
mkdir -p "$work"

# --- binaries and packages ------------------------------------------------
for triple in "${triples[@]}"; do
  step "binaries and Debian packages for $triple"
  scripts/package.sh --target "$triple" >&2
  mkdir -p "$out/$triple"
  for bin in fleet-role fleet-role-actuator; do
    # Stripped, as the packages' are: the symbols are most of the file.
    "${strip_tool[$triple]}" -o "$out/$triple/$bin" "target/$triple/release/$bin"
  done
  cp "target/debian/$triple"/*.deb "$out/"
done

# --- the controller's image, both architectures in one index -------------
step "the controller's image (linux/amd64, linux/arm64)"
# A podman store of the release's own (target/release-work/podman): no tag
# of the machine's store (scripts/image.sh's localhost/fleet-role, a test's)
# is touched. vfs: a few small layers, no overlay mount needed.
pm=(podman --root "$top/$work/podman/root" --runroot "$top/$work/podman/run" --storage-driver vfs)
image=localhost/fleet-role:$version
source_url=$(git remote get-url origin 2>/dev/null || echo "fleet-role")
"${pm[@]}" manifest create "$image" >/dev/null
for triple in "${triples[@]}"; do
  arch=${oci_arch[$triple]}
  ctx=$work/image-$arch
  root=${sysroot[$triple]}
  mkdir -p "$ctx/rootfs/usr/bin" "$ctx/rootfs/etc" "$ctx/rootfs/tmp"
  chmod 1777 "$ctx/rootfs/tmp"
  install -m 0755 "$out/$triple/fleet-role" "$ctx/rootfs/usr/bin/fleet-role"
  # The loader the binary names and each library it needs (DT_NEEDED), from
  # the target's glibc (the cross sysroot for aarch64, not this machine's
  # ldd), at the paths a Debian system of that architecture has them.
  interp=$("${readelf_tool[$triple]}" -l "$ctx/rootfs/usr/bin/fleet-role" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  [ -n "$interp" ] || die "no program interpreter in $triple's fleet-role"
  multiarch=${triple%%-*}-linux-gnu
  for lib in $("${readelf_tool[$triple]}" -d "$ctx/rootfs/usr/bin/fleet-role" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    from=
    for dir in "$root/lib/$multiarch" "$root/usr/lib/$multiarch" "$root/lib"; do
      [ -e "$dir/$lib" ] && { from=$dir/$lib; break; }
    done
    [ -n "$from" ] || die "$lib (needed by $triple's fleet-role) is not in $root"
    mkdir -p "$ctx/rootfs/lib/$multiarch"
    cp -L "$from" "$ctx/rootfs/lib/$multiarch/$lib"
  done
  interp_from=$root/${interp#/}
  [ -e "$interp_from" ] || interp_from=$root/lib/$(basename "$interp")
  [ -e "$interp_from" ] || die "the loader $interp of $triple's fleet-role is not in $root"
  mkdir -p "$ctx/rootfs$(dirname "$interp")"
  cp -L "$interp_from" "$ctx/rootfs$interp"
  printf 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' >"$ctx/rootfs/etc/passwd"
  printf 'nonroot:x:65532:\n' >"$ctx/rootfs/etc/group"
  cp deploy/image/Containerfile "$ctx/Containerfile"
  # FROM scratch and COPY only: nothing runs in the build, so an arm64
  # image builds here without emulation.
  "${pm[@]}" build --quiet --format oci --no-cache --platform "linux/$arch" \
    --label "org.opencontainers.image.title=fleet-role" \
    --label "org.opencontainers.image.description=the fleet-role controller: k3s etcd voter swaps through the Kubernetes API" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.source=$source_url" \
    --label "org.opencontainers.image.revision=$commit" \
    --label "org.opencontainers.image.licenses=Apache-2.0" \
    -t "$image-$arch" "$ctx" >/dev/null
  "${pm[@]}" manifest add "$image" "containers-storage:$image-$arch" >/dev/null
done
archive=$out/fleet-role-$version.oci.tar
"${pm[@]}" manifest push --quiet --all "$image" "oci-archive:$top/$archive:$image"
# The archive's one entry is the image index, which names both platforms.
index=$(tar -xOf "$archive" index.json | grep -o '"digest":"sha256:[0-9a-f]*"' | head -1 | sed 's/.*sha256:\([0-9a-f]*\)"/\1/')
platforms=$(tar -xOf "$archive" "blobs/sha256/$index" | grep -o '"architecture":"[a-z0-9]*","os":"linux"' | sort | tr '\n' ' ')
[ "$platforms" = '"architecture":"amd64","os":"linux" "architecture":"arm64","os":"linux" ' ] \
  || die "the image index of $archive names the platforms: $platforms"
echo "$archive: an image index of linux/amd64 and linux/arm64" >&2
# As a fleet takes it in: imported into containerd as k3s imports, and
# pushed to a registry and pulled back, the index's digest the same.
scripts/check-image.sh "$archive" "$work/image-check"

# --- the cluster side, and the chart ----------------------------------------
step "fleet-role.yaml and the Helm chart"
env -u FLEET_ROLE_CONFIG "$out/x86_64-unknown-linux-gnu/fleet-role" manifests all > "$out/fleet-role.yaml"
cmp -s "$out/fleet-role.yaml" deploy/fleet-role.yaml \
  || die "fleet-role manifests all differs from deploy/fleet-role.yaml (which the package ships): render it again"
if [ "$with_chart" = 1 ]; then
  # scripts/build-helm.sh prints the folder of the helm (and kubectl) it
  # built into .cache/helm/.
  helm=$(scripts/build-helm.sh) || die "scripts/build-helm.sh failed"
  [ -d "$helm" ] && helm=$helm/helm
  [ -x "$helm" ] || die "scripts/build-helm.sh printed '$helm', where there is no helm"
  "$helm" package "$chart" --version "$version" --app-version "$version" -d "$out" >&2
fi

# --- notes and sums ----------------------------------------------------------
step "release notes and SHA256SUMS"
{
  echo "# fleet-role $version"
  echo
  echo "Built from commit $commit on $(date -u +%Y-%m-%d) by scripts/release.sh."
  echo "The release before it: $previous_version (commit $previous_commit); docs/upgrade.md"
  echo "gives the order of an upgrade from it."
  [ "$with_chart" = 1 ] || { echo; echo "**A trial release: no Helm chart.**"; }
  echo
  echo "## Changes"
  echo
  echo '```'
  echo "$notes"
  echo '```'
  echo
  echo "## Artifacts"
  echo
  echo "Hosts of either architecture take the packages of their own: amd64 for"
  echo "x86_64, arm64 for aarch64 (edge boxes, and arm64 Linux on Apple-silicon"
  echo "laptops); \`dpkg --print-architecture\` names it. docs/install.md says how"
  echo "to install, docs/release.md what each file is."
  echo
  echo "| file | size |"
  echo "| --- | --- |"
  (cd "$out" && find . -type f ! -name SHA256SUMS ! -name RELEASE-NOTES.md | sed 's|^\./||' | sort \
    | while read -r f; do echo "| \`$f\` | $(du -h "$f" | cut -f1) |"; done)
} > "$out/RELEASE-NOTES.md"
(cd "$out" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | sort | xargs sha256sum > SHA256SUMS)

# --- the checks ---------------------------------------------------------------
step "check: each package's architecture, and lintian on all four"
for triple in "${triples[@]}"; do
  arch=${deb_arch[$triple]}
  for pkg in fleet-role fleet-role-actuator; do
    deb=$out/${pkg}_$version-1_$arch.deb
    [ -f "$deb" ] || die "no $deb"
    dpkg-deb --info "$deb" >/dev/null
    got=$(dpkg-deb --field "$deb" Architecture)
    [ "$got" = "$arch" ] || die "$deb says Architecture: $got"
    # The binary inside is of that architecture, and so are the
    # dependencies dpkg-shlibdeps found for it.
    dpkg-deb --fsys-tarfile "$deb" | tar -xO "./usr/bin/$pkg" > "$work/$pkg-$arch"
    "${readelf_tool[$triple]}" -h "$work/$pkg-$arch" | grep -q "Machine:.*${elf_machine[$triple]}" \
      || die "$deb holds a binary not for ${elf_machine[$triple]}"
    # libc6's version: the newest GLIBC_x.y the binary is bound to, which
    # is what dpkg-shlibdeps reads from libc6's symbols file on amd64 and
    # what scripts/package.sh sets on arm64 (whose cross glibc has none).
    glibc=$("${readelf_tool[$triple]}" -W -V "$work/$pkg-$arch" | grep -o 'Name: GLIBC_[0-9.]*' \
      | sed 's/Name: GLIBC_//' | sort -V | tail -1)
    depends=$(dpkg-deb --field "$deb" Depends)
    [[ ", $depends," == *", libc6 (>= $glibc),"* ]] \
      || die "$deb depends on '$depends', not on libc6 (>= $glibc), the newest glibc its binary needs"
    echo "$deb: Architecture $got; Depends: $depends" >&2
  done
done
# Shown overrides would count toward --fail-on: not shown here (the suite's
# test shows them, with their reasons).
lintian --no-cfg --fail-on error,warning "$out"/*.deb > "$work/lintian.log" 2>&1 \
  || { cat "$work/lintian.log" >&2; die "lintian found errors or warnings"; }
if grep -E '^[EW]: ' "$work/lintian.log" >&2; then die "lintian found errors or warnings"; fi
echo "lintian: no error, no warning in the four packages" >&2

step "check: the aarch64 binaries under qemu-user"
arm=$out/aarch64-unknown-linux-gnu
x86=$out/x86_64-unknown-linux-gnu
for bin in fleet-role fleet-role-actuator; do
  got=$("${qemu[@]}" "$arm/$bin" --version)
  [ "$got" = "$bin $version" ] || die "aarch64 $bin --version says '$got'"
  echo "aarch64 $got" >&2
done
env -u FLEET_ROLE_CONFIG "${qemu[@]}" "$arm/fleet-role" manifests all > "$work/fleet-role.aarch64.yaml"
cmp "$work/fleet-role.aarch64.yaml" "$out/fleet-role.yaml" \
  || die "the aarch64 fleet-role renders manifests all otherwise than x86_64's"
echo "aarch64 fleet-role manifests all: the same $(wc -l < "$out/fleet-role.yaml") lines as x86_64's" >&2
# The image's own files start the controller: its loader and libraries,
# with the image's root as the only sysroot.
qemu-aarch64 -L "$top/$work/image-arm64/rootfs" "$work/image-arm64/rootfs/usr/bin/fleet-role" --version >/dev/null \
  || die "the arm64 image's files do not start fleet-role"
echo "the arm64 image's files start fleet-role (its loader and libraries only)" >&2

# The actuator's read-only `status` on a test host root (a server, as the
# installer leaves it): the systemctl stand-in (crates/standins) keeps the
# units' state under the root and runs their ExecCondition, fleet-role's
# drop-in's `fleet-role-actuator is ROLE`, here the aarch64 actuator under
# qemu; a `k3s` that only says its version.
cargo build --release --quiet -p standins --bin systemctl
hostroot=$top/$work/host
bin=$top/$work/host-bin
mkdir -p "$hostroot/etc/systemd/system" "$hostroot/var/lib/rancher/k3s/server/db/etcd/member/wal" "$bin"
cp target/release/systemctl "$bin/"
printf '#!/bin/sh\necho "k3s version v1.34.3+k3s1 (00000000)"\necho "go version go1.24.0"\n' > "$bin/k3s"
printf '#!/bin/sh\nexec qemu-aarch64 -L %s %s "$@"\n' "$arm_sysroot" "$top/$arm/fleet-role-actuator" > "$bin/fleet-role-actuator"
chmod 0755 "$bin/k3s" "$bin/fleet-role-actuator"
for unit in k3s k3s-agent fleet-regrade; do
  printf '[Unit]\nDescription=%s (a test root: no process)\n[Service]\nType=notify\n[Install]\nWantedBy=multi-user.target\n' "$unit" \
    > "$hostroot/etc/systemd/system/$unit.service"
  mkdir -p "$hostroot/etc/systemd/system/$unit.service.d"
  # The drop-in pins the condition's root to `/`: the test root's here.
  sed "s|--root / |--root $hostroot |" "deploy/systemd/$unit.service.d/50-fleet-role.conf" \
    > "$hostroot/etc/systemd/system/$unit.service.d/50-fleet-role.conf"
done
echo server > "$hostroot/var/lib/rancher/k3s/fleet-role"
echo wal > "$hostroot/var/lib/rancher/k3s/server/db/etcd/member/wal/0000000000000000-0000000000000000.wal"
echo s-0a1b2c3d > "$hostroot/var/lib/rancher/k3s/server/db/etcd/name"
mkdir -p "$hostroot/etc/rancher/k3s"
printf 'node-name: s\nwith-node-id: false\n' > "$hostroot/etc/rancher/k3s/config.yaml"
on_host() {
  env -u FLEET_ROLE_CONFIG -u FLEET_ROLE_API PATH="$bin:$PATH" FLEET_ROLE_ROOT="$hostroot" "$@"
}
# The role file names the server: its unit starts (its condition, `is
# server --no-tombstone`, passes), and `is agent` says no (exit 1), which
# would keep the agent's unit from starting.
on_host "$bin/systemctl" enable --now k3s >/dev/null
[ "$(on_host "$bin/systemctl" is-active k3s)" = active ] \
  || die "the test host's k3s did not start: the aarch64 actuator's ExecCondition (is server) refused it"
set +e
on_host "$bin/fleet-role-actuator" --root "$hostroot" is agent
is_agent=$?
set -e
[ "$is_agent" = 1 ] || die "the aarch64 actuator's is agent on a server exits $is_agent, not 1"
set +e
on_host "${qemu[@]}" "$arm/fleet-role-actuator" --root "$hostroot" --node s status > "$work/status.aarch64" 2>&1
arm_status=$?
on_host "$x86/fleet-role-actuator" --root "$hostroot" --node s status > "$work/status.x86_64" 2>&1
x86_status=$?
set -e
[ "$arm_status" = 0 ] && grep -q '^health: *nothing degraded' "$work/status.aarch64" \
  || { cat "$work/status.aarch64" >&2; die "the aarch64 actuator's status on a test host: exit $arm_status"; }
[ "$x86_status" = 0 ] && cmp -s "$work/status.aarch64" "$work/status.x86_64" \
  || { diff "$work/status.x86_64" "$work/status.aarch64" >&2; die "the aarch64 actuator's status differs from x86_64's"; }
echo "aarch64 fleet-role-actuator status on a test host: exit 0, nothing degraded, the same as x86_64's" >&2

if [ "${FLEET_ROLE_RELEASE_CORE_TESTS:-1}" = 1 ]; then
  # The pure core: no I/O, no cluster, so every test runs under qemu-user
  # (CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER, from scripts/cross.sh).
  step "check: the core crates' tests on aarch64 (protocol, hostdecide, fleetdecide)"
  cargo test --quiet --locked --target aarch64-unknown-linux-gnu \
    -p protocol -p hostdecide -p fleetdecide > "$work/core-tests.log" 2>&1 \
    || { tail -50 "$work/core-tests.log" >&2; die "the core crates' tests failed on aarch64"; }
  grep -E '^test result:' "$work/core-tests.log" \
    | awk '{p += $4; f += $6} END {printf "core tests on aarch64 (qemu-user): %d passed, %d failed\n", p, f}' >&2
fi

step "done"
(cd "$out" && sha256sum --quiet -c SHA256SUMS)
echo "release $version (commit $commit) in $out, $(du -sh "$out" | cut -f1), in $(( $(date +%s) - start )) s:" >&2
(cd "$out" && find . -type f | sed 's|^\./||' | sort | while read -r f; do printf '  %-52s %s\n' "$f" "$(du -h "$f" | cut -f1)"; done) >&2
[ "$with_chart" = 1 ] || echo "INCOMPLETE: a trial release without the Helm chart" >&2
