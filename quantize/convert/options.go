package convert

import (
	"errors"
	"fmt"
	"slices"

	"pdq/calib"
	"pdq/kernels"
	"pdq/quantize"
	"pdq/quantize/report"
)

// Scheme says what an output does with one source module (report.Scheme).
type Scheme = report.Scheme

// The schemes (see package report).
const (
	SchemeCopy     = report.SchemeCopy
	SchemeInt4     = report.SchemeInt4
	SchemeFP8Block = report.SchemeFP8Block
	SchemeFP8Keep  = report.SchemeFP8Keep
	SchemeBF16     = report.SchemeBF16
	SchemePassed   = report.SchemePassed
)

// DecodeFormat is the format of the routed experts in the decode checkpoint.
type DecodeFormat string

// DecodeInt4 is compressed-tensors pack-quantized INT4, the default decode format. It is the
// zero value, so that plans of INT4 runs keep their IDs. The other formats are declared in their
// encodings' files (enc_*.go) and registered with their descriptions (FormatInfo).
const DecodeInt4 DecodeFormat = "int4"

// DecodeFormats lists the registered decode formats in the order help and errors name them
// (Formats describes them).
var DecodeFormats []DecodeFormat

// DenseForm is what the decode checkpoint keeps for the Linears it does not make INT4.
type DenseForm string

// The dense forms.
const (
	DenseBF16 DenseForm = "bf16" // BF16 (loads in vLLM and SGLang)
	DenseFP8  DenseForm = "fp8"  // FP8 blocks, a second compressed-tensors group
)

// Unsupported is what planning does with a target the scheme cannot take.
type Unsupported string

// The choices for unsupported targets.
const (
	UnsupportedError Unsupported = "error" // refuse the plan (ErrUnsupported)
	UnsupportedSkip  Unsupported = "skip"  // keep the module dense and list it in Plan.Skipped
)

// DefaultTargets matches the routed-expert Linear modules of GLM, DeepSeek, Kimi and Qwen-style
// checkpoints: "model.layers.7.mlp.experts.42.gate_proj" and friends.
const DefaultTargets = `\.experts\.\d+\.(gate_proj|up_proj|down_proj|w1|w2|w3)$`

// FP8BlockSize is the block edge of the FP8 schemes pdq writes.
const FP8BlockSize = kernels.FP8Block

// DefaultMaxShardSize is the largest output shard unless told otherwise (5 GB, as the Hugging Face
// tools use).
const DefaultMaxShardSize = 5_000_000_000

// Options decide the plan.
type Options struct {
	GroupSize     int             // INT4 group size: 32, 64 or 128 (0 means DefaultGroupSize), or PerChannel
	Method        quantize.Method // INT4 scale method
	SignedScales  bool            // experimental Q4_0-style signed scales
	Targets       string          // regex over module names selecting INT4 modules (default DefaultTargets)
	Ignore        string          // regex over module names kept out of every quantization
	DecodeDense   DenseForm       // DenseBF16 (default) or DenseFP8: what the decode checkpoint keeps for non-target Linears
	Only          OutputKind      // "" (both), KindPrefill or KindDecode
	MaxShardSize  int64           // output shard cap (default DefaultMaxShardSize)
	OnUnsupported Unsupported     // UnsupportedError (default) or UnsupportedSkip: keep unsupported targets dense and list them
	// DecodeFormat is the routed experts' format in the decode checkpoint ("" means DecodeInt4).
	DecodeFormat DecodeFormat `json:",omitempty"`
	// NoInt4OK accepts a decode output without any INT4 module (otherwise ErrNoTargets).
	NoInt4OK bool `json:",omitempty"`

	// Calib, when set, holds the calibration statistics the INT4 modules use (see CalibMethod);
	// the plan ID includes the file's SHA-256, so a resumed run refuses a different file.
	Calib         *calib.Stats `json:"-"`
	CalibMethod   string       `json:",omitempty"` // "weighted" (default with Calib) or "gptq"
	CalibActOrder bool         `json:",omitempty"` // gptq: process columns by decreasing E[x²]
	CalibDamp     float64      `json:",omitempty"` // gptq: dampening, fraction of the mean diagonal (0: 1%)

	// TargetSet and IgnoreSet, when not nil, replace the Targets and Ignore regexes with exact
	// module names (verify rebuilds a plan from what an output holds).
	TargetSet map[string]bool `json:"-"`
	IgnoreSet map[string]bool `json:"-"`
}

// Sentinel errors of planning.
var (
	// ErrUnsupported: a target module cannot take the scheme (dtype, shape, group size).
	ErrUnsupported = errors.New("unsupported module")
	// ErrMissingScale: an FP8 weight without its scale companion.
	ErrMissingScale = errors.New("FP8 weight without a scale companion")
	// ErrBadOptions: options that contradict each other or the source.
	ErrBadOptions = errors.New("invalid options")
	// ErrNoTargets: the decode output would hold no module in its decode format (nothing matches the targets,
	// or the ignore pattern removes every match).
	ErrNoTargets = errors.New("no module to quantize in the decode format")
)

