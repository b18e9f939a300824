#!/usr/bin/env bash
# Builds etcd's offline tool, etcdutl, once from the Go module proxy into
# .cache/etcdutl/<version>-<key>/ and reuses it on later runs; prints the
# binary's path. The lab's k3s stand-in restores a snapshot with it at a
# cluster reset, as k3s does through the same etcd package; tests find it
# through FLEET_ROLE_ETCDUTL (set by scripts/test.sh). Its version is the
# etcd the suite runs (etcd-bin-vendored in Cargo.lock): a snapshot is
# restored by the tool of the release that wrote it.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
src="$top/tools/etcdutl"
version=$(sed -n "s/^[[:space:]]*go.etcd.io\/etcd\/etcdutl\/v3 v\([0-9.]*\)$/\1/p" "$src/go.mod" | head -1)
[ -n "$version" ] || { echo "cannot read etcdutl's version from $src/go.mod" >&2; exit 2; }
etcd=$(grep -A1 '^name = "etcd-bin-vendored"$' "$top/Cargo.lock" | sed -n 's/^version = "\(.*\)"$/\1/p')
if [ "$etcd" != "$version" ]; then
  echo "etcdutl $version in $src/go.mod is not the etcd the suite runs ($etcd, Cargo.lock)" >&2
  exit 2
fi
# The cache key is the version plus the hash of the wrapper, so an edit rebuilds.
key=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-12)
out="$top/.cache/etcdutl/v$version-$key"
bin="$out/etcdutl"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$out"
export GOTOOLCHAIN=local CGO_ENABLED=0
# Go's caches inside the project's ignored folder, as for kube-apiserver.
export GOMODCACHE="${GOMODCACHE:-$top/.cache/go/mod}" GOCACHE="${GOCACHE:-$top/.cache/go/build}"
start=$(date +%s)
echo "building etcdutl v$version (first time only, about a minute on 2 cores)" >&2
(cd "$src" && go build -trimpath -o "$bin.tmp" -ldflags "-s -w" .) >&2
mv "$bin.tmp" "$bin"
# As for kube-apiserver: the compile cache goes, the module cache stays.
go clean -cache >&2
echo "built etcdutl in $(( $(date +%s) - start ))s, $(du -h "$bin" | cut -f1)" >&2
echo "$bin"
