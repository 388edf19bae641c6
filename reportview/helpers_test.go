package reportview

import (
	"fmt"
	"math"

	"pdq/quantize/report"
)

// row makes a report row with the identity fields and the two metrics the views sort by.
func row(output, module, role, scheme string, sqnr, rel float64) report.TensorReport {
	suffix := ".weight"
	if scheme == "int4" {
		suffix = ".weight_packed"
	}
	r := report.TensorReport{Output: output, Module: module, Tensor: module + suffix, Role: role, Scheme: scheme,
		Shape: []int64{256, 128}, Elements: 256 * 128, Layer: -1, Expert: -1,
		SQNR: report.Float(sqnr), RelRMSE: report.Float(rel), MaxAbsErr: report.Float(rel / 10)}
	if scheme == "int4" {
		r.GroupSize = 32
	}
	return r
}

// expertRow is a routed expert's decode row at (layer, expert, projection).
func expertRow(layer, expert int, proj string, sqnr float64) report.TensorReport {
	m := fmt.Sprintf("model.layers.%d.mlp.experts.%d.%s", layer, expert, proj)
	r := row("decode", m, "routed_experts", "int4", sqnr, math.Pow(10, -sqnr/20))
	r.Layer, r.Expert, r.Projection, r.Method = layer, expert, proj, "mse"
	return r
}

func tensorNames(rows []report.TensorReport) []string {
	var s []string
	for _, r := range rows {
		s = append(s, r.Output+":"+r.Tensor)
	}
	return s
}
