package convert_test

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pdq/quantize"
	"pdq/quantize/convert"
	"pdq/safetensors"
)

const packedModule = "model.layers.1.mlp.experts.0.up_proj"

// zeros is a tensor of a hand-made checkpoint with all-zero bytes.
func zeros(name string, dt safetensors.DType, shape ...int64) raw {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	b, _ := dt.ByteSize(uint64(n))
	return raw{name, dt, shape, make([]byte, b)}
}

// int4Module is a symmetric pack-quantized INT4 module of 64×128 in groups of 32, with a valid
// weight_shape and unit BF16 scales.
func int4Module() []raw {
	shape := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 64), 128)
	scale := zeros(packedModule+".weight_scale", safetensors.BF16, 64, 4)
	for i := 0; i < len(scale.data); i += 2 {
		binary.LittleEndian.PutUint16(scale.data[i:], safetensors.Float32ToBF16(0.01))
	}
	return []raw{
		zeros(packedModule+".weight_packed", safetensors.I32, 64, 16),
		scale,
		{packedModule + ".weight_shape", safetensors.I64, []int64{2}, shape},
	}
}

// nvfp4Module is an nvfp4-pack-quantized module of 64×128 with a valid global scale.
func nvfp4Module() []raw {
	return []raw{
		zeros(packedModule+".weight_packed", safetensors.U8, 64, 64),
		zeros(packedModule+".weight_scale", safetensors.F8E4M3, 64, 8),
		{packedModule + ".weight_global_scale", safetensors.F32, []int64{1}, binary.LittleEndian.AppendUint32(nil, math.Float32bits(448))},
	}
}

// replace returns ts with the tensor of the given suffix replaced by x (dropped when x.name is "").
func replace(ts []raw, suffix string, x raw) []raw {
	var out []raw
	for _, t := range ts {
		if t.name != packedModule+suffix {
			out = append(out, t)
		} else if x.name != "" {
			out = append(out, x)
		}
	}
	if !strings.HasPrefix(x.name, packedModule) || x.name == "" {
		return out
	}
	for _, t := range out {
		if t.name == x.name {
			return out
		}
	}
	return append(out, x)
}

func ctConfig(format string) map[string]any {
	return map[string]any{"model_type": "deepseek_v3", "quantization_config": map[string]any{
		"quant_method": "compressed-tensors", "format": format,
		"config_groups": map[string]any{"group_0": map[string]any{"format": format, "targets": []string{"Linear"}}},
	}}
}

