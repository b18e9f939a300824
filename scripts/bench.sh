#!/usr/bin/env bash
# Prints measured figures. Not a test: no assertions.
#
#   scripts/bench.sh [ARGS]        the actuator's figures in a fresh lab:
#                                  reaction time, idle memory, CPU and API
#                                  requests, and a swap's time
#   scripts/bench.sh fleet [ARGS]  `fleet-role run` at fleet scale (50, 500
#                                  and 5,000 Nodes over a real kube-apiserver):
#                                  memory, quiet requests, failover to the
#                                  first write, `status`, one decision, and
#                                  an idle actuator's requests and memory
#                                  (crates/controller/examples/bench_fleet.rs)
#   scripts/bench.sh reports --hosts N --seconds S --heartbeat-secs H [--mode hosts|shared]
#                                  N reporting hosts, each with its own
#                                  identity, against a real kube-apiserver
#                                  and etcd, with `fleet-role run` over them:
#                                  writes, etcd's bytes, its database, the
#                                  controller's memory, the API's requests
#                                  (crates/controller/examples/bench_reports.rs;
#                                  --mode shared: the shared report of
#                                  earlier releases)
#   scripts/bench.sh actuator [ARGS]
#                                  the same over 50 Nodes only, for the idle
#                                  actuator's line: its requests a minute by
#                                  verb and resource, and its resident memory
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
source scripts/prereqs.sh
FLEET_ROLE_KUBE_APISERVER=$(scripts/build-kube-apiserver.sh)
export FLEET_ROLE_KUBE_APISERVER
if [[ ${1:-} == actuator ]]; then
  shift
  set -- fleet --sizes 50 "$@"
fi
if [[ ${1:-} == reports ]]; then
  shift
  cargo build --release --quiet -p controller --bins
  cargo build --release --quiet -p controller --example bench_reports
  exec "$top/target/release/examples/bench_reports" \
    --controller-bin "$top/target/release/fleet-role" "$@"
fi
if [[ ${1:-} == fleet ]]; then
  shift
  cargo build --release --quiet -p controller -p actuator -p standins -p k3sstandin --bins
  cargo build --release --quiet -p controller --example bench_fleet
  exec "$top/target/release/examples/bench_fleet" \
    --actuator-bin-dir "$top/target/release" "$@"
fi
cargo build --workspace --bins --release --quiet
exec "$top/target/release/fleet-role-lab" --dir "$top/.cache/bench" bench "$@"
