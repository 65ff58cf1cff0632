//go:build tools

// Keeps the krew command in the module graph so `go mod tidy` records every
// dependency it needs.
package tools

import (
	_ "sigs.k8s.io/krew/cmd/krew"
)
