package quantize

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"pdq/kernels"
	"pdq/safetensors"
)

func meta(dt safetensors.DType, shape ...int64) TensorMeta {
	return TensorMeta{DType: dt, Shape: shape}
}

// TestDecodePackedInt4Golden: FORMATS.md's golden words 0x76543210, 0xFEDCBA98 hold the levels
// -8..7; with scale 0.5 they decode to -4, -3.5, ..., 3.5.
func TestDecodePackedInt4Golden(t *testing.T) {
	l, err := InspectPackedInt4(meta(safetensors.I32, 1, 2), meta(safetensors.F32, 1, 1), nil, []int64{1, 16})
	if err != nil {
		t.Fatal(err)
	}
	if l.GroupSize != 16 || l.Rows != 1 || l.Cols != 16 {
		t.Fatalf("layout %+v", l)
	}
	packed := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 0x76543210), 0xFEDCBA98)
	scale := binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.5))
	got := make([]float32, 16)
	if err := l.Decode(got, 1, PackedSlab{Packed: packed, Scales: scale}); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if want := float32(i-8) * 0.5; v != want {
			t.Fatalf("element %d: %v, want %v", i, v, want)
		}
	}
}

// TestDecodePackedInt4RoundTrip: pdq's own INT4 output decodes to DequantizeInt4's values.
func TestDecodePackedInt4RoundTrip(t *testing.T) {
	const rows, cols = 24, 256
	w := testWeights(rows, cols)
	r, err := QuantizeInt4(context.Background(), w, rows, cols, Int4Options{GroupSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, len(w))
	if err := DequantizeInt4(want, r.Packed, r.Scales, safetensors.BF16, rows, cols, 32); err != nil {
		t.Fatal(err)
	}
	l, err := InspectPackedInt4(meta(safetensors.I32, rows, cols/8), meta(safetensors.BF16, rows, cols/32), nil, []int64{rows, cols})
	if err != nil {
		t.Fatal(err)
	}
	// Decode the rows in two slabs, as a pipeline does.
	got := make([]float32, len(w))
	for _, sl := range [][2]int{{0, 16}, {16, rows}} {
		r0, r1 := sl[0], sl[1]
		s := PackedSlab{Packed: r.Packed[r0*cols/2 : r1*cols/2], Scales: r.Scales[r0*cols/32*2 : r1*cols/32*2]}
		if err := l.Decode(got[r0*cols:r1*cols], r1-r0, s); err != nil {
			t.Fatal(err)
		}
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("element %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// TestDecodePackedInt4Asymmetric: (q - z)·s with the zero points packed eight rows to a word
// along the rows (the last word only partly used).
func TestDecodePackedInt4Asymmetric(t *testing.T) {
	const rows, cols, g = 10, 16, 8
	zp := func(r, k int) int { return (r*3+k*5)%16 - 8 }
	q := func(r, i int) int { return (r*7+i*3)%16 - 8 }
	packed := make([]byte, rows*cols/2)
	for r := range rows {
		for i := range cols {
			packed[(r*cols+i)/2] |= byte(q(r, i)+8) << (4 * (i % 2))
		}
	}
	zw := make([]byte, 2*2*4) // [ceil(10/8), 16/8] words
	for r := range rows {
		for k := range cols / g {
			o := 4 * ((r/8)*(cols/g) + k)
			binary.LittleEndian.PutUint32(zw[o:], binary.LittleEndian.Uint32(zw[o:])|uint32(zp(r, k)+8)<<(4*(r%8)))
		}
	}
	scales := make([]byte, 0, rows*cols/g*4)
	for i := range rows * cols / g {
		scales = binary.LittleEndian.AppendUint32(scales, math.Float32bits(0.25+float32(i)/64))
	}
	zm := meta(safetensors.I32, 2, 2)
	l, err := InspectPackedInt4(meta(safetensors.I32, rows, cols/8), meta(safetensors.F32, rows, cols/g), &zm, []int64{rows, cols})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, rows*cols)
	if err := l.Decode(got, rows, PackedSlab{Packed: packed, Scales: scales, ZeroPoint: zw}); err != nil {
		t.Fatal(err)
	}
	for r := range rows {
		for i := range cols {
			k := i / g
			s := 0.25 + float32(r*(cols/g)+k)/64
			if want := float32(q(r, i)-zp(r, k)) * s; got[r*cols+i] != want {
				t.Fatalf("row %d col %d: %v, want %v", r, i, got[r*cols+i], want)
			}
		}
	}
}

// fp4Hand is kernels' hand-worked group: with effective scale 0.125 its codes decode to these.
var (
	fp4HandPacked = []byte{0xF7, 0x10, 0x22, 0x44, 0x66, 0x87, 0xE0, 0x53}
	fp4HandValues = []float32{0.75, -0.75, 0, 0.0625, 0.125, 0.125, 0.25, 0.25, 0.5, 0.5, 0.75, 0, 0, -0.5, 0.1875, 0.375}
)

func TestDecodeFP4Hand(t *testing.T) {
	cases := []struct {
		f      PackedFormat
		cols   int
		scales []byte
		scale  float32
	}{
		{PackedNVFP4, 16, []byte{0x78}, 2048},               // e4m3 256 / 2048
		{PackedModelOptNVFP4, 16, []byte{0x78}, 1.0 / 2048}, // e4m3 256 · 2^-11
		{PackedMXFP4, 32, []byte{124}, 0},                   // 2^(124-127)
	}
	for _, c := range cases {
		l, err := InspectFP4(c.f, meta(safetensors.U8, 1, int64(c.cols/2)), meta(scaleDT(c.f), 1, 1), meta(safetensors.F32, 1))
		if err != nil {
			t.Fatal(err)
		}
		packed := append(append([]byte{}, fp4HandPacked...), make([]byte, c.cols/2-8)...)
		got := make([]float32, c.cols)
		if err := l.Decode(got, 1, PackedSlab{Packed: packed, Scales: c.scales, Scale: c.scale}); err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			want := float32(0)
			if i < 16 {
				want = fp4HandValues[i]
			}
			if v != want {
				t.Fatalf("%s element %d: %v, want %v", c.f, i, v, want)
			}
		}
		if !math.Signbit(float64(got[11])) {
			t.Errorf("%s: code 8 decodes to +0", c.f)
		}
	}
}

func scaleDT(f PackedFormat) safetensors.DType {
	if f == PackedMXFP4 {
		return safetensors.U8
	}
	return safetensors.F8E4M3
}

// TestDecodeFP4RoundTrip: kernels' NVFP4 and MXFP4 outputs decode to DequantizeFP4's values.
func TestDecodeFP4RoundTrip(t *testing.T) {
	const rows, cols = 8, 128
	w := testWeights(rows, cols)
	var amax float32
	for _, v := range w {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	G := kernels.NVFP4GlobalScale(amax)
	for _, f := range []PackedFormat{PackedNVFP4, PackedMXFP4} {
		g := kernels.NVFP4GroupSize
		if f == PackedMXFP4 {
			g = kernels.MXFP4GroupSize
		}
		out := kernels.FP4Out{Packed: make([]byte, rows*cols/2), Scales: make([]byte, rows*cols/g), Stats: make([]kernels.GroupStats, rows*cols/g)}
		sc := make([]float32, rows*cols/g)
		var err error
		if f == PackedNVFP4 {
			err = kernels.QuantizeNVFP4(out, w, rows, cols, G, kernels.SearchMSE)
			kernels.NVFP4Scales(sc, out.Scales, G)
		} else {
			err = kernels.QuantizeMXFP4(out, w, rows, cols, kernels.SearchMSE)
			kernels.MXFP4Scales(sc, out.Scales)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, len(w))
		if err := kernels.DequantizeFP4(want, out.Packed, sc, rows, cols, g); err != nil {
			t.Fatal(err)
		}
		l, err := InspectFP4(f, meta(safetensors.U8, rows, cols/2), meta(scaleDT(f), rows, int64(cols/g)), meta(safetensors.F32))
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(w))
		if err := l.Decode(got, rows, PackedSlab{Packed: out.Packed, Scales: out.Scales, Scale: G}); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s element %d: %v, want %v", f, i, got[i], want[i])
			}
		}
	}
}

