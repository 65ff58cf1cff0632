//go:build tools

// Keeps the helm command in the module graph so `go mod tidy` records every
// dependency it needs.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
