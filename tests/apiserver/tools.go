//go:build tools

// Package tools pins the commands the end-to-end suite builds: the real
// kube-apiserver, kubectl from the same release, and etcd at the version
// that release requires. build.sh builds them; nothing imports this file.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
