#!/usr/bin/env bash
# The demo: a lab of 3 servers and an agent on this machine, each host a
# container booting this machine's systemd (real etcd members, a real
# kube-apiserver per server, k3s's own unit files around a k3s stand-in, the
# actuator's real unit), then `fleet-role swap` of a voter for the standby,
# with a writer putting to etcd throughout; the hosts are powered off at the
# end. Set-up is done here: the Debian packages, the kube-apiserver build
# (cached in .cache/), the binaries.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# The Debian packages the builds and tests need.
source scripts/prereqs.sh
FLEET_ROLE_KUBE_APISERVER=$(scripts/build-kube-apiserver.sh)
export FLEET_ROLE_KUBE_APISERVER
cargo build --workspace --bins --quiet
lab="$top/target/debug/fleet-role-lab"
# Not under /tmp: the actuator's unit has PrivateTmp=yes.
exec "$lab" --dir "$top/.cache/lab" demo "$@"