// PerChannel as Options.GroupSize gives one INT4 scale per output channel.
const PerChannel = quantize.PerChannel

// DefaultGroupSize is the INT4 group size unless told otherwise.
const DefaultGroupSize = 32

// decodeFormat is the decode format, DecodeInt4 when unset.
func (o *Options) decodeFormat() DecodeFormat {
	if o.DecodeFormat == "" {
		return DecodeInt4
	}
	return o.DecodeFormat
}

// targetScheme is the encoding of the decode output's targets.
func (o *Options) targetScheme() Scheme {
	if f, ok := FormatOf(o.decodeFormat()); ok {
		return f.Scheme
	}
	return SchemeInt4
}

// FixedGroup is the group size decode format f fixes (FormatInfo.FixedGroup), 0 when
// Options.GroupSize chooses it (INT4) or f is not registered.
func (f DecodeFormat) FixedGroup() int {
	info, _ := FormatOf(f)
	return info.FixedGroup
}

// fixedGroup is the group size the decode format fixes, 0 when Options.GroupSize chooses it.
func (o *Options) fixedGroup() int { return o.decodeFormat().FixedGroup() }

// formatGroup sets the group size unset (0) to the decode format's, and refuses one that
// contradicts a format with fixed groups.
func (o *Options) formatGroup() error {
	fixed := o.fixedGroup()
	switch {
	case o.GroupSize == 0 && fixed != 0:
		o.GroupSize = fixed
	case o.GroupSize == 0:
		o.GroupSize = DefaultGroupSize
	case fixed != 0 && o.GroupSize != fixed:
		return fmt.Errorf("%w: group size %d, but decode format %s has groups of %d", ErrBadOptions, o.GroupSize, o.decodeFormat(), fixed)
	}
	return nil
}

// group returns the group length for a module with cols input features.
func (o *Options) group(cols int) int { return quantize.GroupWidth(o.GroupSize, cols) }

func (o *Options) defaults() error {
	if err := o.formatGroup(); err != nil {
		return err
	}
	if o.Method == "" {
		o.Method = quantize.Method("mse")
	}
	if o.Targets == "" {
		o.Targets = DefaultTargets
	}
	if o.DecodeDense == "" {
		o.DecodeDense = DenseBF16
	}
	if o.MaxShardSize <= 0 {
		o.MaxShardSize = DefaultMaxShardSize
	}
	if o.OnUnsupported == "" {
		o.OnUnsupported = UnsupportedError
	}
	if o.DecodeFormat == DecodeInt4 {
		o.DecodeFormat = "" // the zero value: INT4 plans keep their IDs
	}
	switch {
	case o.fixedGroup() == 0 && quantize.CheckGroupSize(o.GroupSize) != nil:
		return fmt.Errorf("%w: group size %d (want 32, 64 or 128, or per channel)", ErrBadOptions, o.GroupSize)
	case o.DecodeDense != DenseBF16 && o.DecodeDense != DenseFP8:
		return fmt.Errorf("%w: decode dense %q (want bf16 or fp8)", ErrBadOptions, o.DecodeDense)
	case o.Only != "" && o.Only != KindPrefill && o.Only != KindDecode:
		return fmt.Errorf("%w: only %q (want prefill or decode)", ErrBadOptions, o.Only)
	case !slices.Contains(DecodeFormats, o.decodeFormat()):
		return errFormat(o.DecodeFormat)
	case encodings[o.targetScheme()] == nil:
		return fmt.Errorf("%w: decode format %q is not built yet", ErrBadOptions, o.DecodeFormat)
	case o.OnUnsupported != UnsupportedError && o.OnUnsupported != UnsupportedSkip:
		return fmt.Errorf("%w: on-unsupported %q (want error or skip)", ErrBadOptions, o.OnUnsupported)
	case o.Method.Check() != nil:
		return fmt.Errorf("%w: %v", ErrBadOptions, o.Method.Check())
	case o.SignedScales && o.targetScheme() != SchemeInt4:
		return fmt.Errorf("%w: signed scales are an INT4 option, not one of decode format %s", ErrBadOptions, o.decodeFormat())
	case o.Calib != nil && o.targetScheme() != SchemeInt4:
		return fmt.Errorf("%w: calibration statistics apply to INT4 only, not to decode format %s", ErrBadOptions, o.decodeFormat())
	case o.SignedScales && o.Method != "mse":
		return fmt.Errorf("%w: signed scales need the mse method, not %q", ErrBadOptions, o.Method)
	}
	return o.calibDefaults()
}
