//go:build tools

// Package tools pins the two servers of the test bed: tools/kube/build.sh builds them from these imports.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
