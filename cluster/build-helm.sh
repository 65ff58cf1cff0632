#!/usr/bin/env bash
# Builds the helm client from the wrapper module in cluster/helm (one pinned
# release of helm.sh/helm/v4) into OUT_DIR (default: the version-keyed cache,
# beside the control plane's). Prints the directory that holds `helm`.
# Usage: cluster/build-helm.sh [OUT_DIR]
exec bash "$(dirname "${BASH_SOURCE[0]}")/build-go-tool.sh" helm "$@"
