package serving

import (
	"slices"
	"testing"

	"pdq/quantize/convert"
)

// TestDecodeTensorsAsEncodings: for every decode format, the tensors FormatTensors lays out for
// a target are exactly those the conversion's encoding plans (a plan made in that format), so
// the per-GPU bytes of a format comparison are those of the checkpoint convert would write.
func TestDecodeTensorsAsEncodings(t *testing.T) {
	if testing.Short() {
		t.Skip("lays out a full-size header-only checkpoint")
	}
	ck, cfg, _ := headerOnlyLayout(t, "kimi-k2-instruct.json")
	for _, f := range convert.DecodeFormats {
		p, err := convert.NewPlan(ck, cfg, convert.Options{DecodeFormat: f, Only: convert.KindDecode})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		got, err := DecodeTensorsAs(p, f, p.Options.GroupSize)
		if err != nil {
			t.Fatal(err)
		}
		want := Tensors(p, Decode)
		if !slices.EqualFunc(got, want, func(a, b Tensor) bool {
			return a.Name == b.Name && a.Bytes == b.Bytes && slices.Equal(a.Shape, b.Shape)
		}) {
			t.Errorf("%s: FormatTensors lays out %d tensors that differ from the %d the encodings plan", f, len(got), len(want))
		}
	}
}
