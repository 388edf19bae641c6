package calib

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"pdq/safetensors"
)

// ModuleStats is one module's statistics to write.
type ModuleStats struct {
	Name    string
	SqMean  []float32 // E[x²], K values
	AbsMean []float32 // E[|x|], K values or nil
	Hessian []float32 // XᵀX/n, K×K row-major, or nil
	Tokens  int64     // tokens seen; < 0 writes no count
}

// WriteFile writes a statistics file (the format tools/collect_calib.py writes) to path, under a
// temporary name renamed when complete. meta becomes __metadata__ (MetaTokens, MetaSource, ...).
func WriteFile(path string, meta map[string]string, mods []ModuleStats) error {
	var specs []safetensors.TensorSpec
	data := map[string][]byte{}
	add := func(name string, dt safetensors.DType, shape []int64, b []byte) {
		specs = append(specs, safetensors.TensorSpec{Name: name, DType: dt, Shape: shape})
		data[name] = b
	}
	for _, m := range mods {
		k := int64(len(m.SqMean))
		add(m.Name+"."+SuffixSqMean, safetensors.F32, []int64{k}, f32Bytes(m.SqMean))
		if m.AbsMean != nil {
			if int64(len(m.AbsMean)) != k {
				return fmt.Errorf("calib: write %s: module %q: %d E[|x|] values for K=%d", path, m.Name, len(m.AbsMean), k)
			}
			add(m.Name+"."+SuffixAbsMean, safetensors.F32, []int64{k}, f32Bytes(m.AbsMean))
		}
		if m.Hessian != nil {
			if int64(len(m.Hessian)) != k*k {
				return fmt.Errorf("calib: write %s: module %q: %d Hessian values for K=%d", path, m.Name, len(m.Hessian), k)
			}
			add(m.Name+"."+SuffixHessian, safetensors.F32, []int64{k, k}, f32Bytes(m.Hessian))
		}
		if m.Tokens >= 0 {
			b := make([]byte, 8)
			binary.LittleEndian.PutUint64(b, uint64(m.Tokens))
			add(m.Name+"."+SuffixTokens, safetensors.I64, []int64{1}, b)
		}
	}
	l, err := safetensors.ComputeLayout(specs, meta)
	if err != nil {
		return fmt.Errorf("calib: write %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("calib: %w", err)
	}
	w, err := safetensors.Create(path, l)
	if err != nil {
		return fmt.Errorf("calib: %w", err)
	}
	for _, s := range specs {
		if err := w.WriteTensor(s.Name, data[s.Name]); err != nil {
			w.Abort()
			return fmt.Errorf("calib: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("calib: %w", err)
	}
	return nil
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
