#!/usr/bin/env bash
# Builds the real helm and kubectl once from the Go module proxy into
# .cache/helm/<version>-<key>/ and reuses them on later runs; prints the
# folder (which holds `helm` and `kubectl`). Tests find them through
# FLEET_ROLE_HELM and FLEET_ROLE_KUBECTL (set by scripts/test.sh).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
src="$top/tools/helm"
version=$(sed -n "s/^[[:space:]]*helm.sh\/helm\/v4 v\([0-9.]*\)$/\1/p" "$src/go.mod" | head -1)
kube=$(sed -n "s/^[[:space:]]*k8s.io\/kubectl v\([0-9.]*\)$/\1/p" "$src/go.mod" | head -1)
[ -n "$version" ] && [ -n "$kube" ] || { echo "cannot read helm's and kubectl's versions from $src/go.mod" >&2; exit 2; }
minor=$(echo "$kube" | cut -d. -f2)
# The cache key is the versions plus the hash of the wrapper, so an edit rebuilds.
key=$(cat "$src/go.mod" "$src/go.sum" "$src/helm/main.go" "$src/kubectl/main.go" | sha256sum | cut -c1-12)
out="$top/.cache/helm/v$version-$key"
if [ -x "$out/helm" ] && [ -x "$out/kubectl" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"
export GOTOOLCHAIN=local CGO_ENABLED=0
# Go's caches inside the project's ignored folder, as for kube-apiserver.
export GOMODCACHE="${GOMODCACHE:-$top/.cache/go/mod}" GOCACHE="${GOCACHE:-$top/.cache/go/build}"
start=$(date +%s)
echo "building helm v$version and kubectl v$kube (first time only, a few minutes on 2 cores)" >&2
# One `go build` for both: the k8s.io packages they share compile once.
(cd "$src" && go build -trimpath -o "$out/tmp/" -ldflags "-s -w \
  -X helm.sh/helm/v4/internal/version.version=v$version \
  -X k8s.io/component-base/version.gitVersion=v$kube \
  -X k8s.io/component-base/version.gitMajor=1 \
  -X k8s.io/component-base/version.gitMinor=$minor \
  -X k8s.io/client-go/pkg/version.gitVersion=v$kube \
  -X k8s.io/client-go/pkg/version.gitMajor=1 \
  -X k8s.io/client-go/pkg/version.gitMinor=$minor" ./helm ./kubectl) >&2
mv "$out/tmp/helm" "$out/tmp/kubectl" "$out/"
rmdir "$out/tmp"
# The compile cache serves only a rebuild of these same binaries, which the
# key above skips; the module cache stays (see build-kube-apiserver.sh).
go clean -cache >&2
echo "built helm and kubectl in $(( $(date +%s) - start ))s, $(du -h "$out/helm" | cut -f1) and $(du -h "$out/kubectl" | cut -f1)" >&2
echo "$out"
