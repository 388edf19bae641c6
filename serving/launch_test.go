package serving

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// citedFlags reads the programs, flags and environment variables docs/SERVING.md cites for each
// engine release: the first backticked cell of each row between "<!-- cited-flags ENGINE -->"
// and "<!-- end cited-flags -->".
func citedFlags(t *testing.T) map[Engine]map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "SERVING.md"))
	if err != nil {
		t.Fatal(err)
	}
	cell := regexp.MustCompile("^\\| `([^`]+)` \\|")
	out := map[Engine]map[string]bool{}
	var cur map[string]bool
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "<!-- cited-flags "):
			cur = map[string]bool{}
			out[Engine(strings.TrimSuffix(strings.TrimPrefix(line, "<!-- cited-flags "), " -->"))] = cur
		case strings.HasPrefix(line, "<!-- end cited-flags"):
			cur = nil
		case cur != nil:
			if g := cell.FindStringSubmatch(line); g != nil {
				cur[g[1]] = true
			}
		}
	}
	return out
}

// engineFlagsOf is every flag EngineFlags can give engine e's servers.
func engineFlagsOf(e Engine) []string {
	if e == SGLang {
		return []string{"--disable-shared-experts-fusion"}
	}
	return nil
}

// TestLaunchFlagsCited: every program, flag and environment variable of the generated commands is
// one docs/SERVING.md cites for that engine's release, so a renamed flag fails here first.
func TestLaunchFlagsCited(t *testing.T) {
	cited := citedFlags(t)
	for _, e := range []Engine{SGLang, VLLM} {
		if len(cited[e]) < 8 {
			t.Fatalf("%s: %d cited flags in docs/SERVING.md", e, len(cited[e]))
		}
		for _, d := range []Deployment{
			{Engine: e, Parallel: Parallel{TP: 8, EP: 1}, KVDType: KVBF16, PrefillDir: "out/prefill", DecodeDir: "out/decode", PrefillFraction: 0.894, DecodeFraction: 0.929, DecodeFlags: engineFlagsOf(e)},
			{Engine: e, Parallel: Parallel{TP: 8, EP: 8}, KVDType: KVFP8, PrefillDir: "out/prefill", DecodeDir: "out/decode", PrefillFraction: 0.9, DecodeFraction: 0.9},
			{Engine: e, Parallel: Parallel{TP: 8, EP: 8, DP: 8, DPLMHead: e == SGLang}, KVDType: KVFP8, PrefillDir: "out/prefill", DecodeDir: "out/decode", PrefillFraction: 0.894, DecodeFraction: 0.833},
		} {
			cmds, err := d.Commands()
			if err != nil {
				t.Fatal(err)
			}
			if len(cmds) != 3 {
				t.Fatalf("%s: %d commands, want prefill, decode and the process joining them", e, len(cmds))
			}
			used := 0
			for _, c := range cmds {
				if p := strings.Join(c.Program, " "); !cited[e][p] {
					t.Errorf("%s %s: program %q is not cited in docs/SERVING.md", e, c.Name, p)
				}
				for _, env := range c.Env {
					if k, _, _ := strings.Cut(env, "="); !cited[e][k] {
						t.Errorf("%s %s: environment variable %q is not cited", e, c.Name, k)
					}
				}
				for _, a := range c.Args {
					if strings.HasPrefix(a, "--") {
						used++
						if !cited[e][a] {
							t.Errorf("%s %s: flag %s is not cited in docs/SERVING.md", e, c.Name, a)
						}
					}
				}
			}
			if used < 10 {
				t.Errorf("%s: only %d flags in the commands", e, used)
			}
		}
	}
}

// flagValue returns the word after flag in args ("" when absent).
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

