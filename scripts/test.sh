#!/usr/bin/env bash
# Runs every test of fleet-role from a fresh checkout: installs what the
# machine lacks, builds the real kube-apiserver, helm and kubectl once
# (cached in .cache/), then format, lints and the whole test suite. CI runs
# exactly this.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
mkdir -p .cache
# A whole-suite build gains nothing from incremental compilation (every
# crate is built once), and its files are 2.8 GB of a fresh clone's 7.5 GB
# target directory: off unless the caller asks for it.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# The suite's scripts (the packages, the previous release's actuator, the
# lab's programs) find what cargo built under target/: a CARGO_TARGET_DIR
# left in the caller's shell would send the build elsewhere.
unset CARGO_TARGET_DIR

# The Debian packages the build needs, now; the ones only the tests and the
# packaging need (Docker, podman, lintian, systemd-nspawn, ...), beside the
# build: one apt at a time, waited for before anything uses them.
FLEET_ROLE_PREREQS=build source scripts/prereqs.sh
(unset FLEET_ROLE_PREREQS; source scripts/prereqs.sh) > .cache/prereqs.log 2>&1 &
prereqs=$!
command -v go >/dev/null || { echo "Go is needed to build kube-apiserver for the tests" >&2; exit 2; }
command -v cargo >/dev/null || { echo "Rust (cargo) is needed" >&2; exit 2; }

# kube-apiserver's Go build (minutes on a fresh machine, half of it waiting
# on module downloads) runs beside cargo's; only the tests need it. helm's
# and kubectl's (for the chart's tests and the runbooks), then etcdutl's
# (the lab's snapshot restore), follow it in the same job: each script ends with `go clean -cache`, which would pull the
# compile cache from under the other's build, and two Go builds beside
# cargo's on 2 cores only share the same cores.
rm -f .cache/go-tools.failed
(
  scripts/build-kube-apiserver.sh > .cache/kube-apiserver.path 2> .cache/kube-apiserver.log \
    || { echo "the kube-apiserver build failed" > .cache/go-tools.failed; exit 1; }
  scripts/build-helm.sh > .cache/helm.path 2> .cache/helm.log \
    || { echo "the helm and kubectl build failed" > .cache/go-tools.failed; exit 1; }
  scripts/build-etcdutl.sh > .cache/etcdutl.path 2> .cache/etcdutl.log \
    || { echo "the etcdutl build failed" > .cache/go-tools.failed; exit 1; }
) &
go_tools_build=$!
# cargo-nextest (the runner) and ansible-core (for the test of
# deploy/ansible/), both cached in .cache/.
nextest=$(scripts/nextest.sh)
scripts/ansible.sh >/dev/null

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# The tests run the built binaries (the actuator, and the systemctl and k3s
# stand-ins), so every binary is built first.
cargo build --workspace --bins --examples --quiet
# The previous release's actuator, for the lab test of a fleet mid-upgrade
# (built once from the repository's history into .cache/previous/).
FLEET_ROLE_PREVIOUS_ACTUATOR=$(scripts/build-previous-actuator.sh)
export FLEET_ROLE_PREVIOUS_ACTUATOR
# The actuator the lab's crash test runs carries the failpoint
# (crates/actuator/src/failpoint.rs), built after the previous release's
# (whose script builds this tree's binaries again without it); the
# packages are built without it.
cargo build -p actuator --features failpoint --bins --quiet
if ! wait "$prereqs"; then
  cat .cache/prereqs.log >&2
  echo "installing the Debian packages the tests need failed" >&2
  exit 2
fi
cat .cache/prereqs.log >&2
# The Debian packages (release binaries, man pages, completions), before the
# tests: tests/package_install.rs installs, upgrades and purges them in a lab
# host. A change that breaks packaging fails here. Their binaries are built
# here with the release profile at opt-level 0: what the tests check of a
# package (its files, scripts, dependencies, the binaries' behaviour) does
# not depend on the optimiser, and the optimised build took 6 of the run's
# 40 minutes (1 min 36 s at 0). scripts/release.sh builds them optimised.
export CARGO_PROFILE_RELEASE_OPT_LEVEL=0
scripts/package.sh
# The controller's image, from the same release binary (tests/image.rs runs it).
scripts/image.sh
unset CARGO_PROFILE_RELEASE_OPT_LEVEL
FLEET_ROLE_DEB_DIR="$top/target/debian"
export FLEET_ROLE_DEB_DIR

if ! wait "$go_tools_build"; then
  cat .cache/kube-apiserver.log .cache/helm.log .cache/etcdutl.log >&2 2>/dev/null || true
  cat .cache/go-tools.failed >&2 2>/dev/null || echo "a Go build failed" >&2
  exit 2
fi
FLEET_ROLE_KUBE_APISERVER=$(cat .cache/kube-apiserver.path)
FLEET_ROLE_HELM="$(cat .cache/helm.path)/helm"
FLEET_ROLE_KUBECTL="$(cat .cache/helm.path)/kubectl"
FLEET_ROLE_ETCDUTL=$(cat .cache/etcdutl.path)
export FLEET_ROLE_KUBE_APISERVER FLEET_ROLE_HELM FLEET_ROLE_KUBECTL FLEET_ROLE_ETCDUTL

# The summary is printed even when a test fails, so errexit is off here.
set +e
# nextest runs the tests five at a time across binaries, each in its own
# process, with the limits of .config/nextest.toml (three labs at most); it
# does not run doc tests, which cargo test does on its own.
"$nextest" nextest run --workspace --no-fail-fast 2>&1 | tee .cache/test.log
status=${PIPESTATUS[0]}
cargo test --workspace --doc --quiet 2>&1 | tee .cache/doctest.log
doc_status=${PIPESTATUS[0]}
set -e
echo "the slowest tests:"
# head ends the pipe early: without pipefail here, that is no failure.
(
  set +o pipefail
  grep -E '^ +(PASS|FAIL|TIMEOUT|FLAKY) ' .cache/test.log \
    | sed -E 's/^ +[A-Z]+ +\[ *([0-9.]+)s\] +\([ 0-9/]+\) +/\1 /' \
    | sort -rn | uniq | head -10 \
    | awk '{printf "  %7.1fs  %s\n", $1, substr($0, index($0, " ") + 1)}'
) || true
summary=$(grep -E '^ +Summary' .cache/test.log | tail -1 || true)
echo "$summary"
passed=$(echo "$summary" | grep -Eo '[0-9]+ passed' | grep -Eo '[0-9]+' || echo 0)
failed=$(echo "$summary" | { grep -Eo '[0-9]+ (failed|timed out)' || true; } | awk '{s+=$1} END {print s+0}')
echo "fleet-role: ${passed:-0} passed, ${failed:-0} failed (and the doc tests: $(grep -Eo '[0-9]+ passed' .cache/doctest.log | awk '{s+=$1} END {print s+0}') passed)"
[ "$status" -eq 0 ] && [ "$doc_status" -eq 0 ]