// TestPackedSourceRefusals: already-quantized modules whose headers do not fit their format,
// and quantizations pdq does not read, are refused when planning with the format's sentinel
// and the module's name.
func TestPackedSourceRefusals(t *testing.T) {
	int4, nv := ctConfig("pack-quantized"), ctConfig("nvfp4-pack-quantized")
	mp := packedModule
	for _, tc := range []struct {
		name string
		ts   []raw
		cfg  map[string]any
		want []error
	}{
		{"int4 packed dtype", replace(int4Module(), ".weight_packed", zeros(mp+".weight_packed", safetensors.I16, 64, 16)), int4, []error{convert.ErrPackedSource, safetensors.ErrUnsupportedDType}},
		{"int4 packed shape", replace(int4Module(), ".weight_packed", zeros(mp+".weight_packed", safetensors.I32, 64, 15)), int4, []error{convert.ErrPackedSource, quantize.ErrBadShape}},
		{"int4 scale dtype", replace(int4Module(), ".weight_scale", zeros(mp+".weight_scale", safetensors.F8E4M3, 64, 4)), int4, []error{convert.ErrPackedSource, safetensors.ErrUnsupportedDType}},
		{"int4 scale shape", replace(int4Module(), ".weight_scale", zeros(mp+".weight_scale", safetensors.BF16, 64, 3)), int4, []error{convert.ErrPackedSource, quantize.ErrBadShape}},
		{"int4 scale rows", replace(int4Module(), ".weight_scale", zeros(mp+".weight_scale", safetensors.BF16, 32, 4)), int4, []error{convert.ErrPackedSource, quantize.ErrBadShape}},
		{"int4 no scale", replace(int4Module(), ".weight_scale", raw{}), int4, []error{convert.ErrPackedSource}},
		{"int4 no shape", replace(int4Module(), ".weight_shape", raw{}), int4, []error{convert.ErrPackedSource}},
		{"int4 shape of 3", replace(int4Module(), ".weight_shape", zeros(mp+".weight_shape", safetensors.I64, 3)), int4, []error{convert.ErrPackedSource, quantize.ErrBadShape}},
		{"int4 shape dtype", replace(int4Module(), ".weight_shape", zeros(mp+".weight_shape", safetensors.F32, 2)), int4, []error{convert.ErrPackedSource, quantize.ErrBadShape}},
		{"int4 zero point dtype", replace(int4Module(), ".weight_zero_point", zeros(mp+".weight_zero_point", safetensors.F32, 8, 4)), int4, []error{convert.ErrPackedSource, safetensors.ErrUnsupportedDType}},
		{"int4 zero point shape", replace(int4Module(), ".weight_zero_point", zeros(mp+".weight_zero_point", safetensors.I32, 64, 4)), int4, []error{convert.ErrPackedSource, quantize.ErrBadShape}},
		{"nvfp4 global dtype", replace(nvfp4Module(), ".weight_global_scale", zeros(mp+".weight_global_scale", safetensors.BF16, 1)), nv, []error{convert.ErrPackedSource, safetensors.ErrUnsupportedDType}},
		{"nvfp4 global shape", replace(nvfp4Module(), ".weight_global_scale", zeros(mp+".weight_global_scale", safetensors.F32, 2)), nv, []error{convert.ErrPackedSource, quantize.ErrBadShape}},
		{"nvfp4 scale dtype", replace(nvfp4Module(), ".weight_scale", zeros(mp+".weight_scale", safetensors.BF16, 64, 8)), nv, []error{convert.ErrPackedSource, safetensors.ErrUnsupportedDType}},
		{"nvfp4 scale shape", replace(nvfp4Module(), ".weight_scale", zeros(mp+".weight_scale", safetensors.F8E4M3, 64, 4)), nv, []error{convert.ErrPackedSource, quantize.ErrBadShape}},
		{"nvfp4 packed dtype", replace(nvfp4Module(), ".weight_packed", zeros(mp+".weight_packed", safetensors.I8, 64, 64)), nv, []error{convert.ErrPackedSource}},
		{"mxfp4 scale shape", replace(nvfp4Module()[:1], "", zeros(mp+".weight_scale", safetensors.U8, 64, 8)), ctConfig("mxfp4-pack-quantized"), []error{convert.ErrPackedSource, quantize.ErrBadShape}},
		{"modelopt scale_2 shape", []raw{zeros(mp+".weight", safetensors.U8, 64, 64), zeros(mp+".weight_scale", safetensors.F8E4M3, 64, 8), zeros(mp+".weight_scale_2", safetensors.F32, 4)},
			map[string]any{"quantization_config": map[string]any{"quant_method": "modelopt", "quant_algo": "NVFP4"}}, []error{convert.ErrPackedSource, quantize.ErrBadShape}},
		{"config declares another format", int4Module(), nv, []error{convert.ErrPackedSource}},
		{"compressed-tensors format not read", int4Module(), ctConfig("marlin-24"), []error{convert.ErrQuantizedSource}},
		{"quant method not read", int4Module(), map[string]any{"quantization_config": map[string]any{"quant_method": "gptq"}}, []error{convert.ErrQuantizedSource}},
		{"modelopt algorithm not read", int4Module(), map[string]any{"quantization_config": map[string]any{"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}}, []error{convert.ErrQuantizedSource}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := writeCheckpoint(t, tc.ts, tc.cfg)
			_, err := tryPlan(t, src, convert.Options{})
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Fatalf("got %v, want %v", err, want)
				}
			}
			if errors.Is(err, convert.ErrPackedSource) && !strings.Contains(err.Error(), packedModule) {
				t.Errorf("error does not name the module: %v", err)
			}
		})
	}
}

