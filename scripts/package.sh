#!/usr/bin/env bash
# Builds the Debian packages fleet-role-actuator and fleet-role into
# target/debian/: release binaries, their man pages and completions
# (written from the CLIs by crates/manpages), and the files of deploy/.
# Installs cargo-deb (from crates.io, into ~/.cargo/bin) when missing.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
source scripts/prereqs.sh

if ! cargo deb --version >/dev/null 2>&1; then
  echo "installing cargo-deb 3.8.0 (first time only)" >&2
  cargo install cargo-deb --version 3.8.0 --locked --quiet
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
  cargo deb --no-build --quiet -p "$crate" --output target/debian/ >/dev/null
done
for deb in target/debian/*.deb; do
  echo "$deb $(du -h "$deb" | cut -f1)"
done
