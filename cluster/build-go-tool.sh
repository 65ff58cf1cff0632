#!/usr/bin/env bash
# Builds one of the Go tools the tests and docs use from its wrapper module in
# cluster/TOOL (one pinned release in its go.mod) into OUT_DIR (default: the
# version-keyed cache, beside the control plane's). Prints the directory that
# holds the binary. Returns at once when the cache has it.
#   helm: the helm client (bin `helm`), for the chart's tests and `up --node`
#   krew: the kubectl plugin manager (bin `kubectl-krew`, so `kubectl krew` finds it)
# Usage: cluster/build-go-tool.sh helm|krew [OUT_DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tool="${1:-}"
case "$tool" in
  helm) module=helm.sh/helm/v4 bin=helm ;;
  krew) module=sigs.k8s.io/krew bin=kubectl-krew ;;
  *)
    echo "usage: cluster/build-go-tool.sh helm|krew [OUT_DIR] (got \"$tool\")" >&2
    exit 2
    ;;
esac
mod="$here/$tool"
version="$(sed -nE "s#^(require)?[[:space:]]*${module//./\\.}[[:space:]]+(v[^[:space:]]+).*#\\2#p" "$mod/go.mod" | head -n1)"
if [ -z "$version" ]; then
  echo "cluster/build-go-tool.sh: cannot read the $module version from $mod/go.mod" >&2
  exit 1
fi
case "$tool" in
  helm)
    pkg=helm.sh/helm/v4/cmd/helm
    ldflags="-X helm.sh/helm/v4/internal/version.version=$version -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
    ;;
  krew)
    pkg=sigs.k8s.io/krew/cmd/krew
    ldflags="-X sigs.k8s.io/krew/internal/version.gitTag=$version"
    ;;
esac
out="${2:-${KUBEGC_CACHE_DIR:-$HOME/.cache/kubegc}/$tool/$version}"
if ! command -v go >/dev/null 2>&1; then
  echo "cluster/build-go-tool.sh: no Go toolchain on PATH. Install Go >= 1.26 (https://go.dev/doc/install) and retry." >&2
  exit 127
fi
mkdir -p "$out"
if [ ! -x "$out/$bin" ]; then
  echo "building $tool ($version) ..." >&2
  start=$SECONDS
  cd "$mod"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$out/$bin.tmp.$$" "$pkg"
  mv "$out/$bin.tmp.$$" "$out/$bin"
  echo "built $tool in $((SECONDS - start))s" >&2
fi
echo "$out"
