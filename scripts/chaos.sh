#!/usr/bin/env bash
# The long chaos campaign (docs/testing.md, "The chaos campaign"): for each
# seed given, `fleet-role-lab chaos` with 10 swaps and 30 faults, in its own
# directory under .cache/ (kept: its schedule, summary and logs). A figure,
# not a test: it prints each campaign's summary and the table's rows, and
# exits 1 if any campaign found a violation.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ $# -gt 0 ] || { echo "usage: scripts/chaos.sh SEED..." >&2; exit 2; }
source scripts/prereqs.sh
cargo build --workspace --bins --quiet
FLEET_ROLE_KUBE_APISERVER=$(scripts/build-kube-apiserver.sh)
export FLEET_ROLE_KUBE_APISERVER
status=0
for seed in "$@"; do
  "${CARGO_TARGET_DIR:-target}"/debug/fleet-role-lab --dir ".cache/chaos-$seed" chaos --seed "$seed" --swaps 10 --faults 30 || status=1
done
exit $status
