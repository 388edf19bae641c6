package convert_test

import (
	"slices"
	"testing"

	"pdq/quantize/convert"
)

// TestPlanOutputsFollowOnly: a plan's outputs are a list in the order prefill, decode, holding
// only what Options.Only asks for, and Output finds each by kind (nil for one not written).
func TestPlanOutputsFollowOnly(t *testing.T) {
	src := glm4Source(t)
	for _, c := range []struct {
		only convert.OutputKind
		want []convert.OutputKind
	}{
		{"", []convert.OutputKind{convert.KindPrefill, convert.KindDecode}},
		{convert.KindPrefill, []convert.OutputKind{convert.KindPrefill}},
		{convert.KindDecode, []convert.OutputKind{convert.KindDecode}},
	} {
		p := plan(t, src, convert.Options{GroupSize: 32, Only: c.only})
		var got []convert.OutputKind
		for _, o := range p.Outputs {
			got = append(got, o.Kind)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("only %q: outputs %v, want %v", c.only, got, c.want)
		}
		for _, kind := range []convert.OutputKind{convert.KindPrefill, convert.KindDecode} {
			o := p.Output(kind)
			if written := slices.Contains(c.want, kind); (o != nil) != written {
				t.Errorf("only %q: Output(%s) = %v, written %v", c.only, kind, o, written)
			} else if o != nil && (o.Kind != kind || len(o.Shards) == 0) {
				t.Errorf("only %q: Output(%s) has kind %s and %d shards", c.only, kind, o.Kind, len(o.Shards))
			}
		}
	}
}
