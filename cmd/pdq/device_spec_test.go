package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseDevice(t *testing.T) {
	cases := []struct {
		in, kind string
		ords     []int
		err      string
	}{
		{in: "", kind: "auto"},
		{in: "auto", kind: "auto"},
		{in: "cpu", kind: "cpu"},
		{in: "cuda", kind: "cuda"},
		{in: "cuda:0", kind: "cuda", ords: []int{0}},
		{in: "cuda:0,3", kind: "cuda", ords: []int{0, 3}},
		{in: "cuda:3, 1", kind: "cuda", ords: []int{3, 1}},
		{in: "tpu", err: "want auto, cpu, cuda"},
		{in: "cuda:", err: "not a GPU ordinal"},
		{in: "cuda:a", err: "not a GPU ordinal"},
		{in: "cuda:-1", err: "not a GPU ordinal"},
		{in: "cuda:1,1", err: "GPU 1 named twice"},
	}
	for _, c := range cases {
		d, err := parseDevice(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one containing %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || d.kind != c.kind || !slices.Equal(d.ordinals, c.ords) {
			t.Errorf("%q: %+v, %v; want %s %v", c.in, d, err, c.kind, c.ords)
		}
	}
}
