//go:build tools

// Package tools pins the servers of the test bed's control plane: tools/kube/build.sh builds them from these imports.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