func TestInspectPackedErrors(t *testing.T) {
	zm := meta(safetensors.I32, 1, 2)
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"packed dtype", ins4(meta(safetensors.U8, 8, 4), meta(safetensors.BF16, 8, 1), nil, 8, 32), safetensors.ErrUnsupportedDType},
		{"scale dtype", ins4(meta(safetensors.I32, 8, 4), meta(safetensors.F8E4M3, 8, 1), nil, 8, 32), safetensors.ErrUnsupportedDType},
		{"weight_shape rank", ins4(meta(safetensors.I32, 8, 4), meta(safetensors.BF16, 8, 1), nil, 8), ErrBadShape},
		{"packed cols", ins4(meta(safetensors.I32, 8, 5), meta(safetensors.BF16, 8, 1), nil, 8, 32), ErrBadShape},
		{"uneven groups", ins4(meta(safetensors.I32, 8, 4), meta(safetensors.BF16, 8, 3), nil, 8, 32), ErrBadShape},
		{"group not of 8", ins4(meta(safetensors.I32, 8, 4), meta(safetensors.BF16, 8, 8), nil, 8, 32), ErrBadShape},
		{"scale rows", ins4(meta(safetensors.I32, 8, 4), meta(safetensors.BF16, 7, 1), nil, 8, 32), ErrBadShape},
		{"zero point shape", ins4(meta(safetensors.I32, 8, 4), meta(safetensors.BF16, 8, 1), &zm, 8, 32), ErrBadShape},
		{"fp4 packed dtype", insFP4(PackedNVFP4, meta(safetensors.I32, 4, 8), meta(safetensors.F8E4M3, 4, 1)), safetensors.ErrUnsupportedDType},
		{"nvfp4 scale dtype", insFP4(PackedNVFP4, meta(safetensors.U8, 4, 8), meta(safetensors.U8, 4, 1)), safetensors.ErrUnsupportedDType},
		{"mxfp4 scale dtype", insFP4(PackedMXFP4, meta(safetensors.U8, 4, 16), meta(safetensors.F8E4M3, 4, 1)), safetensors.ErrUnsupportedDType},
		{"nvfp4 scale shape", insFP4(PackedNVFP4, meta(safetensors.U8, 4, 8), meta(safetensors.F8E4M3, 4, 2)), ErrBadShape},
		{"mxfp4 cols", insFP4(PackedMXFP4, meta(safetensors.U8, 4, 8), meta(safetensors.U8, 4, 1)), ErrBadShape},
		{"not fp4", insFP4(PackedInt4, meta(safetensors.U8, 4, 8), meta(safetensors.U8, 4, 1)), ErrInvalidOptions},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	_, err := InspectFP4(PackedNVFP4, meta(safetensors.U8, 4, 8), meta(safetensors.F8E4M3, 4, 1), meta(safetensors.F32, 2))
	if !errors.Is(err, ErrBadShape) {
		t.Errorf("global scale of 2 elements: %v", err)
	}
}

