package convert

import (
	"math"
	"regexp"
	"sort"
	"strconv"

	"pdq/quantize"
	"pdq/quantize/report"
	"pdq/quantize/rules"
)

var (
	reLayer  = regexp.MustCompile(`\.layers\.(\d+)\.`)
	reExpert = regexp.MustCompile(`\.experts\.(\d+)\.(\w+)$`)
	reProj   = regexp.MustCompile(`\.(\w+)$`)
)

// newTensorReport fills the identity fields of a report row for module m.
func newTensorReport(output OutputKind, m *Module, tensor string, scheme Scheme, metrics quantize.Metrics) report.TensorReport {
	r := report.TensorReport{
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
	if m.Packed != nil { // the shape of the values, the source's format
		r.Shape, r.SourceDType = []int64{int64(m.Rows), int64(m.Cols)}, m.Packed.layout.Format.String()
		if scheme == SchemePassed && m.Packed.layout.Format == quantize.PackedInt4 {
			r.GroupSize = m.Packed.layout.GroupSize
		}
	}
	setMetrics(&r, metrics)
	return r
}

func setMetrics(r *report.TensorReport, m quantize.Metrics) {
	r.Elements = m.N
	r.RMSE, r.RelRMSE, r.SQNR = report.Float(m.RMSE()), report.Float(m.RelRMSE()), report.Float(m.SQNR())
	r.MaxAbsErr, r.MaxAbsIndex = report.Float(m.MaxAbsErr), m.MaxAbsIdx
	r.MeanAbsErr, r.Cosine, r.Clipped = report.Float(m.MeanAbsErr()), report.Float(m.Cosine()), m.Clipped
}

// finish sorts the rows and computes the summary and the worst tensors.
func finishReport(r *report.Report, sums map[[3]string]*roleAcc) {
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
	worst := make([]report.TensorReport, 0, len(r.Tensors))
	for _, t := range r.Tensors {
		if report.Info(Scheme(t.Scheme)).Quantized {
			worst = append(worst, t)
		}
	}
	sort.SliceStable(worst, func(i, j int) bool { return worst[i].SQNR < worst[j].SQNR })
	if len(worst) > 10 {
		worst = worst[:10]
	}
	r.Worst = worst
	if r.Tensors == nil { // nothing measured (an FP8 source's prefill alone): an empty list, not null
		r.Tensors = []report.TensorReport{}
	}
	if r.Summary == nil {
		r.Summary = []report.RoleSummary{}
	}
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

func (a *roleAcc) add(t report.TensorReport, m quantize.Metrics, rtn *quantize.Metrics) {
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

func (a *roleAcc) summary(k [3]string) report.RoleSummary {
	s := report.RoleSummary{Output: k[0], Role: k[1], Scheme: k[2], Tensors: a.n, Elements: a.elems,
		SQNR: report.Float(sqnr(a.sumRef, a.err)), MeanSQNR: report.Float(a.sumSQNR / float64(a.n)), MinSQNR: report.Float(a.minSQNR),
		WorstRelRMSE: report.Float(a.worstRel)}
	if a.rtnN == a.n && a.n > 0 {
		v := report.Float(sqnr(a.sumRef, a.rtnErr))
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