// TestPackedSourceRunRefusals: values the headers cannot show (a weight_shape that contradicts
// the packed words, a global scale of zero) fail the run with the decoder's sentinel, and no
// output looks finished.
func TestPackedSourceRunRefusals(t *testing.T) {
	badShape := replace(int4Module(), ".weight_shape", raw{packedModule + ".weight_shape", safetensors.I64, []int64{2},
		binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 64), 120)})
	zeroGlobal := replace(nvfp4Module(), ".weight_global_scale", zeros(packedModule+".weight_global_scale", safetensors.F32, 1))
	nanScale := replace(int4Module(), ".weight_scale", raw{packedModule + ".weight_scale", safetensors.BF16, []int64{64, 4},
		append(binary.LittleEndian.AppendUint16(nil, 0x7fc0), make([]byte, 2*64*4-2)...)})
	for _, tc := range []struct {
		name string
		ts   []raw
		cfg  map[string]any
		want error
	}{
		{"weight_shape contradicts", badShape, ctConfig("pack-quantized"), quantize.ErrBadShape},
		{"global scale zero", zeroGlobal, ctConfig("nvfp4-pack-quantized"), quantize.ErrBadScale},
		{"scale NaN", nanScale, ctConfig("pack-quantized"), quantize.ErrBadScale},
	} {
		for _, only := range []convert.OutputKind{convert.KindPrefill, convert.KindDecode} {
			t.Run(tc.name+"/"+string(only), func(t *testing.T) {
				src := writeCheckpoint(t, tc.ts, tc.cfg)
				out := filepath.Join(t.TempDir(), "out")
				p, err := tryPlan(t, src, convert.Options{Only: only})
				if err != nil {
					t.Fatalf("plan: %v", err)
				}
				_, err = runPlan(p, out, convert.RunOptions{Workers: 1})
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				if !strings.Contains(err.Error(), packedModule) {
					t.Errorf("error does not name the module: %v", err)
				}
				if _, err := safetensors.Open(filepath.Join(out, string(only))); err == nil {
					t.Errorf("a refused run left a %s output that opens", only)
				}
			})
		}
	}
}

