//go:build cuda

// Command gpucheck checks and measures the CUDA backend on a GPU machine: it runs the parity
// suites (kernels, fused pass, GPTQ) against the CPU backend on fresh random data on every
// visible GPU, measures the device-to-device copy bandwidth with cuMemcpyDtoD, times every
// kernel on device-resident arrays (CUDA events, warm-up, median of many runs) beside that
// bandwidth, the fused pass end to end, and GPTQ of a 2048×6144 expert on the CPU and the device.
// It exits with status 1 when any parity case fails. scripts/gpu-check.sh runs it, then times
// a whole conversion on the GPU against the CPU.
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"text/tabwriter"
	"time"

	"gorgonia.org/cu"

	"pdq/kernels/cuda"
	"pdq/kernels/cuda/host"
	"pdq/kernels/cuda/parity"
)

func main() {
	var (
		benchGiB = flag.Float64("bench-gib", 4, "GiB of float32 weights per kernel timing (keep it far above the L2 cache)")
		runs     = flag.Int("runs", 21, "timed runs per kernel (the median is reported)")
		seed     = flag.Uint64("seed", uint64(time.Now().UnixNano()), "random seed of the parity data")
		only     = flag.String("run", "", "run only the parity cases matching this regular expression")
		noBench  = flag.Bool("parity-only", false, "skip the timings")
	)
	flag.Parse()
	if err := run(os.Stdout, *benchGiB, *runs, *seed, *only, *noBench); err != nil {
		fmt.Fprintln(os.Stderr, "gpucheck:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, benchGiB float64, runs int, seed uint64, only string, noBench bool) error {
	all, err := cuda.Open(nil)
	if err != nil {
		return err
	}
	defer all.Close()
	fmt.Fprintf(w, "devices: %s (driver API %d)\n", all.DeviceName(), cu.Version())
	match, err := regexp.Compile(only)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	if err := parityRun(w, all, seed, match); err != nil {
		return err
	}
	if noBench {
		return nil
	}
	b, err := cuda.New(0)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := bench(w, b, int64(benchGiB*(1<<30)/4), runs, seed); err != nil {
		return err
	}
	if err := fusedBench(w, all, benchGiB, seed); err != nil {
		return err
	}
	return gptqBench(w, all, 2048, 6144, seed)
}

// parityRun runs the suite and reports every failure; it fails when one case did.
func parityRun(w io.Writer, b *cuda.Multi, seed uint64, match *regexp.Regexp) error {
	fmt.Fprintf(w, "parity: seed %d (-seed %d repeats it)\n", seed, seed)
	start := time.Now()
	failed, ran := 0, 0
	for i, c := range append(parity.ParityCases(), host.FusedCases()...) {
		if !match.MatchString(c.Name) {
			continue
		}
		ran++
		if err := c.Run(b, rand.New(rand.NewPCG(seed, uint64(i)))); err != nil {
			failed++
			fmt.Fprintf(w, "  FAIL %s: %v\n", c.Name, err)
		}
	}
	fmt.Fprintf(w, "parity: %d cases, %d failed (%.1fs), calls per device %v\n", ran, failed, time.Since(start).Seconds(), b.Served())
	if failed > 0 {
		return fmt.Errorf("%d of %d parity cases failed", failed, ran)
	}
	return nil
}

// bench prints the copy bandwidth and the kernel table.
func bench(w io.Writer, b *cuda.Backend, n int64, runs int, seed uint64) error {
	bw, err := b.CopyBandwidth(4*n, runs)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\ndevice copy (cuMemcpyDtoD, %.1f GiB): %.0f GB/s read+written\n\n", float64(4*n)/(1<<30), bw/1e9)
	ts, err := b.TimeKernels(n, runs, seed)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kernel\tsource GiB\tmedian ms\tsource GB/s\tmoved GB/s\tmoved / copy\tsource / copy\t")
	for _, t := range ts {
		sec := t.Median.Seconds()
		src, moved := float64(t.SrcBytes)/sec, float64(t.Moved)/sec
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.0f\t%.0f\t%.0f%%\t%.0f%%\t\n", t.Name, float64(t.SrcBytes)/(1<<30),
			sec*1e3, src/1e9, moved/1e9, 100*moved/bw, 100*src/bw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nmoved = bytes read plus written, comparable with the copy figure; targets: int4 rtn g32 >= 50%, int4 mse g32 >= 25%")
	return nil
}
