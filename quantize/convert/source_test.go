package convert_test

import (
	"errors"
	"testing"

	"pdq/quantize"
	"pdq/quantize/convert"
)

// TestSourceReader: the rows a SourceReader decodes are the slabs' values wherever they are
// cut (a range inside a slab is the same part of the whole), and ranges that do not fit the
// module or start inside an FP8 block row are refused.
func TestSourceReader(t *testing.T) {
	p := plan(t, deepseekSource(t), convert.Options{Only: convert.KindDecode})
	var m *convert.Module
	for _, mod := range p.Modules {
		if mod.Linear && mod.Scale != nil && mod.Rows >= 256 {
			m = mod
			break
		}
	}
	if m == nil {
		t.Fatal("no FP8 block Linear of 256 rows or more")
	}
	r := p.NewSourceReader()
	whole := make([]float32, m.Rows*m.Cols)
	if first, err := r.Decode(whole, m, convert.Rows{R0: 0, R1: m.Rows}); err != nil || first != 0 {
		t.Fatalf("whole: first %d, %v", first, err)
	}
	part := make([]float32, 128*m.Cols)
	first, err := r.Decode(part, m, convert.Rows{R0: 128, R1: 256})
	if err != nil || first != int64(128*m.Cols) {
		t.Fatalf("rows 128-256: first %d, %v", first, err)
	}
	for i, v := range part {
		if v != whole[128*m.Cols+i] {
			t.Fatalf("rows 128-256, value %d: %v, whole tensor %v", i, v, whole[128*m.Cols+i])
		}
	}
	if s := convert.Slabs(m); len(s) == 0 || s[0].R0 != 0 || s[len(s)-1].R1 != m.Rows {
		t.Errorf("slabs %v do not cover %d rows", s, m.Rows)
	}
	for _, rs := range []convert.Rows{{R0: 64, R1: 128}, {R0: 0, R1: m.Rows + 1}, {R0: 5, R1: 5}, {R0: -1, R1: 3}} {
		n := max(rs.R1-rs.R0, 0) * m.Cols
		if _, err := r.Decode(make([]float32, n), m, rs); !errors.Is(err, quantize.ErrBadShape) {
			t.Errorf("rows %v: %v, want ErrBadShape", rs, err)
		}
	}
	if _, err := r.Decode(make([]float32, 3), m, convert.Rows{R0: 0, R1: 128}); !errors.Is(err, quantize.ErrBadShape) {
		t.Errorf("short destination: %v, want ErrBadShape", err)
	}
}
