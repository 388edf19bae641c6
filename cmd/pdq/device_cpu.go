//go:build !cuda

package main

import "pdq/kernels"

// pickBackend chooses the compute backend. This build has only the CPU backend.
func pickBackend(device string) (kernels.Backend, string, error) {
	d, err := parseDevice(device)
	if err != nil {
		return nil, "", err
	}
	if d.kind == "cuda" {
		return nil, "", usagef("--device %s: this pdq was built without CUDA support (build with: make build-cuda)", device)
	}
	return nil, "cpu", nil
}
