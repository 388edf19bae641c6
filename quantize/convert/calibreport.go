package convert

import (
	"math"
	"sort"

	"pdq/quantize/report"
)

// setCalib records a module's calibration in its report row; res holds its slabs' results.
func setCalib(t *report.TensorReport, mc *ModuleCalib, res []outResult) {
	if mc == nil {
		return
	}
	t.CalibMethod, t.CalibNote = mc.Method, mc.Note
	if mc.Shared && mc.Entry != nil {
		t.CalibEntry = mc.Entry.Module
	}
	if mc.Tokens >= 0 {
		n := mc.Tokens
		t.CalibTokens = &n
	}
	if mc.Method == CalibNone {
		return
	}
	var ref, e float64
	for i := range res {
		ref += res[i].wRef
		e += res[i].wErr
		if res[i].method != "" {
			t.CalibMethod = res[i].method
		}
		if res[i].note != "" {
			t.CalibNote = res[i].note
		}
	}
	rel, db := report.Float(math.Sqrt(e/ref)), report.Float(sqnr(ref, e))
	t.WeightedRelRMSE, t.WeightedSQNR = &rel, &db
	t.WeightedSumSq, t.WeightedSumSqErr = ref, e
}

// calibReport summarises the calibration of the rows (nil without statistics).
func calibReport(p *Plan, rows []report.TensorReport) *report.Calibration {
	st := p.Options.Calib
	if st == nil {
		return nil
	}
	c := &report.Calibration{File: st.Path, SHA256: st.ID, Source: st.Source, Tokens: st.Tokens, Method: p.Options.CalibMethod,
		ActOrder: p.Options.CalibActOrder, Damp: p.Options.CalibDamp, Modules: map[string]int{}}
	var ref, e float64
	for _, t := range rows {
		if t.CalibMethod == "" {
			continue
		}
		c.Modules[t.CalibMethod]++
		switch {
		case t.CalibMethod == CalibNone && t.CalibNote == "saw no tokens":
			c.NoTokens++
		case t.CalibMethod == CalibNone:
			c.NoStats++
		case t.CalibNote == noHessianNote:
			c.NoHessian++
		case t.CalibNote != "":
			c.Notes = append(c.Notes, t.Module+": "+t.CalibNote)
		}
		if t.CalibEntry != "" {
			c.Shared++
		}
		if t.WeightedSQNR != nil {
			ref += t.WeightedSumSq
			e += t.WeightedSumSqErr
		}
	}
	sort.Strings(c.Notes)
	if ref > 0 {
		v := report.Float(sqnr(ref, e))
		c.WeightedSQNR = &v
	}
	return c
}
