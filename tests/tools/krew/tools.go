//go:build tools

// Package tools pins krew and krew's manifest validator, the tools a
// krew-index reviewer runs. ../build.sh builds them; nothing imports this file.
package tools

import (
	_ "sigs.k8s.io/krew/cmd/krew"
	_ "sigs.k8s.io/krew/cmd/validate-krew-manifest"
)
