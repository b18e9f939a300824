#!/usr/bin/env bash
# Builds the controller's OCI image `localhost/fleet-role:<version>` with
# podman (Debian's package, installed by scripts/prereqs.sh's image group) from
# deploy/image/Containerfile, and saves it as an OCI archive in
# target/image/fleet-role-<version>.oci.tar, which k3s imports
# (`k3s ctr images import`, or the file put in
# /var/lib/rancher/k3s/agent/images/). Prints the archive's path and size.
#
# The image holds the release binary, the shared libraries `ldd` names for
# it (from this machine's glibc), /etc/passwd and /etc/group naming the
# unprivileged user 65532, and nothing else: no shell.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
FLEET_ROLE_PREREQS="build image" source scripts/prereqs.sh

version=$(cargo pkgid -p controller | sed 's/.*[#@]//')
# The same package set as scripts/package.sh, so that this reuses its build
# (another set unifies features differently and rebuilds).
cargo build --release --quiet -p actuator -p controller
bin=target/release/fleet-role

ctx=target/image/context
rm -rf "$ctx"
mkdir -p "$ctx/rootfs/usr/bin" "$ctx/rootfs/etc" "$ctx/rootfs/tmp"
chmod 1777 "$ctx/rootfs/tmp"
install -m 0755 "$bin" "$ctx/rootfs/usr/bin/fleet-role"
# Every library the binary loads, at the path the loader looks for it.
for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
  mkdir -p "$ctx/rootfs$(dirname "$lib")"
  cp -L "$lib" "$ctx/rootfs$lib"
done
printf 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' >"$ctx/rootfs/etc/passwd"
printf 'nonroot:x:65532:\n' >"$ctx/rootfs/etc/group"
cp deploy/image/Containerfile "$ctx/Containerfile"

source=$(git -C "$top" remote get-url origin 2>/dev/null || echo "fleet-role")
revision=$(git -C "$top" rev-parse HEAD 2>/dev/null || echo unknown)
podman build --quiet --format oci --no-cache \
  --label "org.opencontainers.image.title=fleet-role" \
  --label "org.opencontainers.image.description=the fleet-role controller: k3s etcd voter swaps through the Kubernetes API" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.source=$source" \
  --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.licenses=Apache-2.0" \
  -t "localhost/fleet-role:$version" "$ctx" >/dev/null
archive=target/image/fleet-role-$version.oci.tar
rm -f "$archive"
podman save --quiet --format oci-archive -o "$archive" "localhost/fleet-role:$version"
echo "$archive $(du -h "$archive" | cut -f1)"
