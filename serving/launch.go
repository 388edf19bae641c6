package serving

import (
	"fmt"
	"strconv"
	"strings"
)

// Command is one process of a deployment.
type Command struct {
	Name    string   // "prefill", "decode", "router" or "proxy"
	Env     []string // KEY=value set before the command
	Program []string // how the engine's entry point is run: "python -m sglang.launch_server", "vllm serve"
	Args    []string // what follows the program: positional arguments, then flags and their values
	// Note, when set, is what a person must know to run the command (where its program comes from).
	Note string
}

// Line is the whole command line: Program then Args.
func (c Command) Line() []string { return append(append([]string(nil), c.Program...), c.Args...) }

// String renders the command for a POSIX shell, one flag per line.
func (c Command) String() string {
	var b strings.Builder
	for _, e := range c.Env {
		b.WriteString(e)
		b.WriteString(" \\\n  ")
	}
	for i, a := range c.Line() {
		if i > 0 {
			if strings.HasPrefix(a, "--") {
				b.WriteString(" \\\n  ")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(shellQuote(a))
	}
	return b.String()
}

// shellQuote quotes a word that the shell would split or expand.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == '=' || r == ',' || r == '@' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Deployment is what the launch commands need.
type Deployment struct {
	Engine     Engine
	Parallel   Parallel
	KVDType    KVDType
	PrefillDir string // the prefill checkpoint
	DecodeDir  string // the decode checkpoint
	// PrefillFraction and DecodeFraction are the memory fractions of the plan; the commands pass
	// them so the engine sizes its KV cache as the plan did.
	PrefillFraction, DecodeFraction float64
	// PrefillHost and DecodeHost are where the servers run, for the router (placeholders when empty).
	PrefillHost, DecodeHost string
	// PrefillFlags and DecodeFlags are flags the engine's loading rules require of each server
	// (EngineFlags: --disable-shared-experts-fusion beside INT4 routed and BF16 shared experts).
	PrefillFlags, DecodeFlags []string
}

// Ports of the generated commands: each engine's documented defaults where it has them.
const (
	sglangPrefillPort   = 30000
	sglangDecodePort    = 30001
	sglangBootstrapPort = 8998 // --disaggregation-bootstrap-port default
	sglangRouterPort    = 8000
	vllmPrefillPort     = 8100
	vllmDecodePort      = 8200
	vllmProxyPort       = 8000
	vllmPrefillSideCh   = 5600 // VLLM_NIXL_SIDE_CHANNEL_PORT
	vllmDecodeSideCh    = 5601
)

// Commands returns the prefill server, the decode server and the process that joins them.
func (d Deployment) Commands() ([]Command, error) {
	p := d.Parallel
	if p.TP <= 0 || p.EP <= 0 || d.PrefillDir == "" || d.DecodeDir == "" {
		return nil, fmt.Errorf("%w: a deployment needs TP, EP and both checkpoint directories", ErrOptions)
	}
	if p.DP < 0 || p.TP%p.DPRanks() != 0 {
		return nil, fmt.Errorf("%w: DP %d does not divide TP %d", ErrOptions, p.DP, p.TP)
	}
	if p.DPLMHead && (p.DPRanks() == 1 || d.Engine != SGLang) {
		return nil, fmt.Errorf("%w: the DP LM head (--enable-dp-lm-head) is SGLang's and needs DP attention", ErrOptions)
	}
	ph, dh := d.PrefillHost, d.DecodeHost
	if ph == "" {
		ph = "PREFILL_HOST"
	}
	if dh == "" {
		dh = "DECODE_HOST"
	}
	switch d.Engine {
	case SGLang:
		return d.sglang(ph, dh), nil
	case VLLM:
		if p.EP != 1 && p.EP != p.TP {
			return nil, errVLLMEP(p)
		}
		return d.vllm(ph, dh), nil
	}
	return nil, fmt.Errorf("%w: engine %q", ErrOptions, d.Engine)
}

func itoa(n int) string { return strconv.Itoa(n) }

func fraction(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// sglangKVDType spells the KV dtype for SGLang's --kv-cache-dtype.
func sglangKVDType(dt KVDType) string {
	if dt == KVFP8 {
		return "fp8_e4m3"
	}
	return "bfloat16"
}

func (d Deployment) sglang(ph, dh string) []Command {
	server := func(role Role, dir string, port int, frac float64, extra []string) Command {
		a := []string{"--model-path", dir, "--trust-remote-code",
			"--disaggregation-mode", string(role), "--disaggregation-transfer-backend", "mooncake",
			"--tp-size", itoa(d.Parallel.TP)}
		if d.Parallel.EP > 1 {
			a = append(a, "--ep-size", itoa(d.Parallel.EP))
		}
		if dp := d.Parallel.DPRanks(); dp > 1 {
			a = append(a, "--dp-size", itoa(dp), "--enable-dp-attention")
			if d.Parallel.DPLMHead {
				a = append(a, "--enable-dp-lm-head")
			}
		}
		a = append(a, "--kv-cache-dtype", sglangKVDType(d.KVDType), "--mem-fraction-static", fraction(frac))
		a = append(a, extra...)
		if role == RolePrefill {
			a = append(a, "--disaggregation-bootstrap-port", itoa(sglangBootstrapPort))
		}
		a = append(a, "--host", "0.0.0.0", "--port", itoa(port))
		return Command{Name: string(role), Program: []string{"python", "-m", "sglang.launch_server"}, Args: a}
	}
	router := Command{Name: "router", Program: []string{"python", "-m", "sglang_router.launch_router"}, Args: []string{"--pd-disaggregation",
		"--prefill", fmt.Sprintf("http://%s:%d", ph, sglangPrefillPort), itoa(sglangBootstrapPort),
		"--decode", fmt.Sprintf("http://%s:%d", dh, sglangDecodePort),
		"--host", "0.0.0.0", "--port", itoa(sglangRouterPort)}}
	return []Command{
		server(RolePrefill, d.PrefillDir, sglangPrefillPort, d.PrefillFraction, d.PrefillFlags),
		server(RoleDecode, d.DecodeDir, sglangDecodePort, d.DecodeFraction, d.DecodeFlags),
		router,
	}
}

// vllmProxyScript is the disaggregation proxy of vLLM's source tree
// (tests/v1/kv_connector/nixl_integration/toy_proxy_server.py: --host, --port, --prefiller-hosts,
// --prefiller-ports, --decoder-hosts, --decoder-ports).
const vllmProxyScript = "tests/v1/kv_connector/nixl_integration/toy_proxy_server.py"

// vllmKVTransfer is the NIXL connector configuration of both vLLM servers.
const vllmKVTransfer = `{"kv_connector":"NixlConnector","kv_role":"kv_both"}`

func (d Deployment) vllm(ph, dh string) []Command {
	kv := "bfloat16"
	if d.KVDType == KVFP8 {
		kv = "fp8_e4m3"
	}
	server := func(role Role, dir string, port, side int, frac float64, extra []string) Command {
		// vLLM's --tensor-parallel-size is one DP rank's; the MoE layers span TP x DP GPUs.
		a := []string{dir, "--trust-remote-code",
			"--tensor-parallel-size", itoa(d.Parallel.AttnTP())}
		if dp := d.Parallel.DPRanks(); dp > 1 {
			a = append(a, "--data-parallel-size", itoa(dp))
		}
		if d.Parallel.EP > 1 {
			a = append(a, "--enable-expert-parallel")
		}
		a = append(a, "--kv-cache-dtype", kv, "--gpu-memory-utilization", fraction(frac))
		a = append(a, extra...)
		a = append(a, "--kv-transfer-config", vllmKVTransfer, "--port", itoa(port))
		return Command{Name: string(role), Env: []string{"VLLM_NIXL_SIDE_CHANNEL_PORT=" + itoa(side)}, Program: []string{"vllm", "serve"}, Args: a}
	}
	// The proxy is a script of vLLM's source tree (not installed with the wheel); it listens on
	// localhost unless told --host.
	proxy := Command{Name: "proxy", Program: []string{"python", vllmProxyScript},
		Note: "run from the root of a vLLM source checkout of the installed version: " + vllmProxyScript + " is not installed with the wheel",
		Args: []string{"--host", "0.0.0.0", "--port", itoa(vllmProxyPort),
			"--prefiller-hosts", ph, "--prefiller-ports", itoa(vllmPrefillPort),
			"--decoder-hosts", dh, "--decoder-ports", itoa(vllmDecodePort)}}
	return []Command{
		server(RolePrefill, d.PrefillDir, vllmPrefillPort, vllmPrefillSideCh, d.PrefillFraction, d.PrefillFlags),
		server(RoleDecode, d.DecodeDir, vllmDecodePort, vllmDecodeSideCh, d.DecodeFraction, d.DecodeFlags),
		proxy,
	}
}
