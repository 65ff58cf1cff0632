#!/usr/bin/env bash
# Builds the helm client from the wrapper module in cluster/helm (one pinned
# release of helm.sh/helm/v4) into OUT_DIR (default: the version-keyed cache,
# beside the control plane's). Prints the directory that holds `helm`.
# Usage: cluster/build-helm.sh [OUT_DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$here/helm"
version="$(sed -nE 's/^(require)?[[:space:]]*helm\.sh\/helm\/v4[[:space:]]+(v[^[:space:]]+).*/\2/p' "$mod/go.mod" | head -n1)"
if [ -z "$version" ]; then
  echo "cluster/build-helm.sh: cannot read the helm.sh/helm/v4 version from $mod/go.mod" >&2
  exit 1
fi
out="${1:-${KUBEGC_CACHE_DIR:-$HOME/.cache/kubegc}/helm/$version}"
if ! command -v go >/dev/null 2>&1; then
  echo "cluster/build-helm.sh: no Go toolchain on PATH. Install Go >= 1.26 (https://go.dev/doc/install) and retry." >&2
  exit 127
fi
mkdir -p "$out"
if [ ! -x "$out/helm" ]; then
  echo "building helm ($version) ..." >&2
  start=$SECONDS
  cd "$mod"
  CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
    -o "$out/helm.tmp.$$" helm.sh/helm/v4/cmd/helm
  mv "$out/helm.tmp.$$" "$out/helm"
  echo "built helm in $((SECONDS - start))s" >&2
fi
echo "$out"
