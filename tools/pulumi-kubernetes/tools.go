//go:build tools

// Package tools pins the provider whose command build.sh copies in and builds (its schema must be embedded first).
package tools

import _ "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
