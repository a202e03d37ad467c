//go:build tools

// Package tools pins what build.sh compiles: cilium-operator-generic and the
// packages the agents program (../agents, copied beside this file at build
// time) uses, so that go.mod and go.sum hold all of them.
package tools

import (
	_ "github.com/cilium/cilium/operator"
	_ "github.com/cilium/cilium/pkg/allocator"
	_ "github.com/cilium/cilium/pkg/k8s/identitybackend"
	_ "github.com/cilium/cilium/pkg/identity/cache"
)
