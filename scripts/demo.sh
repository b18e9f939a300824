#!/usr/bin/env bash
# The demo. Until the lab lands (issue 4: real etcd quorum, kube-apiservers,
# k3s stand-ins and the controller), it walks the host side of a voter swap
# on two host roots with the systemctl and k3s stand-ins: the standby is
# promoted, the old voter demoted, and each step's effect is shown.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
cargo build --workspace --bins --quiet
bin="$top/target/debug"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PATH="$bin:$PATH"

unit() { printf '[Service]\nKillMode=process\nRestart=always\nExecStart=/usr/local/bin/k3s %s\n' "$1"; }
make_host() { # name role
  local r="$work/$1"
  mkdir -p "$r/etc/systemd/system" "$r/etc/rancher/k3s" "$r/etc/rancher/node" "$r/var/lib/rancher/k3s"
  unit server >"$r/etc/systemd/system/k3s.service"
  unit agent >"$r/etc/systemd/system/k3s-agent.service"
  for u in k3s k3s-agent; do
    mkdir -p "$r/etc/systemd/system/$u.service.d"
    cp "deploy/systemd/$u.service.d/50-fleet-role.conf" "$r/etc/systemd/system/$u.service.d/"
  done
  echo "node-name: $1" >"$r/etc/rancher/k3s/config.yaml"
  head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$r/etc/rancher/node/password"
  echo "$2" >"$r/var/lib/rancher/k3s/fleet-role"
  if [ "$2" = server ]; then
    mkdir -p "$r/var/lib/rancher/k3s/server/db/etcd/member/wal"
    FLEET_ROLE_ROOT="$r" systemctl enable --now k3s
  else
    FLEET_ROLE_ROOT="$r" systemctl enable --now k3s-agent
  fi
}
act() { local h=$1; shift; echo "\$ fleet-role-actuator --node $h $*"; fleet-role-actuator --root "$work/$h" --node "$h" "$@" | sed 's/^/    /'; }

echo "== two hosts: old-voter (a server) and standby (an agent)"
make_host old-voter server
make_host standby agent
act old-voter status
act standby status
echo
echo "== 1. a snapshot on the voter, named for the swap"
act old-voter snapshot --name swap-demo
echo
echo "== 2. promote the standby, joining the voter (first a dry run)"
act standby promote-local --join https://10.0.0.1:6443 --check
act standby promote-local --join https://10.0.0.1:6443
echo
echo "== 3. the old voter's member is removed; it finishes as an agent"
touch "$work/old-voter/var/lib/rancher/k3s/server/db/etcd/tombstone"
act old-voter demote-local
echo
echo "== where they ended"
act old-voter status
act standby status
echo
echo "The two k3s units were never active together: most at once on old-voter = $(cat "$work/old-voter/run/fleet-role-standin/systemd/max-active-k3s"), on standby = $(cat "$work/standby/run/fleet-role-standin/systemd/max-active-k3s")."
echo "(The whole swap driven through the Kubernetes API arrives with the lab: docs/roadmap.md.)"
