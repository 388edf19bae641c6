package calib_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"pdq/calib"
	"pdq/safetensors"
)

func writeFile(t testing.TB, mods []calib.ModuleStats) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "stats.safetensors")
	if err := calib.WriteFile(p, map[string]string{calib.MetaTokens: "10", calib.MetaSource: "unit"}, mods); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLookupSiblings: a module is found under its own name, else under its gate/up (w1/w3)
// sibling's; down projections have no sibling.
func TestLookupSiblings(t *testing.T) {
	p := writeFile(t, []calib.ModuleStats{
		{Name: "l.experts.0.gate_proj", SqMean: []float32{1, 2}, Tokens: 3},
		{Name: "l.experts.1.up_proj", SqMean: []float32{1, 2}, Tokens: -1},
		{Name: "l.experts.2.w3", SqMean: []float32{1, 2}, Tokens: 0},
	})
	st, err := calib.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Tokens != 10 || st.Source != "unit" || len(st.ID) != 64 {
		t.Errorf("metadata: tokens %d source %q id %q", st.Tokens, st.Source, st.ID)
	}
	for _, tc := range []struct{ module, want string }{
		{"l.experts.0.gate_proj", "l.experts.0.gate_proj"},
		{"l.experts.0.up_proj", "l.experts.0.gate_proj"},
		{"l.experts.1.gate_proj", "l.experts.1.up_proj"},
		{"l.experts.2.w1", "l.experts.2.w3"},
		{"l.experts.0.down_proj", ""},
		{"l.experts.3.gate_proj", ""},
	} {
		e := st.Lookup(tc.module)
		got := ""
		if e != nil {
			got = e.Module
		}
		if got != tc.want {
			t.Errorf("Lookup(%q) = %q, want %q", tc.module, got, tc.want)
		}
	}
	for _, tc := range []struct {
		module string
		want   int64
	}{{"l.experts.0.gate_proj", 3}, {"l.experts.1.up_proj", -1}, {"l.experts.2.w3", 0}} {
		if n, err := st.EntryTokens(st.Lookup(tc.module)); err != nil || n != tc.want {
			t.Errorf("EntryTokens(%s) = %d, %v; want %d", tc.module, n, err, tc.want)
		}
	}
	if err := st.Lookup("l.experts.0.gate_proj").CheckShape("m", 3); !errors.Is(err, calib.ErrMismatch) {
		t.Errorf("CheckShape with K 2 vs 3: %v", err)
	}
}

// TestOpenRefusesBadFiles: wrong dtypes and shapes, negative or non-finite moments, asymmetric
// Hessians and files without entries are format errors naming the tensor.
func TestOpenRefusesBadFiles(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.safetensors")
	if err := calib.WriteFile(bad, nil, []calib.ModuleStats{{Name: "m", SqMean: []float32{1}, Hessian: []float32{1, 2, 3, 4}}}); err == nil {
		t.Error("Hessian of the wrong size written")
	}
	p := writeFile(t, []calib.ModuleStats{{Name: "m", SqMean: []float32{1, -1}, Hessian: []float32{1, 2, 0.5, 1}, Tokens: -1}})
	st, err := calib.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := st.Lookup("m")
	if _, err := st.SqMean(e); !errors.Is(err, calib.ErrFormat) {
		t.Errorf("negative E[x²]: %v", err)
	}
	if _, err := st.Hessian(e); !errors.Is(err, calib.ErrFormat) {
		t.Errorf("asymmetric Hessian: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.safetensors")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := calib.Open(empty); err == nil {
		t.Error("empty file accepted")
	}
	// A valid safetensors file with no *.input_sq_mean tensor, and one whose moments are F16.
	for _, spec := range []safetensors.TensorSpec{
		{Name: "m.weight", DType: safetensors.F32, Shape: []int64{2}},
		{Name: "m.input_sq_mean", DType: safetensors.F16, Shape: []int64{2}},
	} {
		l, err := safetensors.ComputeLayout([]safetensors.TensorSpec{spec}, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "other.safetensors")
		w, err := safetensors.Create(p, l)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteTensor(spec.Name, make([]byte, 2*spec.DType.Bits()/8)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := calib.Open(p); !errors.Is(err, calib.ErrFormat) {
			t.Errorf("file holding only %s %s: %v, want ErrFormat", spec.Name, spec.DType, err)
		}
	}
}

// FuzzOpen: arbitrary bytes never panic the reader; what opens reads back without panicking.
func FuzzOpen(f *testing.F) {
	good, _ := os.ReadFile(writeFile(f, []calib.ModuleStats{{Name: "a.gate_proj", SqMean: []float32{1, 2}, AbsMean: []float32{1, 1}, Hessian: []float32{1, 0, 0, 2}, Tokens: 4}}))
	f.Add(good)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "f.safetensors")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := calib.Open(p)
		if err != nil {
			return
		}
		defer st.Close()
		for _, m := range st.Modules() {
			e := st.Lookup(m)
			st.SqMean(e)
			st.AbsMean(e)
			st.Hessian(e)
			st.EntryTokens(e)
		}
	})
}
