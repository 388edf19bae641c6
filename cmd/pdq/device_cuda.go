//go:build cuda

package main

import (
	"fmt"
	"log/slog"

	"pdq/kernels"
	"pdq/kernels/cuda"
)

// pickBackend chooses the compute backend: cpu; cuda, every visible GPU (CUDA_VISIBLE_DEVICES
// applies); cuda:0,3, those; or auto, which takes every GPU when the driver reports one and
// the CPU otherwise, saying so in one line. The binary starts without a driver (the driver is
// loaded when first used), so auto serves machines with and without GPUs. It returns the
// device name recorded in the report.
func pickBackend(device string) (kernels.Backend, string, error) {
	d, err := parseDevice(device)
	if err != nil {
		return nil, "", err
	}
	if d.kind == "cpu" {
		return nil, "cpu", nil
	}
	b, err := cuda.Open(d.ordinals)
	if err != nil {
		if d.kind == "cuda" {
			return nil, "", fmt.Errorf("--device %s: %w (use --device auto or cpu on a machine without a usable GPU)", device, err)
		}
		slog.Warn("no usable GPU, converting on the CPU", "err", err)
		return nil, "cpu", nil
	}
	return b, b.DeviceName(), nil
}
