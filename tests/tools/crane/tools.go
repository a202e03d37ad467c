//go:build tools

// Package tools pins go-containerregistry's crane (builds, pushes, pulls and
// inspects OCI images with no container daemon) and its registry (the
// registry the image tests push to on loopback). ../build.sh builds them;
// nothing imports this file.
package tools

import (
	_ "github.com/google/go-containerregistry/cmd/crane"
	_ "github.com/google/go-containerregistry/cmd/registry"
)
