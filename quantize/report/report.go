// Package report is the schema of report.json, the per-tensor error report pdq convert writes
// and pdq report, verify and the HTML page read: plain data types and their JSON form, with no
// dependency on the conversion pipeline.
package report

import (
	"encoding/json"
	"math"
	"strconv"

	"pdq/quantize/rules"
)

// Float is a float64 that encodes infinities and NaN as JSON null (an exact reconstruction has
// infinite SQNR).
type Float float64

// MarshalJSON writes null for non-finite values and the shortest decimal otherwise.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// UnmarshalJSON reads null as +Inf (the only non-finite value reports write is an exact SQNR).
func (f *Float) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = Float(math.Inf(1))
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Float(v)
	return nil
}

// TensorReport is the error of one quantized output tensor, measured on the bytes written and
// compared with the source's own dequantized values.
type TensorReport struct {
	Output      string  `json:"output"` // "prefill" or "decode"
	Module      string  `json:"module"`
	Tensor      string  `json:"tensor"` // the output tensor holding the values
	Role        string  `json:"role"`
	Scheme      string  `json:"scheme"`
	GroupSize   int     `json:"group_size,omitempty"`
	Method      string  `json:"method,omitempty"`
	Shape       []int64 `json:"shape"`
	SourceDType string  `json:"source_dtype"`
	Layer       int     `json:"layer"`  // -1 when not in a layer
	Expert      int     `json:"expert"` // -1 when not a routed expert
	Projection  string  `json:"projection,omitempty"`
	Elements    int64   `json:"elements"`
	RMSE        Float   `json:"rmse"`
	RelRMSE     Float   `json:"rel_rmse"`
	SQNR        Float   `json:"sqnr_db"`
	MaxAbsErr   Float   `json:"max_abs_err"`
	MaxAbsIndex int64   `json:"max_abs_err_index"`
	MeanAbsErr  Float   `json:"mean_abs_err"`
	Cosine      Float   `json:"cosine"`
	Clipped     int64   `json:"clipped"`
	RTNSQNR     *Float  `json:"rtn_sqnr_db,omitempty"` // what the compressed-tensors rule would have given

	// With calibration statistics (INT4 modules only): how they were used and the
	// activation-weighted error, d = E[x²] per input channel: sqrt(Σd(w−ŵ)²/Σd·w²) and
	// 10·log10(Σd·w²/Σd(w−ŵ)²).
	CalibMethod     string `json:"calib_method,omitempty"` // weighted, gptq or none
	CalibEntry      string `json:"calib_entry,omitempty"`  // the statistics used when another module's (gate/up)
	CalibTokens     *int64 `json:"calib_tokens,omitempty"` // tokens the module saw, when the file says
	CalibNote       string `json:"calib_note,omitempty"`   // why none, or why gptq was not used as planned
	WeightedRelRMSE *Float `json:"weighted_rel_rmse,omitempty"`
	WeightedSQNR    *Float `json:"weighted_sqnr_db,omitempty"`
	// The sums behind them, Σd·w² and Σd(w−ŵ)², for totals over modules.
	WeightedSumSq    float64 `json:"weighted_sum_sq,omitempty"`
	WeightedSumSqErr float64 `json:"weighted_sum_sq_err,omitempty"`
}

// RoleSummary aggregates the tensors of one role in one output.
type RoleSummary struct {
	Output       string `json:"output"`
	Role         string `json:"role"`
	Scheme       string `json:"scheme"`
	Tensors      int    `json:"tensors"`
	Elements     int64  `json:"elements"`
	SQNR         Float  `json:"sqnr_db"` // over all elements of the group: 10 log10(Σx²/Σe²)
	MeanSQNR     Float  `json:"mean_sqnr_db"`
	MinSQNR      Float  `json:"min_sqnr_db"`
	WorstRelRMSE Float  `json:"worst_rel_rmse"`
	RTNSQNR      *Float `json:"rtn_sqnr_db,omitempty"`
}

// Report is report.json: what a conversion wrote and how far each quantized tensor is from its
// source.
type Report struct {
	Tool         string         `json:"tool"`
	Source       string         `json:"source"`
	SourceLayout rules.Detected `json:"source_layout"`
	Options      Options        `json:"options"`
	Device       string         `json:"device"`
	InputBytes   int64          `json:"input_bytes"`
	PrefillBytes int64          `json:"prefill_bytes,omitempty"`
	DecodeBytes  int64          `json:"decode_bytes,omitempty"`
	Skipped      []string       `json:"skipped,omitempty"`
	Warnings     []string       `json:"warnings,omitempty"`
	Calibration  *Calibration   `json:"calibration,omitempty"`
	Summary      []RoleSummary  `json:"summary"`
	Worst        []TensorReport `json:"worst"`
	Tensors      []TensorReport `json:"tensors"`
}

// Options records the options that shaped the outputs.
type Options struct {
	// DecodeFormat is the routed experts' format in the decode output ("" for int4).
	DecodeFormat string `json:"decode_format,omitempty"`
	GroupSize    int    `json:"group_size"`
	Method       string `json:"method"`
	SignedScales bool   `json:"signed_scales,omitempty"`
	Targets      string `json:"targets"`
	Ignore       string `json:"ignore,omitempty"`
	DecodeDense  string `json:"decode_dense"`
	Only         string `json:"only,omitempty"`
	MaxShardSize int64  `json:"max_shard_size"`
}

// Calibration is the calibration section of report.json.
type Calibration struct {
	File     string  `json:"file"`
	SHA256   string  `json:"sha256"`
	Source   string  `json:"source,omitempty"` // the file's free-text source
	Tokens   int64   `json:"tokens"`           // the file's token count
	Method   string  `json:"method"`           // weighted or gptq
	ActOrder bool    `json:"act_order,omitempty"`
	Damp     float64 `json:"damp,omitempty"`
	// Modules counts the INT4 modules per method used; Shared those that used their sibling's
	// entry; NoStats and NoTokens those quantized without weights, and why.
	Modules  map[string]int `json:"modules"`
	Shared   int            `json:"shared"`
	NoStats  int            `json:"no_stats"`
	NoTokens int            `json:"no_tokens"`
	// NoHessian counts modules that used the weighted search under gptq for lack of a Hessian.
	NoHessian int `json:"no_hessian,omitempty"`
	// Notes lists modules whose method differs from the plan or needed more dampening.
	Notes []string `json:"notes,omitempty"`
	// WeightedSQNR is over every module with statistics: 10·log10(ΣΣd·w² / ΣΣd(w−ŵ)²).
	WeightedSQNR *Float `json:"weighted_sqnr_db,omitempty"`
}
