package zipnn

import (
	"bytes"
	"context"
	"io"
	"testing"
)

// FuzzDecompress: hostile containers give an error or exact, checked bytes; never a panic, and
// the streaming and random-access readers agree.
func FuzzDecompress(f *testing.F) {
	raw := bf16Normal(5000, 1)
	for _, plan := range [][]Segment{PlanBytes(int64(len(raw))), {{0, int64(len(raw)), KindBF16}}} {
		c, _ := compress(f, raw, plan, 1)
		f.Add(c)
	}
	z, _ := compress(f, make([]byte, 100), PlanBytes(100), 1)
	f.Add(z)
	f.Fuzz(func(t *testing.T, c []byte) {
		var out bytes.Buffer
		n, err := Decompress(context.Background(), &out, bytes.NewReader(c), Options{Workers: 2})
		if err == nil && n != int64(out.Len()) {
			t.Fatalf("returned %d, wrote %d", n, out.Len())
		}
		rd, rerr := NewReader(bytes.NewReader(c), int64(len(c)))
		if rerr != nil {
			return
		}
		p := make([]byte, rd.Size())
		_, perr := rd.ReadAt(p, 0)
		if len(p) == 0 && perr == io.EOF {
			perr = nil
		}
		if (perr == nil) != (err == nil) {
			t.Fatalf("ReadAt of everything: %v; Decompress: %v", perr, err)
		}
		if err == nil && !bytes.Equal(p, out.Bytes()) {
			t.Fatal("ReadAt disagrees with Decompress")
		}
	})
}

// FuzzRoundTrip: any bytes with any plan come back exactly.
func FuzzRoundTrip(f *testing.F) {
	f.Add(bf16Normal(300, 2), uint16(100), true)
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"), uint16(3), false)
	f.Fuzz(func(t *testing.T, raw []byte, cut uint16, bf16 bool) {
		c := min(int64(cut), int64(len(raw)))
		k := KindBytes
		if bf16 {
			k = KindBF16
		}
		plan := []Segment{{0, c, k}, {c, int64(len(raw)) - c, KindBytes}}
		comp, _ := compress(t, raw, plan, 2)
		if back := decompress(t, comp, 1); !bytes.Equal(back, raw) {
			t.Fatal("round trip changed the bytes")
		}
	})
}

// FuzzPlanSafetensors: any file gives an error or a plan that tiles it.
func FuzzPlanSafetensors(f *testing.F) {
	f.Add(safetensorsFile(map[string][2]any{"a": {"BF16", make([]byte, 10)}, "b": {"F8_E4M3", make([]byte, 3)}}))
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		plan, err := PlanSafetensors(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		if _, err := chunksOf(plan, int64(len(b))); err != nil {
			t.Fatalf("plan does not tile the file: %v", err)
		}
		for _, s := range plan {
			if s.Kind == KindBF16 && s.Len%2 != 0 {
				t.Fatalf("odd bf16 segment %v", s)
			}
		}
	})
}
