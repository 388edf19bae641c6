package calib

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"pdq/internal/fsutil"
	"pdq/safetensors"
)

// Tensor name suffixes of a statistics file, after the module name and a dot.
const (
	SuffixSqMean  = "input_sq_mean"  // F32 [K]: E[x_j²] over the tokens the module saw
	SuffixAbsMean = "input_abs_mean" // F32 [K]: E[|x_j|] (optional)
	SuffixHessian = "hessian"        // F32 [K, K]: XᵀX/n (optional)
	SuffixTokens  = "tokens"         // I64 [] or [1]: tokens the module saw (optional)
)

// Metadata keys of a statistics file.
const (
	MetaTokens = "tokens" // tokens run through the model (decimal)
	MetaSource = "source" // free text: model, data set, how collected
)

// Sentinel errors.
var (
	// ErrFormat: the statistics file violates the format (dtype, rank, duplicate module).
	ErrFormat = errors.New("malformed calibration statistics")
	// ErrMismatch: an entry's shape does not fit the module it is used for.
	ErrMismatch = errors.New("calibration statistics do not match the module")
)

// Stats is an opened statistics file. Data is read on demand.
type Stats struct {
	Path     string
	ID       string            // SHA-256 of the file's bytes, hex
	Tokens   int64             // metadata "tokens" (0 when absent)
	Source   string            // metadata "source"
	Metadata map[string]string // the whole __metadata__
	ck       *safetensors.Checkpoint
	entries  map[string]*Entry
}

// Entry is the statistics of one module as stored.
type Entry struct {
	Module  string // module name as written in the file
	K       int    // input features
	SqMean  *safetensors.Tensor
	AbsMean *safetensors.Tensor // nil when absent
	Hessian *safetensors.Tensor // nil when absent
	TokensT *safetensors.Tensor // nil when absent
}

// Open opens and validates a statistics file and computes its identity (a full read).
func Open(path string) (*Stats, error) {
	ck, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("calib: %w", err)
	}
	s := &Stats{Path: path, ck: ck, entries: map[string]*Entry{}}
	if err := s.index(); err != nil {
		ck.Close()
		return nil, err
	}
	if s.ID, err = hashFile(path); err != nil {
		ck.Close()
		return nil, err
	}
	return s, nil
}

// Close releases the file.
func (s *Stats) Close() error { return s.ck.Close() }

func (s *Stats) index() error {
	if len(s.ck.Shards) != 1 {
		return fmt.Errorf("calib: %s: %w: want one safetensors file, found %d", s.Path, ErrFormat, len(s.ck.Shards))
	}
	s.Metadata = s.ck.Shards[0].Header.Metadata
	s.Source = s.Metadata[MetaSource]
	if v, ok := s.Metadata[MetaTokens]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("calib: %s: %w: metadata tokens %q is not a count", s.Path, ErrFormat, v)
		}
		s.Tokens = n
	}
	byName := map[string]*safetensors.Tensor{}
	for _, t := range s.ck.Tensors() {
		byName[t.Name] = t
	}
	for _, t := range s.ck.Tensors() {
		m, ok := strings.CutSuffix(t.Name, "."+SuffixSqMean)
		if !ok {
			continue
		}
		if t.DType != safetensors.F32 || len(t.Shape) != 1 || t.Shape[0] <= 0 {
			return fmt.Errorf("calib: %s: tensor %q: %w: want F32 [K], have %s %v", s.Path, t.Name, ErrFormat, t.DType, t.Shape)
		}
		e := &Entry{Module: m, K: int(t.Shape[0]), SqMean: t, AbsMean: byName[m+"."+SuffixAbsMean],
			Hessian: byName[m+"."+SuffixHessian], TokensT: byName[m+"."+SuffixTokens]}
		k := int64(e.K)
		if a := e.AbsMean; a != nil && (a.DType != safetensors.F32 || len(a.Shape) != 1 || a.Shape[0] != k) {
			return fmt.Errorf("calib: %s: tensor %q: %w: want F32 [%d], have %s %v", s.Path, a.Name, ErrFormat, k, a.DType, a.Shape)
		}
		if h := e.Hessian; h != nil && (h.DType != safetensors.F32 || len(h.Shape) != 2 || h.Shape[0] != k || h.Shape[1] != k) {
			return fmt.Errorf("calib: %s: tensor %q: %w: want F32 [%d, %d], have %s %v", s.Path, h.Name, ErrFormat, k, k, h.DType, h.Shape)
		}
		if n := e.TokensT; n != nil && (n.DType != safetensors.I64 || n.NumElements() != 1 || len(n.Shape) > 1) {
			return fmt.Errorf("calib: %s: tensor %q: %w: want I64 [] or [1], have %s %v", s.Path, n.Name, ErrFormat, n.DType, n.Shape)
		}
		s.entries[m] = e
	}
	if len(s.entries) == 0 {
		return fmt.Errorf("calib: %s: %w: no *.%s tensor", s.Path, ErrFormat, SuffixSqMean)
	}
	return nil
}

