//go:build cuda

package main

import (
	"fmt"
	"log/slog"

	"pdq/kernels"
	"pdq/kernels/cuda"
)

// pickBackend chooses the compute backend: cuda (device 0), cpu, or auto, which takes the GPU
// when the driver reports one and the CPU otherwise. It returns the device name recorded in the
// report. Note that this build cannot start at all without libcuda.so.1 and a working driver
// (gorgonia.org/cu initializes it when the program loads); use the pure-Go build elsewhere.
func pickBackend(device string) (kernels.Backend, string, error) {
	switch device {
	case "cpu":
		return nil, "cpu", nil
	case "", "auto", "cuda":
	default:
		return nil, "", usagef("--device %q: want auto, cpu or cuda", device)
	}
	b, err := openGPU()
	if err != nil {
		if device == "cuda" {
			return nil, "", fmt.Errorf("--device cuda: %w", err)
		}
		slog.Warn("no usable GPU, converting on the CPU", "err", err)
		return nil, "cpu", nil
	}
	return b, b.DeviceName(), nil
}

// openGPU opens device 0; the backend lives as long as the process.
func openGPU() (*cuda.Backend, error) {
	n, err := cuda.Devices()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, cuda.ErrNoDevice
	}
	return cuda.New(0)
}
