package serving

import (
	"context"
	"path/filepath"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/rules"
	"pdq/safetensors"
	"pdq/synth"
)

// TestDecodeTensorsAsPassed: experts a plan passes through from an already-quantized source are
// decode targets like any other: sized in each format, a Kimi-K2.6-style source costs what its
// dense original costs; served as it is, the source's experts are INT4 of its group.
func TestDecodeTensorsAsPassed(t *testing.T) {
	planOf := func(experts string) *convert.Plan {
		dir := filepath.Join(t.TempDir(), "src")
		o := synth.Options{Model: synth.Tiny(synth.StyleDeepSeek), Seed: 1, HeaderOnly: true, ExpertFormat: experts}
		if err := synth.Generate(context.Background(), dir, o); err != nil {
			t.Fatal(err)
		}
		ck, err := safetensors.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ck.Close() })
		cfg, err := rules.LoadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		p, err := convert.NewPlan(ck, cfg, convert.Options{GroupSize: 32})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	kimi, dense := planOf(synth.ExpertsInt4), planOf("")
	if fp8, g := ExpertFormats(kimi, Source); fp8 || g != 32 {
		t.Errorf("the INT4 source's experts: fp8 %v, INT4 group %d; want INT4 g32", fp8, g)
	}
	if fp8, g := ExpertFormats(dense, Source); fp8 || g != 0 {
		t.Errorf("the dense source's experts: fp8 %v, INT4 group %d", fp8, g)
	}
	passed := 0
	for _, m := range kimi.Modules {
		if m.Scheme(convert.KindDecode) == convert.SchemePassed {
			passed++
		}
	}
	if passed == 0 {
		t.Fatal("no module passes through")
	}
	total := func(ts []Tensor) (n int64) {
		for _, x := range ts {
			n += x.Bytes
		}
		return n
	}
	for _, f := range []convert.DecodeFormat{convert.DecodeInt4, convert.DecodeNVFP4, convert.DecodeMXFP4, convert.DecodeW4AFP8} {
		group := 32
		if f == convert.DecodeW4AFP8 {
			group = 128
		}
		a, err := DecodeTensorsAs(kimi, f, group)
		if err != nil {
			t.Fatal(err)
		}
		b, err := DecodeTensorsAs(dense, f, group)
		if err != nil {
			t.Fatal(err)
		}
		if total(a) != total(b) {
			t.Errorf("%s: the INT4 source's decode checkpoint costs %d bytes, its dense original's %d", f, total(a), total(b))
		}
	}
}
