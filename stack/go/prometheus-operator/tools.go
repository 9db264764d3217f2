//go:build tools

// Package tools pins the Prometheus Operator's controller command this module builds.
package tools

import (
	_ "github.com/prometheus-operator/prometheus-operator/cmd/operator"
)
