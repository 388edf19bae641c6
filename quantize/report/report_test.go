package report

import (
	"encoding/json"
	"math"
	"testing"
)

// TestFloatJSON: non-finite values are written as null and null reads back as +Inf (an exact
// reconstruction); finite values round-trip exactly.
func TestFloatJSON(t *testing.T) {
	for _, v := range []float64{0, -1.5, 20.143287, 1e-300, math.Inf(1), math.NaN()} {
		b, err := json.Marshal(Float(v))
		if err != nil {
			t.Fatal(err)
		}
		var back Float
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		switch {
		case math.IsInf(v, 0) || math.IsNaN(v):
			if string(b) != "null" || !math.IsInf(float64(back), 1) {
				t.Errorf("%v: %s -> %v", v, b, back)
			}
		case float64(back) != v:
			t.Errorf("%v: %s -> %v", v, b, back)
		}
	}
}