func ins4(p, s TensorMeta, z *TensorMeta, shape ...int64) error {
	_, err := InspectPackedInt4(p, s, z, shape)
	return err
}

func insFP4(f PackedFormat, p, s TensorMeta) error {
	_, err := InspectFP4(f, p, s, meta(safetensors.F32, 1))
	return err
}

func TestDecodePackedErrors(t *testing.T) {
	nv := PackedLayout{Format: PackedNVFP4, Rows: 1, Cols: 16, GroupSize: 16}
	mx := PackedLayout{Format: PackedMXFP4, Rows: 1, Cols: 32, GroupSize: 32}
	dst := make([]float32, 32)
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"nvfp4 NaN scale", nv.Decode(dst[:16], 1, PackedSlab{Packed: make([]byte, 8), Scales: []byte{0xff}, Scale: 1}), ErrBadScale},
		{"nvfp4 zero global", nv.Decode(dst[:16], 1, PackedSlab{Packed: make([]byte, 8), Scales: []byte{0x38}, Scale: 0}), ErrBadScale},
		{"nvfp4 infinite scale", nv.Decode(dst[:16], 1, PackedSlab{Packed: make([]byte, 8), Scales: []byte{0x7e}, Scale: 1e-45}), ErrBadScale},
		{"mxfp4 NaN scale", mx.Decode(dst, 1, PackedSlab{Packed: make([]byte, 16), Scales: []byte{0xff}}), ErrBadScale},
		{"short packed", mx.Decode(dst, 1, PackedSlab{Packed: make([]byte, 15), Scales: []byte{1}}), ErrBadShape},
		{"too many rows", mx.Decode(dst, 2, PackedSlab{Packed: make([]byte, 32), Scales: []byte{1, 1}}), ErrBadShape},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	i4 := PackedLayout{Format: PackedInt4, Rows: 1, Cols: 8, GroupSize: 8, ScaleDType: safetensors.F32}
	inf := binary.LittleEndian.AppendUint32(nil, 0x7f800000)
	if err := i4.Decode(dst[:8], 1, PackedSlab{Packed: make([]byte, 4), Scales: inf}); !errors.Is(err, ErrBadScale) {
		t.Errorf("INT4 infinite scale: %v", err)
	}
}

