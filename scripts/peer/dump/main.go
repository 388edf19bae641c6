// Command dump writes the float32 values of the tensors that pdq convert quantizes to INT4 (the
// routed experts under the default --targets) into one raw file, so that another quantizer can
// be timed on exactly the same weights (scripts/peer-bench.sh).
//
//	go run ./scripts/peer/dump --out experts.f32 SRC
//	go run ./scripts/peer/dump --out experts.bf16 --bf16 SRC
//
// OUT receives every INT4 target's weight in source file order, row-major, little-endian float32,
// decoded the way convert decodes it (BF16, F16 and F32 exactly; FP8 with its block or channel
// scales); with --bf16 those values rounded to BF16 (nearest, ties to even: exact for a BF16
// source), the input a BF16 GGUF gives ggml's quantizer; OUT.idx receives one line per tensor, "rows cols name". Both are written under
// temporary names and renamed when complete. It prints the number of weights written and the
// number of elements of the whole source (every tensor but the FP8 scales), separated by a space.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"pdq/kernels"
	"pdq/quantize"
	"pdq/quantize/convert"
	"pdq/quantize/rules"
	"pdq/safetensors"
)

// errNoTargets is returned for a source in which no module is an INT4 target.
var errNoTargets = errors.New("no INT4 target in the source")

func main() {
	out := flag.String("out", "", "raw float32 output file (the index goes to OUT.idx)")
	targets := flag.String("targets", convert.DefaultTargets, "regex over module names: the INT4 targets, as pdq convert --targets")
	bf16 := flag.Bool("bf16", false, "write BF16 instead of float32")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: dump --out FILE [--bf16] [--targets REGEX] SRC")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	n, total, err := dump(ctx, flag.Arg(0), *out, *targets, *bf16)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dump:", err)
		os.Exit(1)
	}
	fmt.Println(n, total)
}

// dump writes the INT4 targets of src's conversion plan to out (as BF16 with bf16 set) and out.idx and returns the
// number of weights written and the number of elements of all modules (FP8 scales not counted).
func dump(ctx context.Context, src, out, targets string, bf16 bool) (n, total int64, err error) {
	ck, err := safetensors.Open(src)
	if err != nil {
		return 0, 0, err
	}
	defer ck.Close()
	mods, total, err := int4Targets(ck, targets)
	if err != nil {
		return 0, 0, err
	}
	err = writeAtomic(out, func(w io.Writer) error {
		for _, m := range mods {
			if err := ctx.Err(); err != nil {
				return err
			}
			v, err := values(ck, m)
			if err != nil {
				return err
			}
			if bf16 {
				b := make([]byte, 2*len(v))
				kernels.EncodeBF16(b, v)
				if _, err := w.Write(b); err != nil {
					return err
				}
			} else if err := binary.Write(w, binary.LittleEndian, v); err != nil {
				return err
			}
			n += int64(len(v))
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return n, total, writeAtomic(out+".idx", func(w io.Writer) error {
		for _, m := range mods {
			if _, err := fmt.Fprintf(w, "%d %d %s\n", m.Rows, m.Cols, m.Name); err != nil {
				return err
			}
		}
		return nil
	})
}

// int4Targets plans ck's decode conversion and returns the modules it quantizes to INT4, in
// source file order, and the number of elements of all modules' weights (or plain tensors).
func int4Targets(ck *safetensors.Checkpoint, targets string) ([]*convert.Module, int64, error) {
	cfg, err := rules.LoadConfig(ck.Dir)
	if err != nil {
		return nil, 0, err
	}
	p, err := convert.NewPlan(ck, cfg, convert.Options{Targets: targets, Only: convert.KindDecode})
	if err != nil {
		return nil, 0, err
	}
	var mods []*convert.Module
	var total int64
	for _, m := range p.Modules {
		total += m.Weight.NumElements()
		if m.Scheme(convert.KindDecode) == convert.SchemeInt4 {
			mods = append(mods, m)
		}
	}
	if len(mods) == 0 {
		return nil, 0, fmt.Errorf("%s: %w", ck.Opened, errNoTargets)
	}
	return mods, total, nil
}

// values reads module m's weight and decodes it to float32.
func values(ck *safetensors.Checkpoint, m *convert.Module) ([]float32, error) {
	raw, err := readTensor(ck, m.Weight)
	if err != nil {
		return nil, err
	}
	dst := make([]float32, m.Rows*m.Cols)
	if m.Scale == nil {
		err = quantize.DecodeDense(dst, raw, m.Weight.DType)
		return dst, wrap(m.Weight, err)
	}
	scaleRaw, err := readTensor(ck, m.Scale)
	if err != nil {
		return nil, err
	}
	scale := make([]float32, m.Scale.NumElements())
	if err := safetensors.DecodeFloat32(scale, scaleRaw, m.Scale.DType); err != nil {
		return nil, wrap(m.Scale, err)
	}
	if s := m.Scale.Shape; len(s) == 2 && !(s[0] == int64(m.Rows) && s[1] == 1) {
		err = quantize.DecodeFP8Block(dst, raw, scale, s, m.Rows, m.Cols)
	} else {
		err = quantize.DecodeFP8Channel(dst, raw, scale, m.Rows, m.Cols)
	}
	return dst, wrap(m.Weight, err)
}

// readTensor reads t's bytes whole.
func readTensor(ck *safetensors.Checkpoint, t *safetensors.Tensor) ([]byte, error) {
	b := make([]byte, t.ByteSize())
	return b, wrap(t, ck.ReadTensor(t, b))
}

// wrap names tensor t in a non-nil error.
func wrap(t *safetensors.Tensor, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("tensor %q: %w", t.Name, err)
}

// writeAtomic writes name through a buffered writer into a temporary file that is renamed to
// name only when write and close succeed; on failure the temporary file is removed.
func writeAtomic(name string, write func(io.Writer) error) (err error) {
	tmp := name + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
