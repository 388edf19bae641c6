package convert

import (
	"fmt"
	"math"
	"sync"

	"pdq/calib"
)

// Calibration methods (Options.CalibMethod).
const (
	CalibWeighted = "weighted" // scale search weighted by E[x²]
	CalibGPTQ     = "gptq"     // GPTQ with static groups where the file has a Hessian
	CalibNone     = "none"     // recorded per module: no usable statistics, unweighted search
)

// noHessianNote marks modules that use the weighted search under gptq for lack of a Hessian.
const noHessianNote = "no Hessian: weighted search"

// ModuleCalib says how one INT4 module uses the calibration statistics.
type ModuleCalib struct {
	Method string       // CalibWeighted, CalibGPTQ or CalibNone
	Entry  *calib.Entry // the statistics used (nil with CalibNone)
	Shared bool         // the entry is the sibling projection's (gate and up share their input)
	Tokens int64        // tokens the module saw; -1 when the file does not say
	Note   string       // why CalibNone, or why gptq became weighted
}

func (o *Options) calibDefaults() error {
	if o.Calib == nil {
		if o.CalibMethod != "" || o.CalibActOrder || o.CalibDamp != 0 {
			return fmt.Errorf("%w: calibration method options need a statistics file", ErrBadOptions)
		}
		return nil
	}
	if o.CalibMethod == "" {
		o.CalibMethod = CalibWeighted
	}
	switch {
	case o.CalibMethod != CalibWeighted && o.CalibMethod != CalibGPTQ:
		return fmt.Errorf("%w: calibration method %q (want weighted or gptq)", ErrBadOptions, o.CalibMethod)
	case o.Method != "mse":
		return fmt.Errorf("%w: calibration statistics need the mse method, not %q", ErrBadOptions, o.Method)
	case o.CalibDamp < 0 || math.IsNaN(o.CalibDamp) || math.IsInf(o.CalibDamp, 0):
		return fmt.Errorf("%w: calibration dampening %v", ErrBadOptions, o.CalibDamp)
	case o.CalibActOrder && o.CalibMethod != CalibGPTQ:
		return fmt.Errorf("%w: act-order needs the gptq calibration method", ErrBadOptions)
	}
	return nil
}

// planCalib looks up the statistics of every INT4 module. A shape mismatch is refused; a module
// without an entry, or whose entry saw no tokens, is quantized without weights and counted.
func (p *Plan) planCalib() error {
	st := p.Options.Calib
	if st == nil {
		return nil
	}
	for _, m := range p.Modules {
		if m.Scheme(KindDecode) != SchemeInt4 {
			continue
		}
		mc := &ModuleCalib{Method: CalibNone, Tokens: -1}
		m.Calib = mc
		e := st.Lookup(m.Name)
		if e == nil {
			mc.Note = "no statistics"
			continue
		}
		if err := e.CheckShape(m.Name, m.Cols); err != nil {
			return fmt.Errorf("convert: %s: %s: %w", m.describe(), st.Path, err)
		}
		mc.Entry, mc.Shared = e, e.Module != m.Name
		n, err := st.EntryTokens(e)
		if err != nil {
			return fmt.Errorf("convert: %s: %w", m.describe(), err)
		}
		mc.Tokens = n
		if n < 0 {
			d, err := st.SqMean(e)
			if err != nil {
				return fmt.Errorf("convert: %s: %w", m.describe(), err)
			}
			if calib.Unobserved(d) {
				n = 0
			}
		}
		if n == 0 {
			mc.Entry, mc.Note = nil, "saw no tokens"
			continue
		}
		mc.Method = CalibWeighted
		if p.Options.CalibMethod == CalibGPTQ {
			if e.Hessian != nil {
				mc.Method = CalibGPTQ
			} else {
				mc.Note = noHessianNote
			}
		}
	}
	return nil
}

// gptqOptions returns the GPTQ options of the plan.
func (o *Options) gptqOptions() calib.GPTQOptions {
	return calib.GPTQOptions{Damp: o.CalibDamp, ActOrder: o.CalibActOrder}
}

// gptqWorkBytes estimates the memory GPTQ needs beyond the slab for a module of k inputs, from
// the allocations of calib.Stats.Hessian and calib.Factorize: the Hessian widened to float64
// (8·k², read a row at a time) and the float32 matrix factorized in place into the factor
// (4·k²), plus 4·k² of margin (a factor kept for the sibling that shares the input); the column
// blocks of the updates are O(k·block).
func gptqWorkBytes(m *Module) int64 {
	if m.Calib == nil || m.Calib.Method != CalibGPTQ {
		return 0
	}
	k := int64(m.Cols)
	return (4 + 8 + 4) * k * k
}

// factorCache shares GPTQ factors between the modules of one statistics entry.
type factorCache struct {
	mu   sync.Mutex
	uses map[*calib.Entry]int
	m    map[*calib.Entry]*cachedFactor
}

type cachedFactor struct {
	once sync.Once
	f    *calib.Factor
	err  error
}

// plan counts a module that will run GPTQ on its entry.
func (c *factorCache) plan(m *Module) {
	if m.Calib == nil || m.Calib.Method != CalibGPTQ {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.uses == nil {
		c.uses, c.m = map[*calib.Entry]int{}, map[*calib.Entry]*cachedFactor{}
	}
	c.uses[m.Calib.Entry]++
}

// get returns the entry's factor, computing it with mk on first use.
func (c *factorCache) get(e *calib.Entry, mk func() (*calib.Factor, error)) (*calib.Factor, error) {
	c.mu.Lock()
	cf := c.m[e]
	if cf == nil {
		cf = &cachedFactor{}
		c.m[e] = cf
	}
	c.mu.Unlock()
	cf.once.Do(func() { cf.f, cf.err = mk() })
	return cf.f, cf.err
}

// done records that one module finished with the entry; the last one drops the factor.
func (c *factorCache) done(e *calib.Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.uses[e]--; c.uses[e] <= 0 {
		delete(c.m, e)
		delete(c.uses, e)
	}
}