// TestAsymmetricInt4Source: an asymmetric pack-quantized INT4 module (zero points packed along
// the rows) decodes to (q − z)·s: the prefill output holds FP8 blocks of those values, and the
// decode output re-quantizes them (pdq writes symmetric INT4 only, so nothing passes through).
func TestAsymmetricInt4Source(t *testing.T) {
	const rows, cols, g = 64, 128, 32
	ts := int4Module()
	packed := make([]byte, rows*cols/2)
	zp := make([]byte, 4*(rows/8)*(cols/g))
	want := make([]float32, rows*cols)
	for i := range packed {
		packed[i] = byte(i*7+3) ^ byte(i>>5)
	}
	for i := range zp {
		zp[i] = byte(i*13 + 5)
	}
	for r := range rows {
		for c := range cols {
			i := r*cols + c
			q := int32(packed[i/2]>>(4*(i%2))&15) - 8
			w := binary.LittleEndian.Uint32(zp[4*((r/8)*(cols/g)+c/g):])
			z := int32(w>>(4*(r%8))&15) - 8
			want[i] = float32(q-z) * safetensors.BF16ToFloat32(safetensors.Float32ToBF16(0.01))
		}
	}
	ts = replace(ts, ".weight_packed", raw{packedModule + ".weight_packed", safetensors.I32, []int64{rows, cols / 8}, packed})
	ts = replace(ts, ".weight_zero_point", raw{packedModule + ".weight_zero_point", safetensors.I32, []int64{rows / 8, cols / g}, zp})
	src := writeCheckpoint(t, ts, ctConfig("pack-quantized"))
	out := filepath.Join(t.TempDir(), "out")
	rep := convertTo(t, src, out, convert.Options{}, convert.RunOptions{Workers: 1})
	pre := readTensors(t, filepath.Join(out, "prefill"))
	fp8, err := quantize.QuantizeFP8Block(t.Context(), want, rows, cols, quantize.FP8Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if string(pre[packedModule+".weight"].Raw) != string(fp8.Data) {
		t.Fatal("prefill FP8 codes are not those of (q − z)·s")
	}
	for _, r := range rep.Tensors {
		if r.Output == "decode" && r.Scheme != string(convert.SchemeInt4) {
			t.Errorf("decode row %s has scheme %q, want int4 (re-quantized)", r.Tensor, r.Scheme)
		}
	}
	if v := verifyDir(t, src, filepath.Join(out, "decode")); !v.OK() {
		t.Fatalf("verify: %v", v.Problems)
	}
}

// TestModelOptNVFP4Source: a ModelOpt NVFP4 module (U8 weight, e4m3 weight_scale, F32
// weight_scale_2 as a multiplier, a static input_scale) declared in hf_quant_config.json decodes
// to e4m3(S)·scale_2·value(code); its input scale is dropped with it.
func TestModelOptNVFP4Source(t *testing.T) {
	const rows, cols = 64, 128
	packed := make([]byte, rows*cols/2)
	scales := make([]byte, rows*cols/16)
	for i := range packed {
		packed[i] = byte(i*29+11) ^ byte(i>>3)
	}
	for i := range scales {
		scales[i] = byte(0x20 + i%0x40) // e4m3 codes from 2^-6·1.0 upwards, no NaN
	}
	const scale2 = float32(0.0013)
	ts := []raw{
		{packedModule + ".weight", safetensors.U8, []int64{rows, cols / 2}, packed},
		{packedModule + ".weight_scale", safetensors.F8E4M3, []int64{rows, cols / 16}, scales},
		{packedModule + ".weight_scale_2", safetensors.F32, []int64{}, binary.LittleEndian.AppendUint32(nil, math.Float32bits(scale2))},
		{packedModule + ".input_scale", safetensors.F32, []int64{}, binary.LittleEndian.AppendUint32(nil, math.Float32bits(1))},
	}
	src := writeCheckpoint(t, ts, map[string]any{"model_type": "deepseek_v3"})
	if err := os.WriteFile(filepath.Join(src, "hf_quant_config.json"), []byte(`{"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, rows*cols)
	for i := range want {
		s := safetensors.F8E4M3ToFloat32(scales[(i/cols)*(cols/16)+(i%cols)/16]) * scale2
		want[i] = e2m1Value(packed[i/2]>>(4*(i%2))&15) * s
	}
	out := filepath.Join(t.TempDir(), "out")
	convertTo(t, src, out, convert.Options{}, convert.RunOptions{Workers: 1})
	pre := readTensors(t, filepath.Join(out, "prefill"))
	fp8, err := quantize.QuantizeFP8Block(t.Context(), want, rows, cols, quantize.FP8Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if string(pre[packedModule+".weight"].Raw) != string(fp8.Data) {
		t.Fatal("prefill FP8 codes are not those of e4m3(S)·scale_2·value(code)")
	}
	dec := readTensors(t, filepath.Join(out, "decode"))
	for name := range dec {
		if strings.HasSuffix(name, "input_scale") || strings.HasSuffix(name, "weight_scale_2") {
			t.Errorf("decode output holds the source's %s", name)
		}
	}
	if dec[packedModule+".weight_packed"] == nil {
		t.Error("decode output has no INT4 module")
	}
}
