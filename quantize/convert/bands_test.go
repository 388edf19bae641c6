package convert_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"pdq/quantize"
	"pdq/quantize/convert"
	"pdq/safetensors"
)

// bandSources are checkpoints whose tensors cut into several bands, with a last band of fewer
// than 128 rows, and one tensor of two slabs: a BF16 source, the same in F16, an FP8 one with
// 128x128 block scales, and a compressed-tensors FP8 one with a scale per output channel (the
// scales differ from block to block and from row to row). Three INT4 experts of two shapes, so
// that with two workers one of them quantizes a slab after another of another shape.
func bandSources(t *testing.T) map[string]string {
	const attn = "model.layers.1.self_attn.q_proj"
	experts := []struct {
		name       string
		rows, cols int64
	}{
		{"model.layers.1.mlp.experts.0.gate_proj", 300, 1024},
		{"model.layers.1.mlp.experts.1.gate_proj", 260, 512},
		{"model.layers.1.mlp.experts.2.gate_proj", 300, 1024},
	}
	glm := map[string]any{"model_type": "glm4_moe"}
	ct := map[string]any{"model_type": "glm4_moe", "quantization_config": map[string]any{
		"quant_method": "compressed-tensors", "format": "float-quantized"}}
	var bf16, f16, fp8, ctfp8 []raw
	bf16 = append(bf16, bf16Tensor("model.embed_tokens.weight", 1, 16, 1024), bf16Tensor(attn+".weight", 3, 2100, 2048))
	f16 = append(f16, f16Tensor("model.embed_tokens.weight", 1, 16, 1024), f16Tensor(attn+".weight", 3, 2100, 2048))
	fp8 = append(fp8, bf16Tensor("model.embed_tokens.weight", 1, 16, 1024))
	fp8 = append(fp8, fp8Tensor(attn+".weight", 3, 2100, 2048, false)...)
	ctfp8 = append(ctfp8, bf16Tensor("model.embed_tokens.weight", 1, 16, 1024))
	ctfp8 = append(ctfp8, ctFP8Tensor(attn, 3, 300, 512)...)
	for i, e := range experts {
		seed := uint64(10 + i)
		bf16 = append(bf16, bf16Tensor(e.name+".weight", seed, e.rows, e.cols))
		f16 = append(f16, f16Tensor(e.name+".weight", seed, e.rows, e.cols))
		fp8 = append(fp8, fp8Tensor(e.name+".weight", seed, e.rows, e.cols, false)...)
		ctfp8 = append(ctfp8, ctFP8Tensor(e.name, seed, e.rows, e.cols)...)
	}
	return map[string]string{
		"bf16":     writeCheckpoint(t, bf16, glm),
		"f16":      writeCheckpoint(t, f16, glm),
		"fp8block": writeCheckpoint(t, varyScales(fp8), fp8Config),
		"ctfp8":    writeCheckpoint(t, varyScales(ctfp8), ct),
	}
}

// f16Tensor is bf16Tensor in F16.
func f16Tensor(name string, seed uint64, shape ...int64) raw {
	x := bf16Tensor(name, seed, shape...)
	for i := 0; i < len(x.data); i += 2 {
		v := safetensors.BF16ToFloat32(binary.LittleEndian.Uint16(x.data[i:]))
		binary.LittleEndian.PutUint16(x.data[i:], safetensors.Float32ToF16(v))
	}
	x.dtype = safetensors.F16
	return x
}

// varyScales gives every FP8 scale among ts (F32 tensors) a value of its own, 0.5 to 2 times
// the one it has: with equal scales a band that decoded its rows with another band's scales
// would go unnoticed.
func varyScales(ts []raw) []raw {
	for _, x := range ts {
		if x.dtype != safetensors.F32 {
			continue
		}
		for i := 0; i < len(x.data); i += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(x.data[i:]))
			binary.LittleEndian.PutUint32(x.data[i:], math.Float32bits(v*(0.5+float32(i/4%7)/4)))
		}
	}
	return ts
}

