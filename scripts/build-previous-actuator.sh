#!/usr/bin/env bash
# Builds the actuator of the previous release, 0.1.0, whose hosts write the
# shared report ConfigMap (`scripts/previous-release` names its commit), once
# into .cache/previous/, and prints its path. The mixed fleet's lab test runs
# it on one host beside this release's actuators.
#
# Its source comes from this repository's own history (`git archive`), and
# it builds in this checkout's target directory, so the dependencies this
# tree built already are reused (fleet-role's own crates compile apart, as
# their version differs, and the few dependencies whose features differ in
# a build of the actuator alone). cargo copies the binary it built to
# target/debug/fleet-role-actuator, over this tree's: the binary is kept
# aside and this tree's binaries are built again (nothing to compile, cargo
# only copies them back), with the command scripts/test.sh builds them with.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
commit=$(tr -d '[:space:]' < scripts/previous-release)
out="$top/.cache/previous/fleet-role-actuator-$commit"
if [ -x "$out" ]; then
  echo "$out"
  exit 0
fi
if ! git cat-file -e "$commit^{commit}" 2>/dev/null \
  && [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  # A shallow clone: its history from where it was cloned (bounded).
  timeout 300 git fetch --quiet --unshallow >&2 || true
fi
git cat-file -e "$commit^{commit}" 2>/dev/null || {
  echo "the previous release's commit $commit is not in this repository's history: fetch it (git fetch --unshallow) and run again" >&2
  exit 2
}
src="$top/.cache/previous/src-$commit"
rm -rf "$src"
mkdir -p "$src"
git archive "$commit" | tar -x -C "$src"
# git archive dates every file at the commit: older than an artifact cargo
# built of the same crate and version (a tree built before its version was
# raised), which cargo would take as fresh. The files are dated now.
find "$src" -type f -exec touch {} +
start=$(date +%s)
echo "building the previous release's actuator ($commit, first time only)" >&2
# The lab's actuator has the host crate's test hooks, as this tree's does.
(cd "$src" && CARGO_TARGET_DIR="$top/target" cargo build --quiet --locked \
  -p actuator --bin fleet-role-actuator --features host/test-hooks) >&2
cp "$top/target/debug/fleet-role-actuator" "$out.tmp"
mv "$out.tmp" "$out"
rm -rf "$src"
# This tree's binaries back where cargo put the previous one.
cargo build --workspace --bins --examples --quiet >&2
echo "built the previous release's actuator in $(( $(date +%s) - start ))s" >&2
echo "$out"
