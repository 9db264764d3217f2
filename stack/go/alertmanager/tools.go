//go:build tools

// Package tools pins the alertmanager command this module builds.
package tools

import (
	_ "github.com/prometheus/alertmanager/cmd/alertmanager"
)
