//go:build cilium_v1_15

package main

import "github.com/cilium/cilium/pkg/labelsfilter"

const ciliumRelease = "v1.15.6"

// parse sets the filter as a 1.15 agent does: the default prefixes (no
// label-prefix-file) plus the `labels` option.
func parse(filter []string) error {
	return labelsfilter.ParseLabelPrefixCfg(filter, "")
}
