package engines

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"pdq/quantize/rules"
)

// Format is what one compressed-tensors config group makes of a Linear's weights and inputs, as
// the engines' scheme selection tells the cases apart (vLLM compressed_tensors.py
// _get_scheme_from_parts and compressed_tensors_moe.py get_moe_method; SGLang's get_moe_scheme).
type Format string

// The formats every checkpoint may hold. The routed experts' 4-bit formats beyond INT4 are
// declared in a file of their own each, which registers their rules (registerExpertFormat).
const (
	FormatInt4     Format = "int4"      // INT4 group or channel weights, inputs not quantized (WNA16, pack-quantized)
	FormatFP8Block Format = "fp8-block" // FP8 weights in blocks
	FormatOther    Format = "other"     // anything else: a scheme pdq does not check
)

// formatOf classifies a config group's weights and input_activations (nil for none): FP8
// blocks here, the routed experts' formats by their rules' classify.
func formatOf(w, in map[string]any) Format {
	bits, _ := rules.IntOf(w["num_bits"])
	typ, _ := w["type"].(string)
	strategy, _ := w["strategy"].(string)
	if bits == 8 && typ == "float" && strategy == "block" {
		if bs, ok := w["block_structure"].([]any); ok && len(bs) == 2 {
			return FormatFP8Block
		}
	}
	for _, r := range expertFormats {
		if r.classify(w, in) {
			return r.format
		}
	}
	return FormatOther
}

// Generation is a GPU generation the support table covers, by CUDA compute capability.
type Generation struct {
	Name string `json:"name"` // "Hopper"
	SM   int    `json:"sm"`   // 90
	GPUs string `json:"gpus"` // "H100, H200"
}

// String is "Hopper SM90 (H100, H200)".
func (g Generation) String() string { return fmt.Sprintf("%s SM%d (%s)", g.Name, g.SM, g.GPUs) }

// Generations are the GPU generations of the support table, oldest first.
var Generations = []Generation{
	{"Ampere", 80, "A100"},
	{"Hopper", 90, "H100, H200"},
	{"Blackwell", 100, "B200, GB200"},
}

// gpuSM maps GPU names to their compute capability.
var gpuSM = map[string]int{"a100": 80, "h100": 90, "h200": 90, "h20": 90, "b200": 100, "gb200": 100, "b300": 100, "gb300": 100}

// ErrUnknownGPU: a GPU name or compute capability the support table does not cover.
var ErrUnknownGPU = errors.New("unknown GPU")

// ParseGPU reads a GPU name (a100, h100, h200, b200, gb200, ...), "sm90" or "90" and returns its
// generation. The error wraps ErrUnknownGPU.
func ParseGPU(s string) (Generation, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	sm, ok := gpuSM[t]
	if !ok {
		n, err := strconv.Atoi(strings.TrimPrefix(t, "sm"))
		if err != nil {
			return Generation{}, fmt.Errorf("%w: %q (known: a100, h100, h200, b200, gb200, or sm80, sm90, sm100)", ErrUnknownGPU, s)
		}
		sm = n
	}
	for _, g := range Generations {
		if g.SM == sm {
			return g, nil
		}
	}
	return Generation{}, fmt.Errorf("%w: SM%d is not one of the generations the engine rules cover (SM80, SM90, SM100)", ErrUnknownGPU, sm)
}

// Support is one cell of the format × engine × GPU table: whether the engine loads routed experts
// of the format on GPUs of compute capability MinSM to MaxSM, and through which scheme and kernel.
type Support struct {
	Format Format `json:"format"`
	Engine Engine `json:"engine"`
	MinSM  int    `json:"min_sm"`
	MaxSM  int    `json:"max_sm"`
	Loads  bool   `json:"loads"`
	// Path is the scheme class the engine picks and the kernel it runs (or why it refuses).
	Path string `json:"path"`
	// Note is what to know beyond loads / does not (a newer engine needed, activations
	// quantized where the checkpoint did not measure them).
	Note   string `json:"note,omitempty"`
	Source string `json:"source"`
}

// SupportFor returns the cell of the table for routed experts of format f, engine e and compute
// capability sm; ok is false when the table has none (a format or GPU it does not cover).
func SupportFor(f Format, e Engine, sm int) (s Support, ok bool) {
	for _, r := range supportTable {
		if r.Format == f && r.Engine == e && sm >= r.MinSM && sm <= r.MaxSM {
			return r, true
		}
	}
	return Support{}, false
}

// SupportTable lists the table's cells per generation: for each format it covers, engine and
// generation, one Support (its MinSM and MaxSM the generation's).
func SupportTable(f Format) []Support {
	var out []Support
	for _, e := range Engines {
		for _, g := range Generations {
			if s, ok := SupportFor(f, e, g.SM); ok {
				s.MinSM, s.MaxSM = g.SM, g.SM
				out = append(out, s)
			}
		}
	}
	return out
}

// SupportedFormats lists the formats the table covers, in the order their rules were
// registered (expertFormats).
var SupportedFormats []Format

// supportTable is the format × engine × GPU table of routed experts (FusedMoE layers): one row per
// range of compute capabilities, each citing the engine file it was read in; every format's rules
// add their rows (expertRules.support).
var supportTable []Support
