//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"pdq/kernels"
	"pdq/kernels/cuda/host"
)

// Timing is the median time of one kernel over device-resident data.
type Timing struct {
	Name     string
	SrcBytes int64 // bytes of the kernel's source (input) array
	Moved    int64 // bytes read plus written by the kernel
	Median   time.Duration
}

// timer runs a launch warm-up times, then runs times, each between two events, and returns
// the median.
func timer(s cu.Stream, warmup, runs int, f func() error) (time.Duration, error) {
	start, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, err
	}
	defer cu.DestroyEvent(&start)
	stop, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, err
	}
	defer cu.DestroyEvent(&stop)
	for range warmup {
		if err := f(); err != nil {
			return 0, err
		}
	}
	if err := s.Synchronize(); err != nil {
		return 0, err
	}
	ts := make([]time.Duration, 0, runs)
	for range runs {
		if err := start.Record(s); err != nil {
			return 0, err
		}
		if err := f(); err != nil {
			return 0, err
		}
		if err := stop.Record(s); err != nil {
			return 0, err
		}
		if err := stop.Synchronize(); err != nil {
			return 0, err
		}
		ms, err := start.Elapsed(stop)
		if err != nil {
			return 0, err
		}
		ts = append(ts, time.Duration(ms*float64(time.Millisecond)))
	}
	slices.Sort(ts)
	return ts[len(ts)/2], nil
}

// CopyBandwidth times cuMemcpyDtoD of n bytes (median of runs) and returns bytes read plus
// written per second.
func (b *Backend) CopyBandwidth(n int64, runs int) (float64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.Current(); err != nil {
		return 0, err
	}
	src, err := cu.MemAlloc(n)
	if err != nil {
		return 0, fmt.Errorf("cuda: allocate %d bytes: %w", n, err)
	}
	defer cu.MemFree(src)
	dst, err := cu.MemAlloc(n)
	if err != nil {
		return 0, fmt.Errorf("cuda: allocate %d bytes: %w", n, err)
	}
	defer cu.MemFree(dst)
	if err := cu.MemsetD8(src, 0x3c, n); err != nil {
		return 0, err
	}
	s := b.all[0].streams[0]
	t, err := timer(s, 3, runs, func() error { return cu.MemcpyDtoDAsync(dst, src, n, s) })
	if err != nil {
		return 0, fmt.Errorf("cuda: time the device copy: %w", err)
	}
	return float64(2*n) / t.Seconds(), nil
}

