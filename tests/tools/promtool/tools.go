//go:build tools

// Package tools pins promtool, which checks and unit-tests the published
// alerting rules and checks every metrics output. ../build.sh builds it;
// nothing imports this file.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
