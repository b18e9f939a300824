#!/usr/bin/env bash
# The demo: a lab of 3 servers and 2 agents on this machine (real etcd
# members, a real kube-apiserver per server, k3s and systemd stand-ins, the
# actuator on every host), then a voter swapped for a standby step by step,
# with a writer putting to etcd throughout. Set-up is done here: the Debian
# packages, the kube-apiserver build (cached in .cache/), the binaries.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
need=()
command -v flock >/dev/null || need+=(util-linux)
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
command -v ip >/dev/null || need+=(iproute2)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}" >&2
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
FLEET_ROLE_KUBE_APISERVER=$(scripts/build-kube-apiserver.sh)
export FLEET_ROLE_KUBE_APISERVER
cargo build --workspace --bins --quiet
lab="$top/target/debug/fleet-role-lab"
export FLEET_ROLE_LAB_DIR="$top/.cache/lab"
trap '"$lab" down >/dev/null 2>&1 || true' EXIT
"$lab" up --servers 3 --agents 2
echo
"$lab" status
echo
"$lab" demo
echo
"$lab" status
