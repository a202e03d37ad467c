//go:build !cilium_v1_15

package main

import (
	"io"
	"log/slog"

	"github.com/cilium/cilium/pkg/labelsfilter"
)

const ciliumRelease = "v1.19.3"

// parse sets the filter as a current agent does: the default prefixes (no
// label-prefix-file), the `labels` option, no node label prefixes.
func parse(filter []string) error {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	return labelsfilter.ParseLabelPrefixCfg(logger, filter, nil, "")
}
