package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"pdq/quantize/convert"
	"pdq/safetensors"
	"pdq/synth"
)

// TestDump checks the dump of a tiny checkpoint against the source bytes decoded here by hand:
// BF16 bits shifted into float32, FP8 codes times their 128x128 block's scale.
func TestDump(t *testing.T) {
	for _, tc := range []struct {
		name string
		fp8  bool
	}{{"bf16", false}, {"fp8", true}} {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "src")
			if err := synth.Generate(context.Background(), src, synth.Options{Model: synth.Tiny(synth.StyleDeepSeek), FP8: tc.fp8, Seed: 3}); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "w.f32")
			n, total, err := dump(context.Background(), src, out, convert.DefaultTargets, false)
			if err != nil {
				t.Fatal(err)
			}
			ck, err := safetensors.Open(src)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			got := readFloats(t, out)
			if int64(len(got)) != n {
				t.Fatalf("%d values written, dump says %d", len(got), n)
			}
			names := readIndex(t, out+".idx")
			re := regexp.MustCompile(convert.DefaultTargets)
			var want []string
			var weights int64
			for _, tt := range ck.Tensors() {
				if !strings.HasSuffix(tt.Name, ".weight_scale_inv") {
					weights += tt.NumElements() // every tensor but the FP8 scales
				}
				if m, ok := strings.CutSuffix(tt.Name, ".weight"); ok && re.MatchString(m) {
					want = append(want, m)
				}
			}
			if strings.Join(names, ",") != strings.Join(want, ",") {
				t.Fatalf("index lists %v, want the routed experts %v", names, want)
			}
			if total != weights {
				t.Errorf("total %d elements, the checkpoint has %d outside its FP8 scales", total, weights)
			}
			at := 0
			for _, name := range names {
				w := ck.Tensor(name + ".weight")
				ref := decodeByHand(t, ck, w, ck.Tensor(name+".weight_scale_inv"))
				for i, v := range ref {
					if math.Float32bits(got[at+i]) != math.Float32bits(v) {
						t.Fatalf("%s[%d] = %v, want %v", name, i, got[at+i], v)
					}
				}
				at += len(ref)
			}
			if at != len(got) {
				t.Fatalf("%d values for the listed tensors, %d written", at, len(got))
			}
			if tc.fp8 {
				return
			}
			// --bf16 of a BF16 source: the source's bytes of the listed tensors, in order.
			b16 := filepath.Join(t.TempDir(), "w.bf16")
			if _, _, err := dump(context.Background(), src, b16, convert.DefaultTargets, true); err != nil {
				t.Fatal(err)
			}
			var want16 []byte
			for _, name := range names {
				w := ck.Tensor(name + ".weight")
				raw := make([]byte, w.ByteSize())
				if err := ck.ReadTensor(w, raw); err != nil {
					t.Fatal(err)
				}
				want16 = append(want16, raw...)
			}
			if got16, err := os.ReadFile(b16); err != nil || string(got16) != string(want16) {
				t.Fatalf("--bf16 dump: %d bytes (%v), want the %d source bytes of the experts", len(got16), err, len(want16))
			}
		})
	}
}

// TestDumpNoTargets: a pattern that matches nothing is an error and leaves no file.
func TestDumpNoTargets(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if err := synth.Generate(context.Background(), src, synth.Options{Model: synth.Tiny(synth.StyleDeepSeek)}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "w.f32")
	_, _, err := dump(context.Background(), src, out, `no_such_module$`, false)
	if !errors.Is(err, errNoTargets) && !errors.Is(err, convert.ErrNoTargets) {
		t.Fatalf("err = %v, want no targets", err)
	}
	if m, _ := filepath.Glob(out + "*"); len(m) != 0 {
		t.Fatalf("left %v", m)
	}
}

// decodeByHand decodes a BF16 weight, or an FP8 weight with its 128x128 block scales.
func decodeByHand(t *testing.T, ck *safetensors.Checkpoint, w, scale *safetensors.Tensor) []float32 {
	t.Helper()
	raw := make([]byte, w.ByteSize())
	if err := ck.ReadTensor(w, raw); err != nil {
		t.Fatal(err)
	}
	rows, cols := int(w.Shape[0]), int(w.Shape[1])
	v := make([]float32, rows*cols)
	switch w.DType {
	case safetensors.BF16:
		for i := range v {
			v[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
	case safetensors.F8E4M3:
		if scale == nil || scale.DType != safetensors.F32 {
			t.Fatalf("%s: want an F32 weight_scale_inv", w.Name)
		}
		sraw := make([]byte, scale.ByteSize())
		if err := ck.ReadTensor(scale, sraw); err != nil {
			t.Fatal(err)
		}
		scols := int(scale.Shape[1])
		for i := range v {
			r, c := i/cols, i%cols
			s := math.Float32frombits(binary.LittleEndian.Uint32(sraw[4*((r/128)*scols+c/128):]))
			v[i] = safetensors.F8E4M3ToFloat32(raw[i]) * s
		}
	default:
		t.Fatalf("%s: dtype %s", w.Name, w.DType)
	}
	return v
}

func readFloats(t *testing.T, name string) []float32 {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// readIndex returns the tensor names of an index file.
func readIndex(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			t.Fatalf("index line %q", sc.Text())
		}
		names = append(names, fields[2])
	}
	return names
}
