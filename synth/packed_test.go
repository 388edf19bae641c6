package synth

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"pdq/internal/floatcodec"
	"pdq/safetensors"
)

// TestQuantizedExperts: every routed expert of a quantized-experts checkpoint is stored in its
// format's tensors, and read back by the layout's own rules (nibble order, scale meaning) it is
// close to the values the generator drew (a wrong packing or scale would be far off); the rest
// is BF16 and the config declares the format.
func TestQuantizedExperts(t *testing.T) {
	for _, tc := range []struct {
		format  string
		minSQNR float64 // dB; 4-bit formats on normal data give about 18-21
	}{{ExpertsInt4, 15}, {ExpertsNVFP4, 15}, {ExpertsMXFP4, 13}} {
		t.Run(tc.format, func(t *testing.T) {
			o := Options{Model: Tiny(StyleDeepSeek), Seed: 9, MaxShardBytes: 1 << 20, Workers: 2, ExpertFormat: tc.format}
			ck, err := safetensors.Open(generate(t, o))
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			read := func(name string) []byte {
				x := ck.Tensor(name)
				if x == nil {
					t.Fatalf("no tensor %s", name)
				}
				b := make([]byte, x.ByteSize())
				if err := ck.ReadTensor(x, b); err != nil {
					t.Fatal(err)
				}
				return b
			}
			experts := 0
			for _, tn := range o.Model.Tensors() {
				if !o.packedExpert(tn) {
					if x := ck.Tensor(tn.Name); x == nil && !tn.F32 {
						t.Fatalf("dense tensor %s missing", tn.Name)
					}
					continue
				}
				experts++
				rows, cols := int(tn.Shape[0]), int(tn.Shape[1])
				want := make([]float32, rows*cols)
				newValueGen(o.Seed, tn).fill(want)
				m := strings.TrimSuffix(tn.Name, ".weight")
				got := dequantize(tc.format, read(m+".weight_packed"), read(m+".weight_scale"), ck.Tensor(m+".weight_global_scale"), read, rows, cols)
				var ref, diff float64
				for i := range want {
					ref += float64(want[i]) * float64(want[i])
					diff += math.Pow(float64(want[i]-got[i]), 2)
				}
				if s := 10 * math.Log10(ref/diff); s < tc.minSQNR {
					t.Fatalf("%s: SQNR %.1f dB against the drawn values, want at least %v", m, s, tc.minSQNR)
				}
			}
			if experts == 0 {
				t.Fatal("no expert stored quantized")
			}
			if tc.format == ExpertsNVFP4 { // the engines fuse gate and up: one global scale for both
				const e = "model.layers.1.mlp.experts.3."
				g, u := read(e+"gate_proj.weight_global_scale"), read(e+"up_proj.weight_global_scale")
				if string(g) != string(u) || string(g) == string(read(e+"down_proj.weight_global_scale")) {
					t.Fatalf("global scales: gate %x, up %x, down %x", g, u, read(e+"down_proj.weight_global_scale"))
				}
			}
			cfg, err := o.configJSON()
			if err != nil || !strings.Contains(string(cfg), `"format": "`+map[string]string{ExpertsInt4: "pack-quantized", ExpertsNVFP4: "nvfp4-pack-quantized", ExpertsMXFP4: "mxfp4-pack-quantized"}[tc.format]+`"`) {
				t.Fatalf("config: %v\n%s", err, cfg)
			}
		})
	}
}

// dequantize reads an expert weight back by its layout's rules (docs/FP4.md).
func dequantize(format string, packed, scales []byte, global *safetensors.Tensor, read func(string) []byte, rows, cols int) []float32 {
	w := make([]float32, rows*cols)
	var g float32
	if global != nil {
		g = math.Float32frombits(binary.LittleEndian.Uint32(read(global.Name)))
	}
	for i := range w {
		r, c := i/cols, i%cols
		switch format {
		case ExpertsInt4:
			q := int32(binary.LittleEndian.Uint32(packed[4*(i/8):])>>(4*(i%8))&15) - 8
			s := floatcodec.BF16ToFloat32(binary.LittleEndian.Uint16(scales[2*(r*(cols/32)+c/32):]))
			w[i] = float32(q) * s
		default:
			code := packed[i/2] >> (4 * (i % 2)) & 15
			v := e2m1[code&7]
			if code&8 != 0 {
				v = -v
			}
			if format == ExpertsNVFP4 {
				w[i] = v * (floatcodec.F8E4M3ToFloat32(scales[r*(cols/16)+c/16]) / g)
			} else {
				w[i] = v * float32(math.Ldexp(1, int(scales[r*(cols/32)+c/32])-127))
			}
		}
	}
	return w
}
