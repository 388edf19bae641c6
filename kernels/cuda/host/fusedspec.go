//go:build cuda || cudaemu

package host

import (
	"errors"
	"fmt"

	"pdq/internal/floatcodec"
	"pdq/kernels"
)

// ErrFusedSource reports a source the fused pass does not take (its dtype or its shapes).
var ErrFusedSource = errors.New("cuda: fused pass: unsupported source")

// FusedSource is one slab of a weight as it is stored in the checkpoint.
type FusedSource struct {
	Raw        []byte        // Rows×Cols elements of DType, little-endian, row-major
	DType      kernels.DType // BF16, F16 or F8E4M3
	Scale      []float32     // F8_E4M3: ceil(Rows/BH)×ceil(Cols/BW) multipliers, row-major
	BH, BW     int           // F8_E4M3: the scale's block: 128×128, 1×Cols (channel), Rows×Cols (tensor)
	Rows, Cols int
	// Weights, when set, holds one column weight per column (calibration E[x²]) and the INT4
	// quantization is the weighted search (kernels.CPU.QuantizeInt4Weighted).
	Weights []float32
}

// FusedOut receives the results of the fused pass over one slab: the INT4 and the FP8 block
// quantization of the decoded source, and the error sums of each against the decoded source.
type FusedOut struct {
	Int4      kernels.Int4Out // Packed Rows·Cols/2, Scales 2·Rows·Cols/g bytes (BF16), Stats Rows·Cols/g
	Int4Sums  kernels.ErrSums // decoded source against the INT4 dequantization
	FP8Codes  []byte          // Rows·Cols e4m3fn codes
	FP8Scales []float32       // ceil(Rows/128)·ceil(Cols/128) multipliers
	FP8Sums   kernels.ErrSums // decoded source against the FP8 dequantization
}

// check reports a source or output of the wrong shape, before any work.
func (s *FusedSource) check(out *FusedOut, p *kernels.Int4Params) error {
	n := s.Rows * s.Cols
	g := p.GroupSize
	if s.Rows <= 0 || s.Cols <= 0 || g <= 0 || g%8 != 0 || s.Cols%g != 0 {
		return fmt.Errorf("%w: %d×%d in groups of %d", ErrFusedSource, s.Rows, s.Cols, g)
	}
	switch s.DType {
	case kernels.BF16, kernels.F16:
		if len(s.Raw) != 2*n {
			return fmt.Errorf("%w: %d bytes of %s for %d×%d", ErrFusedSource, len(s.Raw), s.DType, s.Rows, s.Cols)
		}
	case kernels.F8E4M3:
		if len(s.Raw) != n || s.BH <= 0 || s.BW <= 0 || len(s.Scale) != ceilDiv(s.Rows, s.BH)*ceilDiv(s.Cols, s.BW) {
			return fmt.Errorf("%w: FP8 %d×%d with %d scales of %d×%d blocks", ErrFusedSource, s.Rows, s.Cols, len(s.Scale), s.BH, s.BW)
		}
	default:
		return fmt.Errorf("%w: dtype %s", ErrFusedSource, s.DType)
	}
	if s.Weights != nil && len(s.Weights) != s.Cols {
		return fmt.Errorf("%w: %d column weights for %d columns", ErrFusedSource, len(s.Weights), s.Cols)
	}
	if len(out.Int4.Packed) != n/2 || len(out.Int4.Scales) != 2*(n/g) || len(out.Int4.Stats) != n/g ||
		len(out.FP8Codes) != n || len(out.FP8Scales) != ceilDiv(s.Rows, fp8B)*ceilDiv(s.Cols, fp8B) {
		return fmt.Errorf("%w: output slices of the wrong length", kernels.ErrShape)
	}
	return nil
}

// decode returns the source's float32 values as the CPU decodes them (kernels.DecodeDense, as
// quantize.DecodeDense; FP8 as quantize.DecodeFP8Channel and DecodeFP8BlockOn).
func (s *FusedSource) decode(dst []float32) error {
	if s.DType == kernels.F8E4M3 {
		return kernels.CPU{}.DequantizeFP8Block(dst, s.Raw, s.Scale, s.Rows, s.Cols, s.BH, s.BW)
	}
	return kernels.DecodeDense(dst, s.Raw, s.DType)
}

// FusedCPU is the specification of the fused pass, on the CPU: decode the source, quantize it
// to INT4 with p and dequantize (BF16 scales widened exactly), quantize it to FP8 blocks and
// dequantize, and sum the errors of both against the decoded values (kernels.CPU.ErrorSums,
// elements reported as base+i). A non-finite source element is reported as the INT4
// quantization reports it.
func FusedCPU(out *FusedOut, s FusedSource, p *kernels.Int4Params, base int64) error {
	if err := s.check(out, p); err != nil {
		return err
	}
	cpu := kernels.CPU{}
	n := s.Rows * s.Cols
	vals := make([]float32, n)
	if err := s.decode(vals); err != nil {
		return err
	}
	if s.Weights != nil {
		if err := cpu.QuantizeInt4Weighted(out.Int4, vals, s.Rows, s.Cols, p, s.Weights); err != nil {
			return err
		}
	} else if err := cpu.QuantizeInt4(out.Int4, vals, s.Rows, s.Cols, p); err != nil {
		return err
	}
	deq := make([]float32, n)
	scales := make([]float32, len(out.Int4.Stats))
	for i := range scales {
		scales[i] = floatcodec.BF16ToFloat32(uint16(out.Int4.Scales[2*i]) | uint16(out.Int4.Scales[2*i+1])<<8)
	}
	if err := cpu.DequantizeInt4(deq, out.Int4.Packed, scales, s.Rows, s.Cols, p.GroupSize); err != nil {
		return err
	}
	out.Int4Sums = cpu.ErrorSums(vals, deq, base)
	if err := cpu.QuantizeFP8Block(out.FP8Codes, out.FP8Scales, vals, s.Rows, s.Cols); err != nil {
		return err
	}
	if err := cpu.DequantizeFP8Block(deq, out.FP8Codes, out.FP8Scales, s.Rows, s.Cols, fp8B, fp8B); err != nil {
		return err
	}
	out.FP8Sums = cpu.ErrorSums(vals, deq, base)
	return nil
}

// value returns source element idx decoded, for a non-finite report.
func (s *FusedSource) value(idx int64) float32 {
	var v [1]float32
	if s.DType == kernels.F8E4M3 {
		r, c := int(idx)/s.Cols, int(idx)%s.Cols
		sc := s.Scale[r/s.BH*ceilDiv(s.Cols, s.BW)+c/s.BW]
		_ = kernels.CPU{}.DequantizeFP8Block(v[:], s.Raw[idx:idx+1], []float32{sc}, 1, 1, 1, 1)
		return v[0]
	}
	_ = kernels.DecodeDense(v[:], s.Raw[2*idx:2*idx+2], s.DType)
	return v[0]
}
