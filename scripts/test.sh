#!/usr/bin/env bash
# Runs every test of fleet-role from a fresh checkout: installs what the
# machine lacks, builds the real kube-apiserver once (cached in .cache/),
# then format, lints and the whole test suite. CI runs exactly this.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

# The Debian packages the builds and tests need.
source scripts/prereqs.sh
command -v go >/dev/null || { echo "Go is needed to build kube-apiserver for the tests" >&2; exit 2; }
command -v cargo >/dev/null || { echo "Rust (cargo) is needed" >&2; exit 2; }

FLEET_ROLE_KUBE_APISERVER=$(scripts/build-kube-apiserver.sh)
export FLEET_ROLE_KUBE_APISERVER
# ansible-core for the test of deploy/ansible/ (cached in .cache/ansible/).
scripts/ansible.sh >/dev/null

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The tests run the built binaries (the actuator, and the systemctl and k3s
# stand-ins), so every binary is built first.
cargo build --workspace --bins --examples --quiet
# The Debian packages (release binaries, man pages, completions), before the
# tests: tests/package_install.rs installs, upgrades and purges them in a lab
# host. A change that breaks packaging fails here.
scripts/package.sh
FLEET_ROLE_DEB_DIR="$top/target/debian"
export FLEET_ROLE_DEB_DIR
# The summary line is printed even when a test fails, so errexit is off here.
set +e
cargo test --workspace --no-fail-fast 2>&1 | tee "$top/.cache/test.log"
status=${PIPESTATUS[0]}
set -e
passed=$(grep -Eo '^test result: [a-zA-Z]+\. [0-9]+ passed; [0-9]+ failed' "$top/.cache/test.log" | awk '{p+=$4; f+=$6} END {print p+0, f+0}')
echo "fleet-role: $(echo "$passed" | awk '{print $1}') passed, $(echo "$passed" | awk '{print $2}') failed"
exit "$status"