func TestParseWeightShape(t *testing.T) {
	b := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 7168), 2048)
	if s, err := ParseWeightShape(b, safetensors.I64); err != nil || len(s) != 2 || s[0] != 7168 || s[1] != 2048 {
		t.Errorf("I64: %v, %v", s, err)
	}
	b = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 7168), 2048)
	if s, err := ParseWeightShape(b, safetensors.I32); err != nil || len(s) != 2 || s[0] != 7168 || s[1] != 2048 {
		t.Errorf("I32: %v, %v", s, err)
	}
	if _, err := ParseWeightShape(b[:5], safetensors.I32); !errors.Is(err, ErrBadShape) {
		t.Errorf("5 bytes: %v", err)
	}
	if _, err := ParseWeightShape(b, safetensors.F32); !errors.Is(err, safetensors.ErrUnsupportedDType) {
		t.Errorf("F32: %v", err)
	}
	f := func(v float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)) }
	if v, err := ParseTensorScale(f(2688), safetensors.F32); err != nil || v != 2688 {
		t.Errorf("2688: %v, %v", v, err)
	}
	for _, v := range []float32{0, -1, float32(math.Inf(1)), float32(math.NaN())} {
		if _, err := ParseTensorScale(f(v), safetensors.F32); !errors.Is(err, ErrBadScale) {
			t.Errorf("%v: %v", v, err)
		}
	}
}

// FuzzDecodePacked feeds arbitrary shapes, dtypes and bytes to the inspectors and the decoder:
// they must not panic, every error must wrap one of the package's sentinels, and every decoded
// value must be finite.
func FuzzDecodePacked(f *testing.F) {
	f.Add(uint8(1), uint16(4), uint16(64), uint16(2), uint8(0), false, []byte{0x88, 0x12, 0x3f})
	f.Add(uint8(2), uint16(2), uint16(32), uint16(2), uint8(0), false, []byte{0xf7, 0x38})
	f.Add(uint8(3), uint16(3), uint16(64), uint16(2), uint8(0), false, []byte{0xff, 0x7f})
	f.Add(uint8(4), uint16(1), uint16(16), uint16(1), uint8(0), false, []byte{0x78})
	f.Add(uint8(1), uint16(9), uint16(32), uint16(1), uint8(2), true, []byte{1, 2, 3})
	dts := []safetensors.DType{safetensors.BF16, safetensors.F16, safetensors.F32, safetensors.U8}
	f.Fuzz(func(t *testing.T, format uint8, rows, cols, groups uint16, dt uint8, asym bool, data []byte) {
		n, k, ng := int64(rows%64), int64(cols%512), int64(groups%64)
		var l PackedLayout
		var err error
		pf := PackedFormat(format%5 + 0)
		if pf == PackedInt4 {
			var zp *TensorMeta
			if asym {
				zp = &TensorMeta{DType: safetensors.I32, Shape: []int64{(n + 7) / 8, ng}}
			}
			l, err = InspectPackedInt4(meta(safetensors.I32, n, k/8), meta(dts[int(dt)%len(dts)], n, ng), zp, []int64{n, k})
		} else {
			sdt := safetensors.F8E4M3
			if pf == PackedMXFP4 || dt%2 == 1 {
				sdt = safetensors.U8
			}
			l, err = InspectFP4(pf, meta(safetensors.U8, n, k/2), meta(sdt, n, ng), meta(safetensors.F32, 1))
		}
		if err != nil {
			requireSentinel(t, err)
			return
		}
		// Fill the slab's tensors from data, cycling; rows of the slab at most the tensor's.
		sn := int(n)
		if len(data) > 0 {
			sn = int(data[0]) % (int(n) + 1)
		}
		wp, ws, wz := l.SlabBytes(sn)
		fill := func(m int, off int) []byte {
			b := make([]byte, m)
			for i := range b {
				if len(data) > 0 {
					b[i] = data[(i+off)%len(data)]
				}
			}
			return b
		}
		s := PackedSlab{Packed: fill(wp, 0), Scales: fill(ws, 1), ZeroPoint: fill(wz, 2), Scale: float32(len(data)) / 7}
		dst := make([]float32, sn*l.Cols)
		if err := l.Decode(dst, sn, s); err != nil {
			requireSentinel(t, err)
			return
		}
		if i := firstNonFinite(dst); i >= 0 {
			t.Fatalf("%s: element %d decodes to %v", l.Format, i, dst[i])
		}
	})
}

func requireSentinel(t *testing.T, err error) {
	t.Helper()
	for _, s := range []error{ErrBadShape, ErrBadScale, ErrInvalidOptions, safetensors.ErrUnsupportedDType} {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("error without a sentinel: %v", err)
}

// testWeights returns rows×cols deterministic weights with a few outliers.
func testWeights(rows, cols int) []float32 {
	w := make([]float32, rows*cols)
	state := uint32(12345)
	for i := range w {
		state = state*1664525 + 1013904223
		w[i] = (float32(state>>8)/float32(1<<24) - 0.5) * 0.04
		if i%97 == 0 {
			w[i] *= 8
		}
	}
	return w
}
