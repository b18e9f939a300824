#!/usr/bin/env bash
# Checks the controller's image archive (an OCI archive holding one image
# index) the two ways a k3s fleet takes it in:
#
# 1. imported into containerd from the archive, every platform, into the
#    namespace k3s's kubelet uses (`k8s.io`), as `k3s ctr images import`
#    and k3s's `agent/images/` folder do;
# 2. pushed from there to a registry (a real one: Debian's docker-registry,
#    the CNCF distribution registry) and pulled back by containerd, every
#    platform, as a node's kubelet pulls `REGISTRY/fleet-role:VERSION`.
#
# The index's digest must stay the same through both, and the registry must
# serve each platform's manifest. Everything runs privately under WORKDIR:
# its own containerd (own root, state and socket, no CRI plugin) and its own
# registry on a free loopback port; nothing of the machine's is touched,
# and both are stopped on exit. Every wait is bounded.
#
# Usage: scripts/check-image.sh ARCHIVE WORKDIR
#   (scripts/release.sh runs it on its fleet-role-VERSION.oci.tar)
set -euo pipefail

die() { echo "scripts/check-image.sh: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: scripts/check-image.sh ARCHIVE WORKDIR"
archive=$(realpath "$1")
work=$(realpath -m "$2")
[ -f "$archive" ] || die "$archive: no such archive"
for tool in containerd ctr docker-registry curl tar; do
  command -v "$tool" >/dev/null || die "$tool is missing (scripts/prereqs.sh's image group installs it)"
done
rm -rf "$work"
mkdir -p "$work"

# The archive's index: its digest and the platforms it names.
tar -xOf "$archive" index.json > "$work/index.json" || die "$archive holds no index.json"
index_digest=$(grep -o '"digest":"sha256:[0-9a-f]*"' "$work/index.json" | head -1 | cut -d'"' -f4)
[ -n "$index_digest" ] || die "$archive's index.json names no digest"

pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap stop EXIT

# waits up to $1 seconds for the command that follows to succeed
within() {
  local secs=$1; shift
  for _ in $(seq $((secs * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

# --- a private containerd --------------------------------------------------
sock=$work/containerd/containerd.sock
mkdir -p "$work/containerd"
cat > "$work/containerd/config.toml" <<EOF
version = 2
root = "$work/containerd/root"
state = "$work/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$sock"
EOF
containerd --config "$work/containerd/config.toml" > "$work/containerd/log" 2>&1 &
pids+=($!)
within 30 ctr --address "$sock" version || { tail -20 "$work/containerd/log" >&2; die "containerd did not answer within 30 s"; }
ctr_() { timeout 120 ctr --address "$sock" "$@"; }

# --- 1. imported, every platform, as k3s imports -------------------------
imported=$(ctr_ -n k8s.io images import --all-platforms --no-unpack "$archive" 2>&1) \
  || die "containerd refused the archive: $imported"
name=$(ctr_ -n k8s.io images ls -q 2>/dev/null | head -1)
[ -n "$name" ] || die "containerd lists no image after the import: $imported"
digest=$(ctr_ -n k8s.io images ls 2>/dev/null | awk -v n="$name" '$1 == n {print $3}')
[ "$digest" = "$index_digest" ] || die "imported as $digest, the archive's index is $index_digest"
echo "imported into containerd (namespace k8s.io) as $name, index $digest" >&2

# --- 2. pushed to a registry and pulled back -------------------------------
port=
for p in $(seq 45000 45100); do
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[ -n "$port" ] || die "no free loopback port in 45000-45100"
cat > "$work/registry.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $work/registry
http:
  addr: 127.0.0.1:$port
EOF
docker-registry serve "$work/registry.yml" > "$work/registry.log" 2>&1 &
pids+=($!)
within 30 curl -fsS "http://127.0.0.1:$port/v2/" || { tail -20 "$work/registry.log" >&2; die "the registry did not answer within 30 s"; }
ref=127.0.0.1:$port/fleet-role:${name##*:}
ctr_ -n k8s.io images tag "$name" "$ref" >/dev/null
out=$(ctr_ -n k8s.io images push --plain-http "$ref" 2>&1) || die "the push was refused: $out"
# The registry serves the index and, by digest, each platform's manifest.
accept='application/vnd.oci.image.index.v1+json,application/vnd.docker.distribution.manifest.list.v2+json'
served=$(curl -fsS -H "Accept: $accept" "http://127.0.0.1:$port/v2/fleet-role/manifests/${name##*:}") \
  || die "the registry does not serve $ref"
for arch in amd64 arm64; do
  m=$(printf '%s' "$served" | tr -d ' \n' | grep -o "{[^{}]*\"digest\":\"sha256:[0-9a-f]*\"[^{}]*\"platform\":{[^{}]*\"architecture\":\"$arch\"[^{}]*}" \
    | grep -o 'sha256:[0-9a-f]*' | head -1) || true
  [ -n "$m" ] || die "the registry's index names no linux/$arch manifest: $served"
  curl -fsS -o /dev/null -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://127.0.0.1:$port/v2/fleet-role/manifests/$m" || die "the registry does not serve linux/$arch's manifest $m"
done
# Pulled back into a namespace of its own, as a node that never saw it.
out=$(ctr_ -n pulled images pull --plain-http --all-platforms "$ref" 2>&1) || die "the pull was refused: $out"
pulled=$(ctr_ -n pulled images ls 2>/dev/null | awk -v n="$ref" '$1 == n {print $3}')
[ "$pulled" = "$index_digest" ] || die "pulled $ref as $pulled, the archive's index is $index_digest"
echo "pushed to a registry (docker-registry $(docker-registry --version 2>/dev/null | awk '{print $3}')) and pulled back by containerd: $ref, index $pulled, linux/amd64 and linux/arm64" >&2
