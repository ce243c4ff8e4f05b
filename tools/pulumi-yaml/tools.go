//go:build tools

// Package tools pins the YAML language host that build.sh builds.
package tools

import _ "github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml"
