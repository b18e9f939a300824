#!/usr/bin/env bash
# Builds the real kube-apiserver once from the Go module proxy into
# .cache/kube-apiserver/<version>/ and reuses it on later runs. Tests find it
# through FLEET_ROLE_KUBE_APISERVER (set by scripts/test.sh) or this path.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
src="$top/tools/kube-apiserver"
version=$(sed -n "s/^[[:space:]]*k8s.io\/kubernetes v\([0-9.]*\)$/\1/p" "$src/go.mod" | head -1)
[ -n "$version" ] || { echo "cannot read the kubernetes version from $src/go.mod" >&2; exit 2; }
minor=$(echo "$version" | cut -d. -f2)
# The cache key is the version plus the hash of the wrapper, so an edit rebuilds.
key=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-12)
out="$top/.cache/kube-apiserver/v$version-$key"
bin="$out/kube-apiserver"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$out"
export GOTOOLCHAIN=local CGO_ENABLED=0
# Keep Go's caches inside the project's ignored folder, so nothing lands in
# the home directory.
export GOMODCACHE="${GOMODCACHE:-$top/.cache/go/mod}" GOCACHE="${GOCACHE:-$top/.cache/go/build}"
start=$(date +%s)
echo "building kube-apiserver v$version (first time only, ~15 min on 2 cores)" >&2
(cd "$src" && go build -trimpath -o "$bin.tmp" -ldflags "-s -w \
  -X k8s.io/component-base/version.gitVersion=v$version \
  -X k8s.io/component-base/version.gitMajor=1 \
  -X k8s.io/component-base/version.gitMinor=$minor \
  -X k8s.io/client-go/pkg/version.gitVersion=v$version \
  -X k8s.io/client-go/pkg/version.gitMajor=1 \
  -X k8s.io/client-go/pkg/version.gitMinor=$minor" .) >&2
mv "$bin.tmp" "$bin"
# The compile cache (2.2 GB) serves only a rebuild of this same binary, which
# the key above already skips; a run's disk is shared with the test suite's
# target directory, so it goes. The module cache (0.5 GB, half of a first
# build's time) stays for a rebuild after an edit of the wrapper.
go clean -cache >&2
echo "built kube-apiserver in $(( $(date +%s) - start ))s, $(du -h "$bin" | cut -f1)" >&2
echo "$bin"
