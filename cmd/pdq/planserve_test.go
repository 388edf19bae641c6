package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"pdq/quantize/convert"
	"pdq/serving"
)

// TestPlanServing: pdq plan --gpu-memory adds the serving plan (text and JSON), --serve prints the
// launch commands, and a plan that cannot work fails with --serve, naming why.
func TestPlanServing(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if _, code, err := runPDQ(t, "testdata", "gen", "--style", "deepseek", "--fp8", "--out", src); code != 0 {
		t.Fatal(err)
	}
	base := []string{"plan", src, "--gpus", "2", "--tp", "1", "--gpu-memory", "1GiB", "--mem-fraction", "0.5", "--reserve", "0"}

	stdout, code, err := runPDQ(t, append(base, "--serve", "sglang", "--out", "/data/x")...)
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, stdout)
	}
	for _, want := range []string{"serving plan (sglang rules)", "2 server(s) of TP1 EP1", "KV per token: mla", "assumed: reserve",
		"python -m sglang.launch_server", "--model-path /data/x/decode", "--disaggregation-mode decode", "--mem-fraction-static 0.5",
		"sglang_router.launch_router"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("plan --serve sglang lacks %q:\n%s", want, stdout)
		}
	}

	stdout, code, err = runPDQ(t, append(base, "--json", "--kv-cache-dtype", "fp8_e4m3")...)
	if code != 0 {
		t.Fatal(err)
	}
	var doc struct {
		Serving struct {
			KV     string `json:"kv_cache_dtype"`
			Decode struct {
				Tokens  int64 `json:"tokens"`
				KVBytes int64 `json:"kv_bytes_per_gpu"`
				KV      struct {
					PerToken int64 `json:"per_token"`
				} `json:"kv"`
				Weights struct {
					PerGPU int64 `json:"per_gpu_bytes"`
				} `json:"weights"`
			} `json:"decode"`
		} `json:"serving"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	d := doc.Serving.Decode
	// Tiny deepseek: 3 layers of (128 + 32) FP8 bytes; half of 1 GiB less the weights.
	if doc.Serving.KV != "fp8_e4m3" || d.KV.PerToken != 3*160 || d.KVBytes != 1<<29-d.Weights.PerGPU || d.Tokens != d.KVBytes/d.KV.PerToken {
		t.Errorf("serving JSON: %+v", doc.Serving)
	}

	// 16 MiB per GPU holds no weights: a warning without --serve, a failure with it.
	small := []string{"plan", src, "--gpus", "1", "--gpu-memory", "16MiB"}
	if stdout, code, _ = runPDQ(t, small...); code != 0 || !strings.Contains(stdout, "warning: decode: weights do not fit") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
	if _, code, err = runPDQ(t, append(small, "--serve", "vllm")...); code != 1 || err == nil || !strings.Contains(err.Error(), "weights do not fit") {
		t.Errorf("--serve with weights over budget: exit %d, %v", code, err)
	}
	// DP attention: --dp 2 of TP2 gives two ranks of attention TP1, each with its own tokens;
	// the launch commands carry the engine's DP flags.
	dpArgs := []string{"plan", src, "--gpus", "2", "--gpu-memory", "1GiB", "--mem-fraction", "0.5", "--reserve", "0", "--dp", "2", "--ep", "2", "--json"}
	stdout, code, err = runPDQ(t, append(dpArgs, "--serve", "sglang", "--dp-lm-head")...)
	if code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, stdout)
	}
	var dpDoc struct {
		Serving struct {
			DP     int `json:"dp_attention"`
			AttnTP int `json:"attention_tp"`
			Decode struct {
				Tokens        int64 `json:"tokens"`
				TokensPerRank int64 `json:"tokens_per_dp_rank"`
			} `json:"decode"`
			Commands []launchCommand `json:"commands"`
		} `json:"serving"`
	}
	if err := json.Unmarshal([]byte(stdout), &dpDoc); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if sv := dpDoc.Serving; sv.DP != 2 || sv.AttnTP != 1 || sv.Decode.TokensPerRank <= 0 || sv.Decode.Tokens != 2*sv.Decode.TokensPerRank ||
		!strings.Contains(sv.Commands[1].Shell, "--dp-size 2 \\\n  --enable-dp-attention \\\n  --enable-dp-lm-head") {
		t.Errorf("DP attention plan: %+v", sv)
	}
	if stdout, code, err = runPDQ(t, append(dpArgs[:len(dpArgs)-1], "--serve", "vllm")...); code != 0 ||
		!strings.Contains(stdout, "--tensor-parallel-size 1 \\\n  --data-parallel-size 2") || !strings.Contains(stdout, "DP2 (attention TP1)") {
		t.Errorf("vllm DP2: exit %d, %v\n%s", code, err, stdout)
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--gpus", "4", "--dp", "3"}, "--dp 3 does not divide --tp 4"},
		{[]string{"--dp", "0"}, "--dp 0: want"},
		{[]string{"--dp-lm-head"}, "--dp-lm-head needs DP attention"},
		{[]string{"--dp", "8", "--dp-lm-head", "--serve", "vllm"}, "SGLang option"},
		{[]string{"--gpus", "8", "--dp", "1"}, "4 attention heads do not split across attention TP 8"},
		{[]string{"--gpus", "4", "--dp", "4", "--ep", "2", "--serve", "vllm"}, "EP must be 1 or 4"},
	} {
		args := append([]string{"plan", src, "--gpu-memory", "1GiB"}, bad.args...)
		if _, code, err := runPDQ(t, args...); code != 2 || err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: exit %d (%v), want 2 saying %q", bad.args, code, err, bad.want)
		}
	}
	for _, bad := range [][]string{
		{"plan", src, "--gpu-memory", "1GiB", "--gpus", "3"}, // 4 heads across TP3
		{"plan", src, "--gpu-memory", "1GiB", "--tp", "2", "--ep", "3"},
		{"plan", src, "--serve", "sglang"}, // no --gpu-memory
		{"plan", src, "--gpu-memory", "1GiB", "--serve", "trtllm"},
		{"plan", src, "--gpu-memory", "1GiB", "--kv-cache-dtype", "int8"},
	} {
		if _, code, err := runPDQ(t, bad...); code != 2 {
			t.Errorf("%q: exit %d (%v), want 2", bad[2:], code, err)
		}
	}
}

// TestPlanDecodeGPUs: pdq plan says on which GPU generations each engine loads the decode
// checkpoint's routed experts (text and JSON), from the format × engine × GPU table; a format
// that some generation cannot load is named NO there, with the reason.
func TestPlanDecodeGPUs(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if _, code, err := runPDQ(t, "testdata", "gen", "--fp8", "--out", src); code != 0 {
		t.Fatal(err)
	}
	stdout, code, err := runPDQ(t, "plan", src)
	if code != 0 || !strings.Contains(stdout, "decode experts (int4) load on") ||
		!strings.Contains(stdout, "vllm    Ampere SM80 (A100) yes, Hopper SM90 (H100, H200) yes, Blackwell SM100 (B200, GB200) yes") {
		t.Fatalf("exit %d, %v\n%s", code, err, stdout)
	}
	stdout, code, err = runPDQ(t, "plan", src, "--json")
	if code != 0 {
		t.Fatal(err)
	}
	var doc struct {
		GPUs []struct {
			Engine string `json:"engine"`
			SM     int    `json:"min_sm"`
			Loads  bool   `json:"loads"`
		} `json:"decode_gpus"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || len(doc.GPUs) != 6 {
		t.Fatalf("decode_gpus: %v %+v", err, doc.GPUs)
	}
	serve := []string{"plan", src, "--gpus", "1", "--gpu-memory", "141GiB", "--serve", "vllm"}
	if stdout, code, _ = runPDQ(t, append(serve, "--gpu", "h200")...); code != 0 || !strings.Contains(stdout, "1 GPU(s) Hopper SM90 (H100, H200) of") {
		t.Errorf("--gpu h200: exit %d\n%s", code, stdout)
	}
	if _, code, _ = runPDQ(t, append(serve, "--gpu", "v100")...); code != exitUsage {
		t.Errorf("--gpu v100: exit %d, want usage", code)
	}
	if _, code, _ = runPDQ(t, "plan", src, "--gpu", "h200"); code != exitUsage {
		t.Errorf("--gpu without a serving plan: exit %d, want usage", code)
	}
	var b strings.Builder
	printDecodeGPUs(&b, serving.FormatGPUs(convert.DecodeW4AFP8))
	for _, want := range []string{"decode experts (w4afp8)", "sglang  Ampere SM80 (A100) NO, Hopper SM90 (H100, H200) yes, Blackwell SM100 (B200, GB200) NO",
		"vllm on Ampere, Blackwell: the W4A8 FP8 scheme is picked on SM90 exactly"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("w4afp8 lacks %q:\n%s", want, b.String())
		}
	}
}
