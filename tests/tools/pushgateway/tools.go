//go:build tools

// Package tools pins the real Prometheus Pushgateway the metrics tests push
// to. ../build.sh builds it; nothing imports this file.
package tools

import (
	_ "github.com/prometheus/pushgateway"
)
