//go:build !cuda

package main

import (
	"strings"
	"testing"
)

// TestPickBackendPureGo: the pure-Go build converts on the CPU for auto and cpu, and refuses
// every cuda form naming the build that has it.
func TestPickBackendPureGo(t *testing.T) {
	for _, d := range []string{"", "auto", "cpu"} {
		if b, name, err := pickBackend(d); b != nil || name != "cpu" || err != nil {
			t.Errorf("%q: %v %q %v, want the CPU", d, b, name, err)
		}
	}
	for _, d := range []string{"cuda", "cuda:0,3"} {
		if _, _, err := pickBackend(d); err == nil || !strings.Contains(err.Error(), "make build-cuda") {
			t.Errorf("%q: %v, want a refusal naming make build-cuda", d, err)
		}
	}
	if _, _, err := pickBackend("cuda:x"); err == nil || !strings.Contains(err.Error(), "not a GPU ordinal") {
		t.Errorf("cuda:x: %v", err)
	}
}
