//go:build tools

// Package tools pins the pulumi CLI's module version, so build.sh builds the CLI this go.mod resolves.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
