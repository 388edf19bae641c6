package zipnn

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"testing"
)

// memWriterAt collects WriteAt calls.
type memWriterAt struct{ b []byte }

func (m *memWriterAt) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(m.b) {
		if end <= cap(m.b) {
			m.b = m.b[:end]
		} else {
			m.b = append(m.b, make([]byte, end-len(m.b))...)
		}
	}
	return copy(m.b[off:], p), nil
}

func compress(t testing.TB, raw []byte, plan []Segment, workers int) ([]byte, Stats) {
	t.Helper()
	var w memWriterAt
	st, err := Compress(context.Background(), &w, bytes.NewReader(raw), int64(len(raw)), plan, Options{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	if st.StoredSize != int64(len(w.b)) {
		t.Fatalf("Stats.StoredSize %d, wrote %d", st.StoredSize, len(w.b))
	}
	return w.b, st
}

func decompress(t testing.TB, c []byte, workers int) []byte {
	t.Helper()
	var out bytes.Buffer
	n, err := Decompress(context.Background(), &out, bytes.NewReader(c), Options{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(out.Len()) {
		t.Fatalf("Decompress returned %d, wrote %d", n, out.Len())
	}
	return out.Bytes()
}

// Golden vectors for the BF16 plane split: sign, exponent and mantissa land where the format says.
func TestBF16SplitGolden(t *testing.T) {
	for _, tc := range []struct {
		v       uint16
		exp, sm byte
	}{
		{0x3f80, 0x7f, 0x00}, // 1.0
		{0xbf80, 0x7f, 0x80}, // -1.0
		{0x4049, 0x80, 0x49}, // 3.140625
		{0x0001, 0x00, 0x01}, // smallest subnormal
		{0x7f80, 0xff, 0x00}, // +Inf
		{0xffff, 0xff, 0xff}, // a NaN
		{0x3ca3, 0x79, 0x23}, // 0.0199
	} {
		raw := []byte{byte(tc.v), byte(tc.v >> 8)}
		exp, sm := make([]byte, 1), make([]byte, 1)
		splitBF16(exp, sm, raw)
		if exp[0] != tc.exp || sm[0] != tc.sm {
			t.Errorf("split %#04x = exp %#02x sm %#02x, want %#02x %#02x", tc.v, exp[0], sm[0], tc.exp, tc.sm)
		}
		back := make([]byte, 2)
		joinBF16(back, exp, sm)
		if !bytes.Equal(back, raw) {
			t.Errorf("join(split(%#04x)) = % x", tc.v, back)
		}
	}
}

// Golden container: one RLE chunk and one raw chunk, byte for byte as the format documents (the
// CRC32C values were computed apart from this package).
func TestContainerGolden(t *testing.T) {
	raw := append(bytes.Repeat([]byte{7}, 5), 1, 2, 3)
	plan := []Segment{{0, 5, KindBytes}, {5, 3, KindBytes}}
	got, _ := compress(t, raw, plan, 1)
	want, _ := hex.DecodeString("" +
		"5044515a" + "0100" + "0000" + "0800000000000000" + "02000000" + "00000000" + "4400000000000000" +
		"05000000" + "01000000" + "7c09532e" + "02000000" + // 5 raw bytes as 1 rle byte
		"03000000" + "03000000" + "1ef230f1" + "00000000" + // 3 raw bytes stored raw
		"2557bb26" + // crc of header and table
		"07" + "010203")
	if !bytes.Equal(got, want) {
		t.Fatalf("container\n got % x\nwant % x", got, want)
	}
	if back := decompress(t, got, 1); !bytes.Equal(back, raw) {
		t.Fatalf("decoded % x", back)
	}
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	random := make([]byte, 300_001)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	st := safetensorsFile(map[string][2]any{
		"a.weight":        {"BF16", bf16Normal(200_003, 1)},
		"b.weight":        {"F8_E4M3", fp8Normal(150_001, 2)},
		"c.weight_packed": {"I32", int4Packed(400_000, 3)},
		"d.norm":          {"BF16", bf16Normal(17, 4)},
		"e.zeros":         {"BF16", make([]byte, 600_000)},
	})
	stPlan, err := PlanSafetensors(bytes.NewReader(st), int64(len(st)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		raw  []byte
		plan []Segment
	}{
		{"empty", nil, nil},
		{"one", []byte{42}, PlanBytes(1)},
		{"odd-bf16", bf16Normal(1000, 5)[:1999], PlanBytes(1999)},
		{"bf16", bf16Normal(300_000, 6), []Segment{{0, 600_000, KindBF16}}},
		{"bf16-odd-tail", bf16Normal(1000, 7), []Segment{{0, 1000, KindBF16}, {1000, 1000, KindBytes}}},
		{"random", random, PlanBytes(int64(len(random)))},
		{"random-as-bf16", random[:300_000], []Segment{{0, 300_000, KindBF16}}},
		{"zeros", make([]byte, 1<<20), PlanBytes(1 << 20)},
		{"safetensors", st, stPlan},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c1, s1 := compress(t, tc.raw, tc.plan, 1)
			c8, _ := compress(t, tc.raw, tc.plan, 8)
			if !bytes.Equal(c1, c8) {
				t.Fatal("output depends on the number of workers")
			}
			if back := decompress(t, c1, 3); !bytes.Equal(back, tc.raw) {
				t.Fatalf("round trip changed the bytes (%d in, %d out)", len(tc.raw), len(back))
			}
			if s1.StoredSize > int64(len(tc.raw))+int64(headerSize+4+entrySize*s1.Chunks) {
				t.Fatalf("stored %d bytes for %d raw: more than raw plus the table", s1.StoredSize, len(tc.raw))
			}
			rd, err := NewReader(bytes.NewReader(c1), int64(len(c1)))
			if err != nil {
				t.Fatal(err)
			}
			if rd.Size() != int64(len(tc.raw)) {
				t.Fatalf("Reader.Size = %d", rd.Size())
			}
			for range 20 {
				if len(tc.raw) == 0 {
					break
				}
				off := r.IntN(len(tc.raw))
				n := r.IntN(min(len(tc.raw)-off, 700_000) + 1)
				p := make([]byte, n)
				if _, err := rd.ReadAt(p, int64(off)); err != nil {
					t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
				}
				if !bytes.Equal(p, tc.raw[off:off+n]) {
					t.Fatalf("ReadAt(%d, %d) differs", off, n)
				}
			}
		})
	}
}

func TestCompressionRatios(t *testing.T) {
	for _, tc := range []struct {
		dtype string
		raw   []byte
		min   float64
	}{
		{"BF16", bf16Normal(1<<20, 11), 1.35},
		{"F8_E4M3", fp8Normal(1<<21, 12), 1.1},
		{"I32", int4Packed(1<<22, 13), 1.05},
	} {
		plan := []Segment{{0, int64(len(tc.raw)), KindOf(tc.dtype)}}
		_, st := compress(t, tc.raw, plan, 2)
		t.Logf("%s: ratio %.3f", tc.dtype, st.Ratio())
		if st.Ratio() < tc.min {
			t.Errorf("%s: ratio %.3f, below %.2f", tc.dtype, st.Ratio(), tc.min)
		}
	}
}

func TestCorruptionDetected(t *testing.T) {
	raw := bf16Normal(200_000, 21)
	c, _ := compress(t, raw, []Segment{{0, int64(len(raw)), KindBF16}}, 2)
	h, _ := parseHeader(c)
	for _, at := range []int{3, 17, headerSize + 2, int(h.dataOffset()) - 1, int(h.dataOffset()) + 10, len(c) / 2, len(c) - 1} {
		bad := bytes.Clone(c)
		bad[at] ^= 0x10
		// A flip must fail, or (a bit the decoder never uses) still give the exact bytes.
		var out bytes.Buffer
		_, err := Decompress(context.Background(), &out, bytes.NewReader(bad), Options{})
		if err == nil && !bytes.Equal(out.Bytes(), raw) {
			t.Errorf("flip at %d: Decompress gave different bytes without an error", at)
		}
		if err != nil && !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrFormat) {
			t.Errorf("flip at %d: Decompress = %v, want ErrChecksum or ErrFormat", at, err)
		}
	}
	for _, n := range []int{0, 10, headerSize, int(h.dataOffset()), len(c) - 1} {
		if _, err := Decompress(context.Background(), new(bytes.Buffer), bytes.NewReader(c[:n]), Options{}); !errors.Is(err, ErrFormat) {
			t.Errorf("truncated to %d: Decompress = %v, want ErrFormat", n, err)
		}
	}
	if _, err := Decompress(context.Background(), new(bytes.Buffer), bytes.NewReader(append(bytes.Clone(c), 0)), Options{}); !errors.Is(err, ErrFormat) {
		t.Errorf("trailing byte: Decompress = %v, want ErrFormat", err)
	}
}

func TestPlanSafetensors(t *testing.T) {
	f := safetensorsFile(map[string][2]any{
		"a": {"BF16", make([]byte, 10)},
		"b": {"BF16", make([]byte, 6)},
		"c": {"F8_E4M3", make([]byte, 5)},
		"d": {"BF16", make([]byte, 3)}, // odd: coded as bytes
		"e": {"I32", make([]byte, 8)},
	})
	plan, err := PlanSafetensors(bytes.NewReader(f), int64(len(f)))
	if err != nil {
		t.Fatal(err)
	}
	base := int64(len(f)) - 32
	want := []Segment{{0, base, KindBytes}, {base, 16, KindBF16}, {base + 16, 16, KindBytes}}
	if len(plan) != len(want) {
		t.Fatalf("plan %v, want %v", plan, want)
	}
	for i := range want {
		if plan[i] != want[i] {
			t.Fatalf("plan %v, want %v", plan, want)
		}
	}
	for _, bad := range [][]byte{nil, {1, 0, 0, 0, 0, 0, 0, 0}, append([]byte{2, 0, 0, 0, 0, 0, 0, 0}, "{}"...)[:9],
		append([]byte{20, 0, 0, 0, 0, 0, 0, 0}, `{"a":{"dtype":"BF16","data_offsets":[0,99]}}`...)} {
		if _, err := PlanSafetensors(bytes.NewReader(bad), int64(len(bad))); !errors.Is(err, ErrNotSafetensors) {
			t.Errorf("PlanSafetensors(%q) = %v, want ErrNotSafetensors", bad, err)
		}
	}
}

// The word-at-a-time plane split must match the byte loop that specifies it.
func TestBF16SplitFastMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, n := range []int{0, 1, 7, 8, 9, 64, 1001} {
		raw := make([]byte, 2*n)
		for i := range raw {
			raw[i] = byte(r.Uint32())
		}
		e1, s1, e2, s2 := make([]byte, n), make([]byte, n), make([]byte, n), make([]byte, n)
		splitBF16(e1, s1, raw)
		splitBF16Generic(e2, s2, raw)
		if !bytes.Equal(e1, e2) || !bytes.Equal(s1, s2) {
			t.Fatalf("n=%d: split differs from the generic loop", n)
		}
		back1, back2 := make([]byte, 2*n), make([]byte, 2*n)
		joinBF16(back1, e1, s1)
		joinBF16Generic(back2, e1, s1)
		if !bytes.Equal(back1, raw) || !bytes.Equal(back2, raw) {
			t.Fatalf("n=%d: join does not invert split", n)
		}
	}
}
