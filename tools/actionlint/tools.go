//go:build tools

// Package tools pins actionlint, which the suite runs on programs/gitops' workflow: tools/actionlint/build.sh
// builds it from this import.
package tools

import (
	_ "github.com/rhysd/actionlint/cmd/actionlint"
)
