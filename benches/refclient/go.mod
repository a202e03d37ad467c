module github.com/kubectl-cilium-gc/kubectl-cilium-gc/benches/refclient

go 1.25.0
