package quantize

import (
	"math"
	"testing"
)

func TestMetrics(t *testing.T) {
	ref := []float32{1, -2, 3, 4}
	got := []float32{1, -1.5, 3, 5}
	var m Metrics
	m.Add(ref, got, 10)
	want := Metrics{N: 4, SumSqRef: 30, SumSqErr: 1.25, SumAbsErr: 1.5, Dot: 1 + 3 + 9 + 20, SumSqGot: 1 + 2.25 + 9 + 25, MaxAbsErr: 1, MaxAbsIdx: 13}
	if m != want {
		t.Fatalf("%+v\nwant %+v", m, want)
	}
	if d := m.SQNR() - 10*math.Log10(30/1.25); math.Abs(d) > 1e-12 {
		t.Errorf("SQNR off by %v", d)
	}
	if d := m.RMSE() - math.Sqrt(1.25/4); math.Abs(d) > 1e-15 {
		t.Errorf("RMSE off by %v", d)
	}
	if d := m.RelRMSE() - math.Sqrt(1.25/30); math.Abs(d) > 1e-15 {
		t.Errorf("RelRMSE off by %v", d)
	}
	if m.MeanAbsErr() != 1.5/4 {
		t.Errorf("MeanAbsErr %v", m.MeanAbsErr())
	}
	if d := m.Cosine() - 33/math.Sqrt(30*37.25); math.Abs(d) > 1e-15 {
		t.Errorf("Cosine off by %v", d)
	}

	// Splitting and merging in order gives the same sums; ties keep the lower index.
	var a, b Metrics
	a.Add(ref[:2], got[:2], 10)
	b.Add(ref[2:], got[2:], 12)
	a.Merge(b)
	if a != m {
		t.Errorf("merged %+v != %+v", a, m)
	}
	var c Metrics
	c.Merge(Metrics{N: 1, MaxAbsErr: 2, MaxAbsIdx: 9})
	c.Merge(Metrics{N: 1, MaxAbsErr: 2, MaxAbsIdx: 3})
	c.Merge(Metrics{N: 1, MaxAbsErr: 1, MaxAbsIdx: 0})
	c.Merge(Metrics{})
	if c.MaxAbsIdx != 3 || c.N != 3 {
		t.Errorf("max tie: %+v", c)
	}

	var exact Metrics
	exact.Add(ref, ref, 0)
	if !math.IsInf(exact.SQNR(), 1) || exact.Cosine() != 1 || exact.MaxAbsIdx != 0 {
		t.Errorf("exact: %+v SQNR %v", exact, exact.SQNR())
	}
	var zero Metrics
	zero.Add([]float32{0, 0}, []float32{0, 0}, 0)
	if zero.Cosine() != 1 || !math.IsInf(zero.SQNR(), 1) {
		t.Errorf("zeros: cosine %v SQNR %v", zero.Cosine(), zero.SQNR())
	}
}

func TestMetricsLengthPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for different lengths")
		}
	}()
	var m Metrics
	m.Add([]float32{1, 2}, []float32{1}, 0)
}
