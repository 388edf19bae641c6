package convert

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"

	"pdq/kernels"
	"pdq/quantize"
)

// NVFP4's global scale is 448·6 over the largest |value| of the tensor, and the gate and up
// projections of one expert share one (the engines run them as one w13 GEMM and vLLM keeps only
// the first): before either is encoded, the absolute maximum of both must be known. A run finds
// it when the first slab of either needs it, by reading both weights from the source once more
// in chunks of about a MiB (memory stays bounded), and keeps it for the other. The maximum of a
// set of values does not depend on the order they are read in, so every run, resumed run,
// worker count and part of a split conversion writes the same scale.

// fp4Globals holds the NVFP4 global scales a run has found, per module or gate/up pair.
type fp4Globals struct {
	mu     sync.Mutex
	byName map[string]*Module
	m      map[string]*cachedGlobal
}

type cachedGlobal struct {
	once sync.Once
	g    float32
	err  error
}

// get returns the global scale of module m of plan p: shared with its gate or up sibling when
// that is NVFP4 too.
func (c *fp4Globals) get(ctx context.Context, p *Plan, m *Module) (float32, error) {
	c.mu.Lock()
	if c.byName == nil {
		c.byName = make(map[string]*Module, len(p.Modules))
		c.m = map[string]*cachedGlobal{}
		for _, x := range p.Modules {
			if x.Linear {
				c.byName[x.Name] = x
			}
		}
	}
	members, key := []*Module{m}, m.Name
	if sib := c.byName[siblingOf(m.Name)]; sib != nil && sib.Scheme(KindDecode) == SchemeNVFP4 {
		members = append(members, sib)
		key = min(m.Name, sib.Name) // one key for the pair
	}
	cg := c.m[key]
	if cg == nil {
		cg = &cachedGlobal{}
		c.m[key] = cg
	}
	c.mu.Unlock()
	cg.once.Do(func() {
		var amax float32
		for _, x := range members {
			a, err := sourceAbsMax(ctx, p, x)
			if err != nil {
				cg.err = fmt.Errorf("convert: %s: NVFP4 global scale: %w", x.describe(), err)
				return
			}
			amax = max(amax, a)
		}
		cg.g = kernels.NVFP4GlobalScale(amax)
	})
	return cg.g, cg.err
}

// siblingOf is the name of the projection that shares a w13 GEMM with module name (up for gate,
// w3 for w1 and back), "" for any other module.
func siblingOf(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return ""
	}
	pairs := map[string]string{"gate_proj": "up_proj", "up_proj": "gate_proj", "w1": "w3", "w3": "w1"}
	if s, ok := pairs[name[i+1:]]; ok {
		return name[:i+1] + s
	}
	return ""
}

// globalChunkElems bounds the values a global-scale pass decodes at once (an FP8 source with
// block scales: at least one block row): a worker finding a global scale holds about 1.5 MiB
// (up to 128 rows of an FP8 source) beside its slab, outside the run's memory budget (taking
// from the budget there could wait on the slabs the workers hold).
const globalChunkElems = 256 << 10

// sourceAbsMax reads module m's weight from the source in chunks (of whole block rows for FP8
// block scales), decodes each and returns the largest |value|. NaN and ±Inf are refused,
// naming the element.
func sourceAbsMax(ctx context.Context, p *Plan, m *Module) (float32, error) {
	step := max(1, globalChunkElems/max(m.Cols, 1))
	if m.Scale != nil && !isChannelScale(m) { // block scales: whole block rows
		step = max(FP8BlockSize, step/FP8BlockSize*FP8BlockSize)
	}
	var (
		raw  []byte
		vals []float32
		amax float32
	)
	for r0 := 0; r0 < m.Rows; r0 += step {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		s := &slab{r0: r0, r1: min(m.Rows, r0+step)}
		s.ranges(m)
		raw = grow(raw, int(s.wLen))
		if err := p.Source.ReadTensorAt(m.Weight, raw, s.wOff); err != nil {
			return 0, err
		}
		s.raw = raw
		if m.Scale != nil {
			s.scaleRaw = make([]byte, s.sLen)
			if err := p.Source.ReadTensorAt(m.Scale, s.scaleRaw, s.sOff); err != nil {
				return 0, err
			}
		}
		vals = grow(vals, (s.r1-s.r0)*m.Cols)
		if err := decodeSource(nil, vals, m, s); err != nil {
			return 0, err
		}
		b := absMaxBits(vals)
		if b >= 0x7f800000 { // NaN or ±Inf: the error names the first
			for i, v := range vals {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					e := firstElement(m, s) + int64(i)
					return 0, fmt.Errorf("tensor %q: element %d (row %d, column %d) is %v: %w",
						m.Weight.Name, e, e/int64(m.Cols), e%int64(m.Cols), v, quantize.ErrNonFinite)
				}
			}
		}
		amax = max(amax, math.Float32frombits(b))
	}
	return amax, nil
}

// absMaxBits returns the bit pattern of the largest |v| of vals: for non-negative floats the
// order of the bit patterns is the order of the values (NaN and ±Inf at 0x7f800000 and above).
func absMaxBits(vals []float32) uint32 {
	var m0, m1, m2, m3 uint32
	i := 0
	for ; i+4 <= len(vals); i += 4 {
		m0 = max(m0, math.Float32bits(vals[i])&0x7fffffff)
		m1 = max(m1, math.Float32bits(vals[i+1])&0x7fffffff)
		m2 = max(m2, math.Float32bits(vals[i+2])&0x7fffffff)
		m3 = max(m3, math.Float32bits(vals[i+3])&0x7fffffff)
	}
	for ; i < len(vals); i++ {
		m0 = max(m0, math.Float32bits(vals[i])&0x7fffffff)
	}
	return max(m0, m1, m2, m3)
}
