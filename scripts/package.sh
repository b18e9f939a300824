#!/usr/bin/env bash
# Builds the Debian packages fleet-role-actuator and fleet-role: release
# binaries, their man pages and completions (written from the CLIs by
# crates/manpages), and the files of deploy/.
#
#   scripts/package.sh                   this machine's architecture, into target/debian/
#   scripts/package.sh --target TRIPLE   another's (aarch64-unknown-linux-gnu: arm64),
#                                        into target/debian/TRIPLE/
#
# Installs cargo-deb (from crates.io, into .cache/cargo-deb/) when missing,
# and only what a package build needs (scripts/prereqs.sh's `build` group;
# with --target, its `cross` group and the target's Rust std too: see
# scripts/cross.sh). The suite's tests take the packages of target/debian/.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
triple=
case "${1:-}" in
  --target) triple=${2:?--target needs a triple}; shift 2 ;;
  "") ;;
  *) echo "usage: scripts/package.sh [--target TRIPLE]" >&2; exit 2 ;;
esac
FLEET_ROLE_PREREQS=build source scripts/prereqs.sh
target_args=()
out=target/debian
if [ -n "$triple" ]; then
  # The cross linker and C compiler, and the target's std (scripts/cross.sh).
  source scripts/cross.sh "$triple"
  target_args=(--target "$triple")
  out=target/debian/$triple
fi

# cargo-deb, pinned, under .cache/ (ignored) rather than ~/.cargo/bin. A
# debug build without its default features (the lzma C library): 38 s
# rather than 92 s on 2 cores, and the same packages byte for byte but for
# the archive's timestamps (docs/testing.md, "Times").
deb_version=3.8.0
cargo_deb="$top/.cache/cargo-deb/$deb_version/bin/cargo-deb"
if [ ! -x "$cargo_deb" ]; then
  echo "installing cargo-deb $deb_version into .cache/cargo-deb (first time only)" >&2
  cargo install cargo-deb --version "$deb_version" --locked --quiet --debug \
    --no-default-features --root "$top/.cache/cargo-deb/$deb_version"
fi
command -v dpkg-deb >/dev/null || { echo "dpkg-deb is needed (Debian's dpkg)" >&2; exit 2; }

cargo build --release --quiet -p actuator -p controller "${target_args[@]}"
# The man pages and completions are text: written by a build for this
# machine, whatever the packages' architecture.
cargo build --quiet -p manpages
rm -rf target/manpages
target/debug/fleet-role-manpages target/manpages

mkdir -p "$out"
# Only what this run builds: the install test takes the package it finds here.
rm -f "$out"/*.deb
for crate in actuator controller; do
  # cargo-deb takes the binaries cargo built for the target
  # (target/TRIPLE/release/ for the assets' target/release/), and its
  # dependencies from dpkg-shlibdeps on them.
  "$cargo_deb" deb --no-build --quiet -p "$crate" "${target_args[@]}" --output "$out/" >/dev/null
done
if [ -n "$triple" ] && [ "$FLEET_ROLE_SYSROOT" != / ]; then
  # dpkg-shlibdeps knows another architecture's glibc only from its cross
  # package's shlibs file (`libc6:arm64 (>= 2.36)`, the cross glibc's own
  # version), not from libc6's symbols file as for this machine's: that
  # would refuse every host with an older glibc than the build machine's
  # (Ubuntu 22.04's 2.35) for no reason. The version a binary needs is the
  # newest GLIBC_x.y its symbols are bound to (which is what the symbols
  # file gives for this machine's packages; scripts/release.sh checks the
  # two agree on amd64), and the package is of that architecture already.
  readelf=${triple%%-*}-linux-gnu-readelf
  for deb in "$out"/*.deb; do
    pkg=$(dpkg-deb --field "$deb" Package)
    unpacked=$(mktemp -d)
    dpkg-deb -R "$deb" "$unpacked"
    glibc=$("$readelf" -W -V "$unpacked/usr/bin/$pkg" | grep -o 'Name: GLIBC_[0-9.]*' \
      | sed 's/Name: GLIBC_//' | sort -V | tail -1)
    [ -n "$glibc" ] || { echo "no GLIBC version in $deb's /usr/bin/$pkg" >&2; exit 2; }
    sed -i -E "s/^(Depends: .*)libc6:[a-z0-9]+ \(>= [0-9.]+\)/\1libc6 (>= $glibc)/" "$unpacked/DEBIAN/control"
    grep -q "^Depends: .*libc6 (>= $glibc)" "$unpacked/DEBIAN/control" \
      || { echo "$deb: no libc6 dependency to set: $(grep '^Depends' "$unpacked/DEBIAN/control")" >&2; exit 2; }
    dpkg-deb --root-owner-group -Zxz --build "$unpacked" "$deb" >/dev/null
    rm -rf "$unpacked"
  done
fi
for deb in "$out"/*.deb; do
  echo "$deb $(du -h "$deb" | cut -f1)"
done
