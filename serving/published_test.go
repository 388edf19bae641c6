package serving

import (
	"math"
	"testing"
)

// TestPublishedFigures recomputes the comparison docs/SERVING.md sets beside the published
// figures: token capacity of the INT4 decode checkpoint at TP8 on a GPU of 141 x 10^9 B under
// SGLang's decode-server and unified-server fractions, and the DP8 decode server. The counts are
// the ones the docs print; within says whether the docs claim them within 10% of the figure.
func TestPublishedFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("lays out two full-size header-only checkpoints")
	}
	const h200 = 141e9
	for _, tc := range []struct {
		config    string
		group     int
		dt        KVDType
		role      Role
		dp        int
		gpu       int64
		published float64
		want      int64
		within    bool
	}{
		{"glm-5.json", 32, KVFP8, RoleDecode, 1, h200, 1.18e6, 1135250, true},
		{"glm-5.json", 32, KVFP8, RoleUnified, 1, h200, 1.18e6, 1029725, false},
		{"glm-5.json", 128, KVFP8, RoleDecode, 1, h200, 1.18e6, 1204343, true},
		{"glm-5.json", 128, KVFP8, RoleUnified, 1, h200, 1.18e6, 1098818, true},
		{"kimi-k2-instruct.json", 32, KVBF16, RoleDecode, 1, h200, 686e3, 754603, false},
		{"kimi-k2-instruct.json", 32, KVBF16, RoleUnified, 1, h200, 686e3, 662305, true},
		{"kimi-k2-instruct.json", 32, KVFP8, RoleUnified, 1, h200, 1.37e6, 1324610, true},
		// DP attention multiplies the count by the ranks: far from the published figure.
		{"glm-5.json", 32, KVBF16, RoleDecode, 8, 141 << 30, 1.18e6, 3484096, false},
	} {
		ck, cfg, _ := headerOnlyLayout(t, tc.config)
		p := planGroup(t, ck, cfg, tc.group)
		m, err := ModelFromConfig(p.Config)
		if err != nil {
			t.Fatal(err)
		}
		par := Parallel{TP: 8, EP: 1, DP: tc.dp}
		w, err := m.PerGPUWeights(Tensors(p, Decode), par)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := m.KVBytesPerToken(tc.dt, par)
		if err != nil {
			t.Fatal(err)
		}
		frac := DefaultMemFraction(SGLang, tc.gpu, par, tc.role, true)
		c := Plan(tc.role, Budget{GPUMemory: tc.gpu, MemFraction: frac, Reserve: DefaultReserve(SGLang)}, w, kv, 0)
		off := float64(c.Tokens)/tc.published - 1
		t.Logf("%s g%d %s %s DP%d: fraction %.3f, %d tokens (%+.1f%% of %.0f)", tc.config, tc.group, tc.dt, tc.role, tc.dp, frac, c.Tokens, 100*off, tc.published)
		if c.Tokens != tc.want {
			t.Errorf("%s g%d %s %s DP%d: %d tokens, docs/SERVING.md says %d", tc.config, tc.group, tc.dt, tc.role, tc.dp, c.Tokens, tc.want)
		}
		if (math.Abs(off) <= 0.10) != tc.within {
			t.Errorf("%s g%d %s %s DP%d: %+.1f%% of the published figure; docs/SERVING.md says within 10%% = %v", tc.config, tc.group, tc.dt, tc.role, tc.dp, 100*off, tc.within)
		}
	}
}