// TimeKernels times every kernel on n weights resident on the device (normal random values,
// so the search does its usual work), median of runs after a warm-up. n should make the
// arrays much larger than the L2 cache; it is rounded down to a multiple of 8192.
func (b *Backend) TimeKernels(n int64, runs int, seed uint64) ([]Timing, error) {
	n = n / 8192 * 8192
	cols := int64(8192)
	rows := n / cols
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := b.Current(); err != nil {
		return nil, err
	}
	var bufs []cu.DevicePtr
	defer func() {
		for _, p := range bufs {
			_ = cu.MemFree(p)
		}
	}()
	alloc := func(bytes int64) (cu.DevicePtr, error) {
		p, err := cu.MemAlloc(bytes)
		if err != nil {
			return 0, fmt.Errorf("cuda: allocate %d bytes: %w", bytes, err)
		}
		bufs = append(bufs, p)
		return p, nil
	}
	src, err := alloc(4 * n)
	if err != nil {
		return nil, err
	}
	// Fill the source from the host in 64 MiB pieces of normal values (about 0.02 wide).
	rng := rand.New(rand.NewPCG(seed, 7))
	piece := make([]float32, 16<<20)
	for off := int64(0); off < n; off += int64(len(piece)) {
		m := min(int64(len(piece)), n-off)
		for i := range piece[:m] {
			piece[i] = float32(rng.NormFloat64() * 0.02)
		}
		if err := cu.MemcpyHtoD(src+cu.DevicePtr(4*off), unsafe.Pointer(&piece[0]), 4*m); err != nil {
			return nil, err
		}
	}
	out, err := alloc(4 * n) // large enough for any kernel's output
	if err != nil {
		return nil, err
	}
	aux, err := alloc(n) // stats, scales, per-chunk sums
	if err != nil {
		return nil, err
	}
	cand, err := alloc(4096)
	if err != nil {
		return nil, err
	}
	s := b.all[0].streams[0]
	st := stream{b, s}
	var res []Timing
	add := func(name string, srcBytes, moved int64, f func() error) error {
		t, err := timer(s, 3, runs, f)
		if err != nil {
			return fmt.Errorf("cuda: time %s: %w", name, err)
		}
		res = append(res, Timing{Name: name, SrcBytes: srcBytes, Moved: moved, Median: t})
		return nil
	}
	const threads = 256
	if err := add("decode bf16", 2*n, 6*n, func() error {
		return st.Launch(host.DecodeBF16, b.Grid(int(n), threads), 1, threads, uint64(out), uint64(src), uint64(n))
	}); err != nil {
		return nil, err
	}
	// FP8 source decode: codes (the first n bytes of src) and a 128×128 block scale grid.
	sc := (rows + 127) / 128 * (cols / 128)
	if err := add("decode fp8 128x128", n+4*sc, 5*n, func() error {
		return st.Launch(host.DequantFP8, int(cols/threads), int(min(rows, 65535)), threads,
			uint64(out), uint64(src), uint64(aux), uint64(b.e4m3), uint64(rows), uint64(cols), 128, 128, 0)
	}); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name   string
		g      int
		search kernels.Search
	}{
		{"int4 rtn g32", 32, kernels.SearchRTN}, {"int4 rtn g128", 128, kernels.SearchRTN},
		{"int4 mse g32", 32, kernels.SearchMSE}, {"int4 mse g64", 64, kernels.SearchMSE},
		{"int4 mse g128", 128, kernels.SearchMSE},
	} {
		p, err := kernels.NewInt4Params(c.g, c.search, false)
		if err != nil {
			return nil, err
		}
		cs := append(append([]float32{0}, p.Pos...), p.Neg...)
		if err := cu.MemcpyHtoD(cand, unsafe.Pointer(&cs[0]), int64(4*len(cs))); err != nil {
			return nil, err
		}
		mode, kern := host.Int4Mode(&p), host.Int4Kernel(c.g)
		groups := n / int64(c.g)
		moved := 4*n + n/2 + groups*(2+int64(host.StatsSize))
		if err := add(c.name, 4*n, moved, func() error {
			return st.Launch(kern, b.Grid(int(groups), 128), 1, 128, uint64(out), uint64(aux),
				uint64(aux)+uint64(2*groups), uint64(cand), uint64(src), host.Int4Shape(int(groups), c.g),
				mode, uint64(cand)+4)
		}); err != nil {
			return nil, err
		}
	}
	// The weighted search (calibration): log-normal column weights.
	{
		p, err := kernels.NewInt4Params(32, kernels.SearchMSE, false)
		if err != nil {
			return nil, err
		}
		cs := append(append(append([]float32{0}, p.Pos...), p.Neg...), p.WPos...)
		if err := cu.MemcpyHtoD(cand, unsafe.Pointer(&cs[0]), int64(4*len(cs))); err != nil {
			return nil, err
		}
		d := make([]float32, cols)
		for j := range d {
			d[j] = float32(math.Exp(1.5 * rng.NormFloat64()))
		}
		dw, err := alloc(4 * cols)
		if err != nil {
			return nil, err
		}
		if err := cu.MemcpyHtoD(dw, unsafe.Pointer(&d[0]), 4*cols); err != nil {
			return nil, err
		}
		groups := n / 32
		moved := 4*n + n/2 + groups*(2+int64(host.StatsSize))
		if err := add("int4 weighted g32", 4*n, moved, func() error {
			return st.Launch(host.Int4Weighted, b.Grid(int(groups), 128), 1, 128, uint64(out), uint64(aux),
				uint64(aux)+uint64(2*groups), uint64(cand), uint64(src), host.Int4Shape(int(groups), 32),
				host.Int4Mode(&p), uint64(cand)+4, uint64(dw), host.Int4WMode(&p), uint64(cols/32))
		}); err != nil {
			return nil, err
		}
	}
	if err := add("fp8 block quantize", 4*n, 9*n, func() error {
		if err := st.Launch(host.FP8Absmax, int(cols/128), int((rows+127)/128), 256, uint64(aux), uint64(cand), uint64(src), uint64(rows), uint64(cols)); err != nil {
			return err
		}
		return st.Launch(host.FP8Quant, int(cols/threads), int(min(rows, 65535)), threads,
			uint64(out), uint64(aux), uint64(src), uint64(rows), uint64(cols))
	}); err != nil {
		return nil, err
	}
	if err := add("int4 dequantize g32", n/2+n/8, n/2+n/8+4*n, func() error {
		return st.Launch(host.DequantInt4, b.Grid(int(n/8), threads), 1, threads,
			uint64(out), uint64(src), uint64(src)+uint64(n/2), uint64(n/8), 4)
	}); err != nil {
		return nil, err
	}
	half := n / 2 // ref and got: the two halves of src
	k := (half + host.ErrChunk - 1) / host.ErrChunk
	if err := add("error partial sums", 4*n, 4*n+56*k, func() error {
		return st.Launch(host.ErrPartial, b.Grid(int(k), 128), 1, 128, uint64(aux), uint64(aux)+uint64(48*k),
			uint64(src), uint64(src)+uint64(4*half), uint64(half), host.ErrChunk)
	}); err != nil {
		return nil, err
	}
	return res, nil
}