// Modules returns the module names of the file, sorted.
func (s *Stats) Modules() []string {
	names := make([]string, 0, len(s.entries))
	for n := range s.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// sharedInput pairs projections that read the same input: gate and up of one expert or MLP.
var sharedInput = [][2]string{{"gate_proj", "up_proj"}, {"w1", "w3"}}

// Lookup returns the entry for module: its own, or else its sibling's when the module is a gate
// or up projection (gate_proj/up_proj, w1/w3), which read the same input. nil when neither exists.
func (s *Stats) Lookup(module string) *Entry {
	if e := s.entries[module]; e != nil {
		return e
	}
	i := strings.LastIndexByte(module, '.')
	if i < 0 {
		return nil
	}
	parent, leaf := module[:i+1], module[i+1:]
	for _, p := range sharedInput {
		switch leaf {
		case p[0]:
			return s.entries[parent+p[1]]
		case p[1]:
			return s.entries[parent+p[0]]
		}
	}
	return nil
}

// CheckShape reports ErrMismatch when the entry does not describe a module with cols inputs.
func (e *Entry) CheckShape(module string, cols int) error {
	if e.K != cols {
		return fmt.Errorf("calib: module %q: %w: statistics %q have %d input channels, the weight has %d", module, ErrMismatch, e.Module, e.K, cols)
	}
	return nil
}

// SqMean reads E[x²] of the entry and checks that every value is finite and non-negative.
func (s *Stats) SqMean(e *Entry) ([]float32, error) {
	return s.readVec(e.SqMean)
}

// AbsMean reads E[|x|] (nil, nil when the file has none).
func (s *Stats) AbsMean(e *Entry) ([]float32, error) {
	if e.AbsMean == nil {
		return nil, nil
	}
	return s.readVec(e.AbsMean)
}

func (s *Stats) readVec(t *safetensors.Tensor) ([]float32, error) {
	raw := make([]byte, t.ByteSize())
	if err := s.ck.ReadTensor(t, raw); err != nil {
		return nil, fmt.Errorf("calib: %w", err)
	}
	v := make([]float32, t.NumElements())
	if err := safetensors.DecodeFloat32(v, raw, t.DType); err != nil {
		return nil, fmt.Errorf("calib: tensor %q: %w", t.Name, err)
	}
	for i, x := range v {
		if !(x >= 0) || math.IsInf(float64(x), 1) {
			return nil, fmt.Errorf("calib: %s: tensor %q: %w: element %d is %v", s.Path, t.Name, ErrFormat, i, x)
		}
	}
	return v, nil
}

// Hessian reads the entry's Hessian as float64, row-major K×K (nil, nil when absent). It checks
// finiteness and symmetry (within float32 rounding) and averages the two triangles.
func (s *Stats) Hessian(e *Entry) ([]float64, error) {
	t := e.Hessian
	if t == nil {
		return nil, nil
	}
	k := e.K
	r, err := s.ck.TensorReader(t)
	if err != nil {
		return nil, fmt.Errorf("calib: %w", err)
	}
	h := make([]float64, k*k)
	row := make([]byte, 4*k)
	for i := range k {
		if _, err := io.ReadFull(r, row); err != nil {
			return nil, fmt.Errorf("calib: %s: tensor %q: %w", s.Path, t.Name, err)
		}
		for j := range k {
			v := math.Float32frombits(binary.LittleEndian.Uint32(row[4*j:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("calib: %s: tensor %q: %w: element [%d, %d] is %v", s.Path, t.Name, ErrFormat, i, j, v)
			}
			h[i*k+j] = float64(v)
		}
	}
	for i := range k {
		if h[i*k+i] < 0 {
			return nil, fmt.Errorf("calib: %s: tensor %q: %w: negative diagonal element %d", s.Path, t.Name, ErrFormat, i)
		}
		for j := i + 1; j < k; j++ {
			a, b := h[i*k+j], h[j*k+i]
			if d := math.Abs(a - b); d > 1e-3*math.Sqrt(h[i*k+i]*h[j*k+j])+1e-30 && d > 1e-5*math.Max(math.Abs(a), math.Abs(b)) {
				return nil, fmt.Errorf("calib: %s: tensor %q: %w: not symmetric at [%d, %d] (%g vs %g)", s.Path, t.Name, ErrFormat, i, j, a, b)
			}
			m := (a + b) / 2
			h[i*k+j], h[j*k+i] = m, m
		}
	}
	return h, nil
}

// EntryTokens returns the tokens the entry's module saw: its own count when the file has one,
// else -1 (unknown; callers treat all-zero statistics as no tokens).
func (s *Stats) EntryTokens(e *Entry) (int64, error) {
	if e.TokensT == nil {
		return -1, nil
	}
	raw := make([]byte, 8)
	if err := s.ck.ReadTensor(e.TokensT, raw); err != nil {
		return 0, fmt.Errorf("calib: %w", err)
	}
	n := int64(binary.LittleEndian.Uint64(raw))
	if n < 0 {
		return 0, fmt.Errorf("calib: %s: tensor %q: %w: negative token count %d", s.Path, e.TokensT.Name, ErrFormat, n)
	}
	return n, nil
}

// hashFile returns the hex SHA-256 of a file's bytes.
func hashFile(path string) (string, error) {
	_, sum, err := fsutil.HashFile(context.Background(), path)
	if err != nil {
		return "", fmt.Errorf("calib: %w", err)
	}
	return sum, nil
}

// Unobserved reports whether a module's E[x²] is zero for every input channel: statistics of an
// expert that saw no calibration tokens.
func Unobserved(sqMean []float32) bool {
	for _, v := range sqMean {
		if v != 0 {
			return false
		}
	}
	return true
}
