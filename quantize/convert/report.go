package convert

import (
	"encoding/json"
	"math"
	"regexp"
	"sort"
	"strconv"

	"pdq/quantize"
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
	Options      ReportOptions  `json:"options"`
	Device       string         `json:"device"`
	InputBytes   int64          `json:"input_bytes"`
	PrefillBytes int64          `json:"prefill_bytes,omitempty"`
	DecodeBytes  int64          `json:"decode_bytes,omitempty"`
	Skipped      []string       `json:"skipped,omitempty"`
	Warnings     []string       `json:"warnings,omitempty"`
	Calibration  *CalibReport   `json:"calibration,omitempty"`
	Summary      []RoleSummary  `json:"summary"`
	Worst        []TensorReport `json:"worst"`
	Tensors      []TensorReport `json:"tensors"`
}

// ReportOptions records the options that shaped the outputs.
type ReportOptions struct {
	GroupSize    int    `json:"group_size"`
	Method       string `json:"method"`
	SignedScales bool   `json:"signed_scales,omitempty"`
	Targets      string `json:"targets"`
	Ignore       string `json:"ignore,omitempty"`
	DecodeDense  string `json:"decode_dense"`
	Only         string `json:"only,omitempty"`
	MaxShardSize int64  `json:"max_shard_size"`
}

var (
	reLayer  = regexp.MustCompile(`\.layers\.(\d+)\.`)
	reExpert = regexp.MustCompile(`\.experts\.(\d+)\.(\w+)$`)
	reProj   = regexp.MustCompile(`\.(\w+)$`)
)

// newTensorReport fills the identity fields of a report row for module m.
func newTensorReport(output OutputKind, m *Module, tensor string, scheme Scheme, metrics quantize.Metrics) TensorReport {
	r := TensorReport{
		Output: string(output), Module: m.Name, Tensor: tensor, Role: string(m.Role), Scheme: string(scheme),
		Shape: m.Weight.Shape, SourceDType: string(m.Weight.DType), Layer: -1, Expert: -1,
	}
	if sm := reLayer.FindStringSubmatch(m.Name); sm != nil {
		r.Layer, _ = strconv.Atoi(sm[1])
	}
	if sm := reExpert.FindStringSubmatch(m.Name); sm != nil {
		r.Expert, _ = strconv.Atoi(sm[1])
		r.Projection = sm[2]
	} else if sm := reProj.FindStringSubmatch(m.Name); sm != nil {
		r.Projection = sm[1]
	}
	r.setMetrics(metrics)
	return r
}

func (r *TensorReport) setMetrics(m quantize.Metrics) {
	r.Elements = m.N
	r.RMSE, r.RelRMSE, r.SQNR = Float(m.RMSE()), Float(m.RelRMSE()), Float(m.SQNR())
	r.MaxAbsErr, r.MaxAbsIndex = Float(m.MaxAbsErr), m.MaxAbsIdx
	r.MeanAbsErr, r.Cosine, r.Clipped = Float(m.MeanAbsErr()), Float(m.Cosine()), m.Clipped
}

// finish sorts the rows and computes the summary and the worst tensors.
func (r *Report) finish(sums map[[3]string]*roleAcc) {
	sort.SliceStable(r.Tensors, func(i, j int) bool {
		a, b := r.Tensors[i], r.Tensors[j]
		if a.Output != b.Output {
			return a.Output > b.Output // prefill before decode
		}
		return false // keep plan order within an output
	})
	r.Summary = r.Summary[:0]
	keys := make([][3]string, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	order := map[string]int{}
	for i, role := range rules.Roles {
		order[string(role)] = i
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a[0] != b[0] {
			return a[0] > b[0]
		}
		if order[a[1]] != order[b[1]] {
			return order[a[1]] < order[b[1]]
		}
		return a[2] < b[2]
	})
	for _, k := range keys {
		r.Summary = append(r.Summary, sums[k].summary(k))
	}
	worst := make([]TensorReport, 0, len(r.Tensors))
	for _, t := range r.Tensors {
		if t.Scheme == string(SchemeInt4) || t.Scheme == string(SchemeFP8Block) {
			worst = append(worst, t)
		}
	}
	sort.SliceStable(worst, func(i, j int) bool { return worst[i].SQNR < worst[j].SQNR })
	if len(worst) > 10 {
		worst = worst[:10]
	}
	r.Worst = worst
}

// roleAcc accumulates one (output, role, scheme) group of the summary.
type roleAcc struct {
	n, rtnN     int
	elems       int64
	sumRef, err float64
	rtnErr      float64
	sumSQNR     float64
	minSQNR     float64
	worstRel    float64
}

func (a *roleAcc) add(t TensorReport, m quantize.Metrics, rtn *quantize.Metrics) {
	if a.n == 0 {
		a.minSQNR = math.Inf(1)
	}
	a.n++
	a.elems += m.N
	a.sumRef += m.SumSqRef
	a.err += m.SumSqErr
	a.sumSQNR += float64(t.SQNR)
	a.minSQNR = math.Min(a.minSQNR, float64(t.SQNR))
	a.worstRel = math.Max(a.worstRel, float64(t.RelRMSE))
	if rtn != nil {
		a.rtnN++
		a.rtnErr += rtn.SumSqErr
	}
}

func (a *roleAcc) summary(k [3]string) RoleSummary {
	s := RoleSummary{Output: k[0], Role: k[1], Scheme: k[2], Tensors: a.n, Elements: a.elems,
		SQNR: Float(sqnr(a.sumRef, a.err)), MeanSQNR: Float(a.sumSQNR / float64(a.n)), MinSQNR: Float(a.minSQNR),
		WorstRelRMSE: Float(a.worstRel)}
	if a.rtnN == a.n && a.n > 0 {
		v := Float(sqnr(a.sumRef, a.rtnErr))
		s.RTNSQNR = &v
	}
	return s
}

func sqnr(ref, err float64) float64 {
	if err == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(ref/err)
}
