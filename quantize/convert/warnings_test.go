package convert

import (
	"strings"
	"testing"
)

func TestEngineWarnings(t *testing.T) {
	for _, c := range []struct {
		inter, group int
		format       DecodeFormat
		want         []string // substrings, one per expected warning; "-" a substring that must be absent
	}{
		{2048, 32, "", nil}, // GLM-5, DeepSeek-V3, Kimi K2
		{1536, 32, "", []string{"prefill FP8 blocks", "1536 fails at TP8 (192)"}}, // GLM-4.5: INT4 fine, FP8 not at TP8
		{1536, 128, "", []string{"prefill", "decode INT4 g128"}},                  // 192 is no multiple of 128 either
		{192, 32, "", []string{"TP2 (96), TP4 (48), TP8 (24)", "decode INT4 g32"}},
		{2048, 128, DecodeW4AFP8, nil}, // DeepSeek-V3's experts fit W4A8 up to TP8 (docs/FP4.md)
		{1536, 128, DecodeW4AFP8, []string{"decode W4AFP8: the engines need moe_intermediate_size / TP to be a multiple of 256", "TP4 (384), TP8 (192)"}},
		{192, 16, DecodeNVFP4, []string{"prefill", "-decode INT4"}}, // no INT4 rule for NVFP4
	} {
		p := &Plan{Config: map[string]any{"moe_intermediate_size": float64(c.inter)}, Options: Options{GroupSize: c.group, DecodeFormat: c.format},
			Outputs: []*Output{{Kind: KindPrefill}, {Kind: KindDecode}}}
		got := strings.Join(p.engineWarnings(), "\n")
		if c.want == nil && got != "" {
			t.Errorf("I=%d g%d: unexpected warnings %q", c.inter, c.group, got)
		}
		for _, w := range c.want {
			if absent, ok := strings.CutPrefix(w, "-"); ok {
				if strings.Contains(got, absent) {
					t.Errorf("I=%d g%d %s: warnings %q name %q", c.inter, c.group, c.format, got, absent)
				}
				continue
			}
			if !strings.Contains(got, w) {
				t.Errorf("I=%d g%d: warnings %q lack %q", c.inter, c.group, got, w)
			}
		}
	}
}
