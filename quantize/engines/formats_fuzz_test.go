package engines_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"pdq/quantize/engines"
	"pdq/safetensors"
)

// FuzzFormatGroups: whatever config_groups a config.json holds (the formats' fixtures mutated),
// Check classifies and checks a small MoE model for both engines and every GPU without panicking,
// and a group it reads as a known format gets that format's row of the GPU table.
func FuzzFormatGroups(f *testing.F) {
	for _, name := range []string{"nvfp4", "nvfp4-w4a4", "mxfp4", "w4afp8"} {
		b, err := os.ReadFile(filepath.Join("testdata", "formats", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "strategy": "block", "block_structure": [0, 0]}}}}`))
	var tensors []engines.Tensor
	for e := 0; e < 2; e++ {
		for _, p := range []string{"gate_proj", "up_proj", "down_proj"} {
			m := fmt.Sprintf("model.layers.1.mlp.experts.%d.%s", e, p)
			tensors = append(tensors,
				engines.Tensor{Name: m + ".weight_packed", DType: safetensors.U8, Shape: []int64{256, 128}},
				engines.Tensor{Name: m + ".weight_scale", DType: safetensors.F8E4M3, Shape: []int64{256, 16}},
				engines.Tensor{Name: m + ".weight_global_scale", DType: safetensors.F32, Shape: []int64{1}})
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var qc map[string]any
		if dec.Decode(&qc) != nil || qc == nil {
			return
		}
		qc["quant_method"] = "compressed-tensors"
		cfg := map[string]any{"architectures": []any{"DeepseekV3ForCausalLM"}, "num_hidden_layers": json.Number("2"),
			"hidden_size": json.Number("256"), "moe_intermediate_size": json.Number("256"), "n_routed_experts": json.Number("2"),
			"quantization_config": qc}
		in := engines.Input{Config: cfg, Tensors: tensors, GlobalScales: map[string]float32{}}
		for _, e := range engines.Engines {
			for _, sm := range []int{0, 80, 90, 100, 120} {
				r := engines.Check(e, in, engines.Options{TP: 2, SM: sm})
				if r.ExpertFormat == "" || r.ExpertFormat == engines.FormatOther || sm == 0 || sm == 120 {
					continue
				}
				if _, ok := engines.SupportFor(r.ExpertFormat, e, sm); !ok && r.ExpertFormat != engines.FormatFP8Block {
					t.Errorf("%s %s SM%d: no row", r.ExpertFormat, e, sm)
				}
			}
		}
	})
}