func TestLaunchCommands(t *testing.T) {
	d := Deployment{Engine: SGLang, Parallel: Parallel{TP: 8, EP: 4}, KVDType: KVFP8, PrefillDir: "/data/g5/prefill", DecodeDir: "/data/g5/decode",
		PrefillFraction: 0.894, DecodeFraction: 0.929, PrefillHost: "10.0.0.1", DecodeHost: "10.0.0.2"}
	cmds, err := d.Commands()
	if err != nil {
		t.Fatal(err)
	}
	pre, dec, router := cmds[0], cmds[1], cmds[2]
	for _, c := range []struct {
		cmd        Command
		mode, path string
		frac       string
	}{{pre, "prefill", "/data/g5/prefill", "0.894"}, {dec, "decode", "/data/g5/decode", "0.929"}} {
		a := c.cmd.Args
		if flagValue(a, "--disaggregation-mode") != c.mode || flagValue(a, "--model-path") != c.path ||
			flagValue(a, "--tp-size") != "8" || flagValue(a, "--ep-size") != "4" ||
			flagValue(a, "--kv-cache-dtype") != "fp8_e4m3" || flagValue(a, "--mem-fraction-static") != c.frac {
			t.Errorf("%s: %q", c.mode, a)
		}
	}
	if flagValue(router.Args, "--prefill") != "http://10.0.0.1:30000" || !slices.Contains(router.Args, "8998") ||
		flagValue(router.Args, "--decode") != "http://10.0.0.2:30001" {
		t.Errorf("router: %q", router.Args)
	}
	d.Engine, d.Parallel.EP = VLLM, 8
	if cmds, err = d.Commands(); err != nil {
		t.Fatal(err)
	}
	s := cmds[1].String()
	if !strings.Contains(s, `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`) ||
		!strings.Contains(s, "vllm serve /data/g5/decode") || !strings.Contains(s, "--enable-expert-parallel") ||
		!strings.HasPrefix(s, "VLLM_NIXL_SIDE_CHANNEL_PORT=5601") {
		t.Errorf("vllm decode:\n%s", s)
	}
	d.Parallel.EP = 2
	if _, err := d.Commands(); !errors.Is(err, ErrOptions) {
		t.Errorf("vLLM EP 2 of TP 8: %v, want ErrOptions", err)
	}

	// DP attention: SGLang keeps --tp-size the server's GPUs and adds --dp-size with
	// --enable-dp-attention; vLLM's --tensor-parallel-size is one DP rank's.
	d.Engine, d.Parallel = SGLang, Parallel{TP: 8, EP: 8, DP: 4, DPLMHead: true}
	if cmds, err = d.Commands(); err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds[:2] {
		if a := c.Args; flagValue(a, "--tp-size") != "8" || flagValue(a, "--dp-size") != "4" || flagValue(a, "--ep-size") != "8" ||
			!slices.Contains(a, "--enable-dp-attention") || !slices.Contains(a, "--enable-dp-lm-head") {
			t.Errorf("sglang DP4 %s: %q", c.Name, a)
		}
	}
	d.Engine, d.Parallel = VLLM, Parallel{TP: 8, EP: 8, DP: 4}
	if cmds, err = d.Commands(); err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds[:2] {
		if a := c.Args; flagValue(a, "--tensor-parallel-size") != "2" || flagValue(a, "--data-parallel-size") != "4" ||
			!slices.Contains(a, "--enable-expert-parallel") {
			t.Errorf("vllm DP4 %s: %q", c.Name, a)
		}
	}
	for _, bad := range []Deployment{
		{Engine: VLLM, Parallel: Parallel{TP: 8, EP: 1, DP: 8, DPLMHead: true}},
		{Engine: SGLang, Parallel: Parallel{TP: 8, EP: 1, DPLMHead: true}},
		{Engine: SGLang, Parallel: Parallel{TP: 8, EP: 1, DP: 3}},
	} {
		bad.PrefillDir, bad.DecodeDir = "p", "d"
		if _, err := bad.Commands(); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: %v, want ErrOptions", bad.Parallel, err)
		}
	}
	if got := shellQuote("it's"); got != `'it'\''s'` {
		t.Errorf("quote: %s", got)
	}
}

// glm5DecodeFlags are the flags EngineFlags gives GLM-5's SGLang decode server (TestEngineFlags).
var glm5DecodeFlags = []string{"--disable-shared-experts-fusion"}

// TestDocsShowGeneratedCommands: the launch commands docs/SERVING.md shows are what the generator
// writes for those plans (GLM-5 on 8 x 141 GiB, SGLang TP8, vLLM TP8 EP8 and SGLang TP8 DP8, BF16
// KV cache).
func TestDocsShowGeneratedCommands(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "SERVING.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, d := range []Deployment{
		{Engine: SGLang, Parallel: Parallel{TP: 8, EP: 1}, KVDType: KVBF16, PrefillDir: "/data/g5/prefill", DecodeDir: "/data/g5/decode",
			PrefillFraction: DefaultMemFraction(SGLang, 141<<30, Parallel{TP: 8, EP: 1}, RolePrefill, true), DecodeFraction: DefaultMemFraction(SGLang, 141<<30, Parallel{TP: 8, EP: 1}, RoleDecode, true),
			DecodeFlags: glm5DecodeFlags},
		{Engine: VLLM, Parallel: Parallel{TP: 8, EP: 8}, KVDType: KVBF16, PrefillDir: "/data/g5/prefill", DecodeDir: "/data/g5/decode",
			PrefillFraction: 0.9, DecodeFraction: 0.9},
		{Engine: SGLang, Parallel: Parallel{TP: 8, EP: 1, DP: 8}, KVDType: KVBF16, PrefillDir: "/data/g5/prefill", DecodeDir: "/data/g5/decode",
			PrefillFraction: DefaultMemFraction(SGLang, 141<<30, Parallel{TP: 8, EP: 1, DP: 8}, RolePrefill, true),
			DecodeFraction:  DefaultMemFraction(SGLang, 141<<30, Parallel{TP: 8, EP: 1, DP: 8}, RoleDecode, true),
			DecodeFlags:     glm5DecodeFlags},
	} {
		cmds, err := d.Commands()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			head := "# " + c.Name + "\n"
			if c.Note != "" {
				head += "# " + c.Note + "\n" // as pdq plan prints it
			}
			if !strings.Contains(doc, head+c.String()+"\n") {
				t.Errorf("docs/SERVING.md does not show the %s %s command:\n%s", d.Engine, c.Name, c.String())
			}
		}
	}
}
