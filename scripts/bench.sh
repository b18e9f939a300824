#!/usr/bin/env bash
# Prints the actuator's figures measured in a fresh lab: reaction time, idle
# memory, CPU and API requests, and a swap's time. Not a test: no assertions.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
FLEET_ROLE_KUBE_APISERVER=$(scripts/build-kube-apiserver.sh)
export FLEET_ROLE_KUBE_APISERVER
cargo build --workspace --bins --release --quiet
exec "$top/target/release/fleet-role-lab" --dir "$top/.cache/bench" bench "$@"
