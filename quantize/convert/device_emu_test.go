//go:build cudaemu

package convert_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"pdq/kernels/cuda/emu"
	"pdq/quantize/convert"
)

// TestDeviceEmulated: conversions on the CUDA backend's host code over the emulated kernels
// (make test-cuda-emu), served as one and as three devices, write the CPU's bytes: BF16, F16
// and FP8-block sources, the weighted search and GPTQ with statistics, which then run on the
// devices too, and the FP4 formats.
func TestDeviceEmulated(t *testing.T) {
	stats := filepath.Join(t.TempDir(), "stats.safetensors")
	writeStats(t, glm4Source(t), stats, 1, 0)
	cases := []struct {
		name string
		src  string
		o    convert.Options
	}{
		{"bf16", glm4Source(t), convert.Options{GroupSize: 32, MaxShardSize: 1 << 20}},
		{"f16", glm4F16Source(t), convert.Options{GroupSize: 64, MaxShardSize: 1 << 20}},
		{"fp8", deepseekSource(t), convert.Options{GroupSize: 32, MaxShardSize: 1 << 20}},
		{"weighted", glm4Source(t), convert.Options{GroupSize: 32, MaxShardSize: 1 << 20, Calib: openStats(t, stats),
			CalibMethod: convert.CalibWeighted}},
		{"gptq", glm4Source(t), convert.Options{GroupSize: 32, MaxShardSize: 1 << 20, Calib: openStats(t, stats),
			CalibMethod: convert.CalibGPTQ, CalibActOrder: true}},
		// No device runs the FP4 loops: their encoders take the device's decoded slabs on the CPU.
		{"nvfp4-fp8", deepseekSource(t), convert.Options{DecodeFormat: convert.DecodeNVFP4, MaxShardSize: 1 << 20}},
		{"mxfp4-bf16", glm4Source(t), convert.Options{DecodeFormat: convert.DecodeMXFP4, MaxShardSize: 1 << 20}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "cpu")
			convertTo(t, c.src, out, c.o, convert.RunOptions{Workers: 2})
			want := outputFiles(t, out)
			for _, n := range []int{1, 3} {
				d, err := emu.NewDevices(n, 2)
				if err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(t.TempDir(), fmt.Sprintf("devices-%d", n))
				convertTo(t, c.src, out, c.o, convert.RunOptions{Workers: 4, Backend: d})
				sameFiles(t, fmt.Sprintf("%s: cpu vs %d emulated devices", c.name, n), want, outputFiles(t, out))
				for i, s := range d.Served() {
					if s == 0 {
						t.Errorf("%d devices: device %d served no call", n, i)
					}
				}
				d.Close()
			}
		})
	}
}
