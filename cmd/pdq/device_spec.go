package main

import (
	"strconv"
	"strings"
)

// deviceSpec is a parsed --device value.
type deviceSpec struct {
	kind     string // "auto", "cpu" or "cuda"
	ordinals []int  // cuda:0,3: these devices (after CUDA_VISIBLE_DEVICES); nil: all
}

// parseDevice parses --device: auto, cpu, cuda (every visible GPU) or cuda:I,J,... (those
// ordinals among the visible GPUs, each once).
func parseDevice(s string) (deviceSpec, error) {
	switch s {
	case "", "auto":
		return deviceSpec{kind: "auto"}, nil
	case "cpu", "cuda":
		return deviceSpec{kind: s}, nil
	}
	list, ok := strings.CutPrefix(s, "cuda:")
	if !ok {
		return deviceSpec{}, usagef("--device %q: want auto, cpu, cuda (every GPU) or cuda:0,3 (some)", s)
	}
	d := deviceSpec{kind: "cuda"}
	seen := map[int]bool{}
	for f := range strings.SplitSeq(list, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i < 0 {
			return deviceSpec{}, usagef("--device %q: %q is not a GPU ordinal (want e.g. cuda:0,3)", s, f)
		}
		if seen[i] {
			return deviceSpec{}, usagef("--device %q: GPU %d named twice", s, i)
		}
		seen[i] = true
		d.ordinals = append(d.ordinals, i)
	}
	return d, nil
}
