package serving

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// flagSource is where one printed flag was found in the engine's source, at the commit read.
type flagSource struct {
	Repo, Path, Commit string
}

// Engine files the printed flags were checked in. SGLang's parser snapshot in reach
// (server_args.py at 469c63e54e7d) predates disaggregation, so SGLang's server flags are checked
// in its generated argument reference, docs/advanced_features/server_arguments.md, which lists
// server_args.py's add_cli_args.
var (
	fsSGLArgs   = flagSource{"sglang", "docs/advanced_features/server_arguments.md", "b36e8e198b71553316b55bce53de6ecf9b3a9a47"}
	fsSGLRouter = flagSource{"sglang", "sgl-model-gateway/bindings/python/src/sglang_router/router_args.py", "6614f98405b9d58cf284fd1494dd9322e9d44f76"}
	fsVLLMArgs  = flagSource{"vllm", "vllm/engine/arg_utils.py", "99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b"}
	fsVLLMCLI   = flagSource{"vllm", "vllm/entrypoints/openai/cli_args.py", "789340fbad95a900ca3c467c9cee33b3d905fd61"}
	fsVLLMProxy = flagSource{"vllm", vllmProxyScript, "e009930196c9a5da69d0a6c025ae580efff00168"}
)

// printedFlagSources lists, per program, every flag pdq prints in a launch command and the engine
// file (and commit) whose argument parser defines it.
var printedFlagSources = map[string]map[string]flagSource{
	"python -m sglang.launch_server": {
		"--model-path": fsSGLArgs, "--trust-remote-code": fsSGLArgs, "--disaggregation-mode": fsSGLArgs,
		"--disaggregation-transfer-backend": fsSGLArgs, "--disaggregation-bootstrap-port": fsSGLArgs,
		"--tp-size": fsSGLArgs, "--ep-size": fsSGLArgs, "--dp-size": fsSGLArgs, "--enable-dp-attention": fsSGLArgs,
		"--enable-dp-lm-head": fsSGLArgs, "--kv-cache-dtype": fsSGLArgs, "--mem-fraction-static": fsSGLArgs,
		"--disable-shared-experts-fusion": fsSGLArgs, "--host": fsSGLArgs, "--port": fsSGLArgs,
	},
	"python -m sglang_router.launch_router": {
		"--pd-disaggregation": fsSGLRouter, "--prefill": fsSGLRouter, "--decode": fsSGLRouter,
		"--host": fsSGLRouter, "--port": fsSGLRouter,
	},
	"vllm serve": {
		"--trust-remote-code": fsVLLMArgs, "--tensor-parallel-size": fsVLLMArgs, "--data-parallel-size": fsVLLMArgs,
		"--enable-expert-parallel": fsVLLMArgs, "--kv-cache-dtype": fsVLLMArgs, "--gpu-memory-utilization": fsVLLMArgs,
		"--kv-transfer-config": fsVLLMArgs, "--port": fsVLLMCLI,
	},
	"python " + vllmProxyScript: {
		"--host": fsVLLMProxy, "--port": fsVLLMProxy, "--prefiller-hosts": fsVLLMProxy,
		"--prefiller-ports": fsVLLMProxy, "--decoder-hosts": fsVLLMProxy, "--decoder-ports": fsVLLMProxy,
	},
}

// launchMatrix is a deployment of each shape the commands take: plain TP, EP, DP attention with
// and without the DP LM head, BF16 and FP8 KV cache, and the flags EngineFlags adds.
func launchMatrix(e Engine) []Deployment {
	base := Deployment{Engine: e, PrefillDir: "out/prefill", DecodeDir: "out/decode", PrefillFraction: 0.9, DecodeFraction: 0.9}
	var out []Deployment
	for _, p := range []Parallel{{TP: 8, EP: 1}, {TP: 8, EP: 8}, {TP: 8, EP: 8, DP: 8}, {TP: 8, EP: 8, DP: 8, DPLMHead: e == SGLang}, {TP: 8, EP: 1, DP: 2}} {
		for _, kv := range []KVDType{KVBF16, KVFP8} {
			d := base
			d.Parallel, d.KVDType = p, kv
			d.PrefillFlags, d.DecodeFlags = engineFlagsOf(e), engineFlagsOf(e)
			out = append(out, d)
		}
	}
	return out
}

// TestPrintedFlagSources: every flag of every command pdq prints is in printedFlagSources under
// its program, with the engine file it was checked in, and every table entry is printed by some
// command (a flag pdq stops printing leaves the table too).
func TestPrintedFlagSources(t *testing.T) {
	printed := map[string]map[string]bool{}
	for _, e := range []Engine{SGLang, VLLM} {
		for _, d := range launchMatrix(e) {
			cmds, err := d.Commands()
			if err != nil {
				t.Fatalf("%s %+v: %v", e, d.Parallel, err)
			}
			for _, c := range cmds {
				prog := strings.Join(c.Program, " ")
				table, ok := printedFlagSources[prog]
				if !ok {
					t.Errorf("%s: program %q has no row in printedFlagSources", c.Name, prog)
					continue
				}
				if printed[prog] == nil {
					printed[prog] = map[string]bool{}
				}
				for _, a := range c.Args {
					if !strings.HasPrefix(a, "--") {
						continue
					}
					printed[prog][a] = true
					if _, ok := table[a]; !ok {
						t.Errorf("%s prints %s %s, which printedFlagSources does not list with its source", e, prog, a)
					}
				}
			}
		}
	}
	for prog, table := range printedFlagSources {
		for flag, src := range table {
			if !printed[prog][flag] {
				t.Errorf("printedFlagSources lists %s %s, which no command prints", prog, flag)
			}
			if src.Repo == "" || src.Path == "" {
				t.Errorf("%s %s: no source file", prog, flag)
			}
		}
	}
}

// TestPrintedFlagSourcesDocumented: docs/SERVING.md cites each checked source at its commit.
func TestPrintedFlagSourcesDocumented(t *testing.T) {
	doc := readServingDoc(t)
	var seen []flagSource
	for _, table := range printedFlagSources {
		for _, s := range table {
			if s.Commit == "" || slices.Contains(seen, s) {
				continue
			}
			seen = append(seen, s)
			if row := "`" + s.Path + "` | " + s.Commit[:12] + " |"; !strings.Contains(doc, row) {
				t.Errorf("docs/SERVING.md has no row %q", row)
			}
		}
	}
}

func readServingDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "SERVING.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
