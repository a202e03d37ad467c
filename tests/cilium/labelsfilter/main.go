// Command labelsfilter runs Cilium's own identity label filter
// (pkg/labelsfilter) of one release on label sets and filters read from
// stdin, and prints which labels it keeps: the judge of the plugin's
// `diagnose --labels` (tests/it/diagnose/labels_filter.rs).
//
// Input, one JSON document:
//
//	{"cases": [{"filter": ["k8s:!app", "..."], "labels": ["k8s:app=x", "..."]}]}
//
// `filter` is the `labels` option split on white space, as the agent reads
// it; `labels` are Cilium labels `source:key=value`. Output, one JSON
// document: {"release": "v1.19.3", "results": [{"kept": ["k8s:app", ...]} or
// {"error": "..."}]}, one result per case, kept labels as `source:key`,
// sorted. Built by ../labelsfilter.sh with the release's go.mod.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/cilium/cilium/pkg/labels"
	"github.com/cilium/cilium/pkg/labelsfilter"
)

type input struct {
	Cases []struct {
		Filter []string `json:"filter"`
		Labels []string `json:"labels"`
	} `json:"cases"`
}

type result struct {
	Kept  []string `json:"kept"`
	Error string   `json:"error,omitempty"`
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintf(os.Stderr, "labelsfilter: bad input: %v\n", err)
		os.Exit(2)
	}
	out := struct {
		Release string   `json:"release"`
		Results []result `json:"results"`
	}{Release: ciliumRelease, Results: []result{}}
	for _, c := range in.Cases {
		// Each case configures the package-wide filter afresh, as an
		// agent does once at start.
		if err := parse(c.Filter); err != nil {
			out.Results = append(out.Results, result{Kept: []string{}, Error: err.Error()})
			continue
		}
		kept, _ := labelsfilter.Filter(labels.NewLabelsFromModel(c.Labels))
		r := result{Kept: []string{}}
		for _, l := range kept {
			r.Kept = append(r.Kept, l.Source+":"+l.Key)
		}
		sort.Strings(r.Kept)
		out.Results = append(out.Results, r)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(1)
	}
}
