//go:build !cuda

package main

import "pdq/kernels"

// pickBackend chooses the compute backend. This build has only the CPU backend.
func pickBackend(device string) (kernels.Backend, string, error) {
	switch device {
	case "", "auto", "cpu":
		return nil, "cpu", nil
	case "cuda":
		return nil, "", usagef("--device cuda: this pdq was built without CUDA support (build with: make build-cuda)")
	}
	return nil, "", usagef("--device %q: want auto, cpu or cuda", device)
}
