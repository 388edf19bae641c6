package convert_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"pdq/quantize"
	"pdq/quantize/convert"
)

// TestGoldenEncodings pins, beside TestGoldenOutputs, the bytes of the encodings and paths those
// five conversions do not take: one scale per channel, signed scales, FP8 dense layers in the
// decode output (quantized from dense values, or kept from an FP8 source), the calibrated
// searches (weighted, GPTQ with activation order), either output alone, and sources that cut
// into several bands with a short last one (BF16, F16, FP8 blocks, compressed-tensors FP8 per
// channel). The hashes are those of the conversion before the encodings were one table.
func TestGoldenEncodings(t *testing.T) {
	if testing.Short() {
		t.Skip("seventeen conversions")
	}
	glm, ds, bands := glm4Source(t), deepseekSource(t), bandSources(t)
	stats := filepath.Join(t.TempDir(), "stats.safetensors")
	writeStats(t, glm, stats, 1, 0)
	st := openStats(t, stats)
	for _, tc := range []struct {
		name          string
		src           string
		o             convert.Options
		files, report string
	}{
		{"glm4-mse-channel", glm, convert.Options{GroupSize: convert.PerChannel, Method: quantize.MethodMSE}, "6fb6237372e4b1fb", "b5d251004ac7325d"},
		{"glm4-rtn-g64-densefp8", glm, convert.Options{GroupSize: 64, Method: quantize.MethodRTN, DecodeDense: convert.DenseFP8}, "62ea552a2c8b307d", "9ac4d8abcb88b1ee"},
		{"deepseek-rtn-g32-densefp8", ds, convert.Options{GroupSize: 32, Method: quantize.MethodRTN, DecodeDense: convert.DenseFP8}, "243ff9e77457e5ef", "e28623c335314375"},
		{"glm4-signed", glm, convert.Options{GroupSize: 32, Method: quantize.MethodMSE, SignedScales: true}, "13c55c380244035d", "a47744a359b92d1d"},
		{"glm4-weighted", glm, convert.Options{GroupSize: 32, Calib: st, CalibMethod: convert.CalibWeighted}, "3ddcef1782c0f43b", "b9dc763a8b9feec2"},
		{"glm4-weighted-channel", glm, convert.Options{GroupSize: convert.PerChannel, Calib: st, CalibMethod: convert.CalibWeighted}, "23dc3d1b6c955098", "7a1f9b3706f83412"},
		{"glm4-gptq", glm, convert.Options{GroupSize: 32, Calib: st, CalibMethod: convert.CalibGPTQ, CalibActOrder: true}, "9b1bcda12f16ec76", "3881810bb9cdd8c4"},
		{"glm4-decode-only", glm, convert.Options{GroupSize: 32, Only: convert.KindDecode}, "ec3534f90e77aa06", "395512397e24c5b7"},
		{"glm4-prefill-only", glm, convert.Options{GroupSize: 32, Only: convert.KindPrefill}, "1fe2989b060fa2c6", "ca7325a514503083"},
		{"bands-bf16-mse", bands["bf16"], convert.Options{GroupSize: 32, Method: quantize.MethodMSE}, "2777bd8a06ff88c8", "7b38c1f83b505a95"},
		{"bands-bf16-densefp8", bands["bf16"], convert.Options{GroupSize: 128, Method: quantize.MethodRTN, DecodeDense: convert.DenseFP8}, "3e8329d16b3ed9b4", "67fc95d5ecadc83f"},
		{"bands-f16-mse", bands["f16"], convert.Options{GroupSize: 32, Method: quantize.MethodMSE}, "805c17939d14254d", "0ebce6b5da5e3c36"},
		{"bands-f16-densefp8", bands["f16"], convert.Options{GroupSize: 128, Method: quantize.MethodRTN, DecodeDense: convert.DenseFP8}, "3857965bf2513b37", "8d1473df8a1fd28c"},
		{"bands-fp8block-mse", bands["fp8block"], convert.Options{GroupSize: 32, Method: quantize.MethodMSE}, "4d8a60080406a4c4", "7b50d5d5803b90d1"},
		{"bands-fp8block-densefp8", bands["fp8block"], convert.Options{GroupSize: 128, Method: quantize.MethodRTN, DecodeDense: convert.DenseFP8}, "04907ec4f5bc8d13", "e648743612539907"},
		{"bands-ctfp8-mse", bands["ctfp8"], convert.Options{GroupSize: 32, Method: quantize.MethodMSE}, "c5777fbce8a4c267", "324bcb5707fed327"},
		{"bands-ctfp8-densefp8", bands["ctfp8"], convert.Options{GroupSize: 128, Method: quantize.MethodRTN, DecodeDense: convert.DenseFP8}, "4294ce6e4099a77f", "bb5bb4dc13edc2f0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			tc.o.MaxShardSize = 1 << 20
			convertTo(t, tc.src, out, tc.o, convert.RunOptions{Workers: 2})
			files := outputFiles(t, out)
			report := reportWithoutPaths(t, files["report.json"])
			delete(files, "report.json")
			if got := hashFiles(files); got != tc.files {
				t.Errorf("checkpoint files hash %s, want %s", got, tc.files)
			}
			if got := hashFiles(map[string][]byte{"report.json": report}); got != tc.report {
				t.Errorf("report.json hash %s, want %s", got, tc.report)
			}
		})
	}
}

// reportWithoutPaths is reportWithoutSource without the statistics file's path either.
func reportWithoutPaths(t *testing.T, b []byte) []byte {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal(reportWithoutSource(t, b), &r); err != nil {
		t.Fatal(err)
	}
	if c, ok := r["calibration"].(map[string]any); ok {
		delete(c, "file")
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
