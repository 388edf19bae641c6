package engines_test

import (
	"fmt"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/engines"
)

// TestAcceptance: both engines load the outputs pdq plans for GLM-5 (FP8 and BF16 source), Kimi K2,
// DeepSeek-V3 and GLM-4.7 at their real dimensions, with group sizes 32, 128 and per channel and
// both --decode-dense forms; SGLang refuses --decode-dense fp8 (mixed-precision) by name.
func TestAcceptance(t *testing.T) {
	models := []struct {
		config string
		fp8    bool
		tp     int
	}{
		{"glm-5.json", true, 8}, {"glm-5.json", false, 8}, {"kimi-k2-instruct.json", true, 8},
		{"deepseek-v3.json", true, 8}, {"glm-4.7.official.json", false, 4},
	}
	for _, md := range models {
		for _, g := range []int{32, 128, convert.PerChannel} {
			for _, dense := range []convert.DenseForm{convert.DenseBF16, convert.DenseFP8} {
				name := fmt.Sprintf("%s/fp8=%v/g%d/%s", md.config, md.fp8, g, dense)
				t.Run(name, func(t *testing.T) {
					pl := layout(t, md.config, md.fp8, convert.Options{GroupSize: g, DecodeDense: dense}, nil)
					for _, e := range engines.Engines {
						checkOK(t, string(e)+" prefill", e, pl.prefill, md.tp)
						if e == engines.SGLang && dense == convert.DenseFP8 {
							r := engines.Check(e, pl.decode, engines.Options{TP: md.tp, Flags: []string{"--disable-shared-experts-fusion"}})
							if !hasRule(r, "format", "") || len(r.Problems) != 1 {
								t.Errorf("sglang decode-dense fp8: want the one mixed-precision refusal, got %v", r.Problems)
							}
							continue
						}
						checkOK(t, string(e)+" decode", e, pl.decode, md.tp)
					}
				})
			}
		}
	}
}
