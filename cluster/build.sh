#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kubectl and etcd, and for
# `up --node` kube-scheduler and kubelet, from the wrapper module in
# cluster/k8s into OUT_DIR (default: the version-keyed cache).
# Usage: cluster/build.sh [OUT_DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$here/k8s"
# The pinned release, whether go.mod writes `require k8s.io/kubernetes vX` or a block.
version="$(sed -nE 's/^(require)?[[:space:]]*k8s\.io\/kubernetes[[:space:]]+(v[^[:space:]]+).*/\2/p' "$mod/go.mod" | head -n1)"
if [ -z "$version" ]; then
  echo "cluster/build.sh: cannot read the k8s.io/kubernetes version from $mod/go.mod" >&2
  exit 1
fi
out="${1:-${KUBEGC_CACHE_DIR:-$HOME/.cache/kubegc}/k8s/$version}"

if ! command -v go >/dev/null 2>&1; then
  echo "cluster/build.sh: no Go toolchain on PATH. Install Go >= 1.25 (https://go.dev/doc/install) and retry." >&2
  exit 127
fi

major="${version#v}"; major="${major%%.*}"
minor="${version#v*.}"; minor="${minor%%.*}"
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

mkdir -p "$out"
cd "$mod"
export CGO_ENABLED=0
build() { # name package
  if [ -x "$out/$1" ]; then return 0; fi
  echo "building $1 ($version) ..." >&2
  local start=$SECONDS
  go build -trimpath -ldflags "-s -w$stamp" -o "$out/$1.tmp" "$2"
  mv "$out/$1.tmp" "$out/$1"
  echo "built $1 in $((SECONDS - start))s" >&2
}
build etcd ./cmd/etcd
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kubectl k8s.io/kubernetes/cmd/kubectl
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build kubelet k8s.io/kubernetes/cmd/kubelet
echo "$out"