// TestBandsAsWholeSlabs: slabs decoded and quantized band by band give every byte of both
// outputs and of the report that whole slabs give, for each source layout and the options that
// change which quantizers run (rtn, mse, group sizes, one scale per channel, FP8 dense layers in
// the decode output, either output alone).
func TestBandsAsWholeSlabs(t *testing.T) {
	if testing.Short() {
		t.Skip("30 conversions of 10 MiB checkpoints, each both ways")
	}
	opts := map[string]convert.Options{
		"rtn-g32":          {GroupSize: 32, Method: quantize.MethodRTN},
		"mse-g128":         {GroupSize: 128, Method: quantize.MethodMSE},
		"mse-channel":      {GroupSize: convert.PerChannel, Method: quantize.MethodMSE},
		"rtn-g64-densefp8": {GroupSize: 64, Method: quantize.MethodRTN, DecodeDense: convert.DenseFP8},
		"rtn-decode-only":  {GroupSize: 32, Method: quantize.MethodRTN, Only: convert.KindDecode},
		"prefill-only":     {GroupSize: 32, Method: quantize.MethodRTN, Only: convert.KindPrefill},
		"nvfp4-mse":        {DecodeFormat: convert.DecodeNVFP4, Method: quantize.MethodMSE},
		"mxfp4-rtn":        {DecodeFormat: convert.DecodeMXFP4, Method: quantize.MethodRTN, Only: convert.KindDecode},
	}
	for name, src := range bandSources(t) {
		for oname, o := range opts {
			if o.Only == convert.KindPrefill && strings.Contains(name, "fp8") {
				continue // an FP8 source's prefill is its bytes: no values, no bands
			}
			t.Run(name+"/"+oname, func(t *testing.T) {
				o.MaxShardSize = 4 << 20
				bands := filepath.Join(t.TempDir(), "bands")
				n := convert.BandSlabs()
				convertTo(t, src, bands, o, convert.RunOptions{Workers: 2})
				if convert.BandSlabs() == n {
					t.Fatal("no slab went through in bands")
				}
				restore := convert.SetWholeSlabs(true)
				defer restore()
				whole := filepath.Join(t.TempDir(), "whole")
				n = convert.BandSlabs()
				convertTo(t, src, whole, o, convert.RunOptions{Workers: 2})
				if convert.BandSlabs() != n {
					t.Fatal("slabs went through in bands with whole slabs set")
				}
				sameFiles(t, "bands against whole slabs", outputFiles(t, whole), outputFiles(t, bands))
			})
		}
	}
}

// TestNonFiniteLaterBand: a NaN in a later band of a later slab of an expert is reported at its
// row and element in the tensor (not in its slab or band), by the quantizer that meets it first,
// both ways through the worker.
func TestNonFiniteLaterBand(t *testing.T) {
	if testing.Short() {
		t.Skip("writes an 8 MiB tensor")
	}
	const expert = "model.layers.1.mlp.experts.0.gate_proj.weight"
	const rows, cols = 4200, 1024 // slabs of 4096 and 104 rows
	const bad = 4150*cols + 5
	ts := []raw{bf16Tensor("model.embed_tokens.weight", 1, 16, 1024), bf16Tensor(expert, 2, rows, cols)}
	src := writeCheckpoint(t, withBF16(ts, expert, bad, 0x7fc0), map[string]any{"model_type": "glm4_moe"})
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprintf("whole=%v", whole), func(t *testing.T) {
			defer convert.SetWholeSlabs(whole)()
			for _, only := range []convert.OutputKind{"", convert.KindDecode} {
				o := smallOptions
				o.Only = only
				_, err := runPlan(plan(t, src, o), filepath.Join(t.TempDir(), "out"), convert.RunOptions{Workers: 2})
				want := fmt.Sprintf("element %d (row %d, column %d) is NaN", bad, bad/cols, bad%cols)
				if !errors.Is(err, quantize.ErrNonFinite) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), expert) {
					t.Errorf("only %q: got %v, want ErrNonFinite naming %s at %q", only, err, expert, want)
				}
			}
		})
	}
}
