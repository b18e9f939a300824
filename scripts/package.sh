#!/usr/bin/env bash
# Builds the Debian packages fleet-role-actuator and fleet-role into
# target/debian/: release binaries, their man pages and completions
# (written from the CLIs by crates/manpages), and the files of deploy/.
# Installs cargo-deb (from crates.io, into .cache/cargo-deb/) when missing.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
source scripts/prereqs.sh

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

cargo build --release --quiet -p actuator -p controller
cargo build --quiet -p manpages
rm -rf target/manpages
target/debug/fleet-role-manpages target/manpages

mkdir -p target/debian
# Only what this run builds: the install test takes the package it finds here.
rm -f target/debian/*.deb
for crate in actuator controller; do
  "$cargo_deb" deb --no-build --quiet -p "$crate" --output target/debian/ >/dev/null
done
for deb in target/debian/*.deb; do
  echo "$deb $(du -h "$deb" | cut -f1)"
done
