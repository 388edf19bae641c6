package safetensors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxHeaderSize is the largest header JSON length, in bytes, that ParseHeader accepts (the limit of
// the reference implementation).
const MaxHeaderSize = 100_000_000

// TensorInfo describes one tensor of a safetensors file: its name, element type, shape and byte
// range in the data buffer.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int64
	// DataOffsets is the [begin, end) byte range of the tensor, relative to the start of the data
	// buffer (not of the file).
	DataOffsets [2]int64
}

// NumElements returns the product of the dimensions (1 for a rank-0 tensor). It is only meaningful
// for a validated TensorInfo, whose element count is known to fit in an int64.
func (t *TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// ByteSize returns the length of the tensor's byte range, DataOffsets[1]-DataOffsets[0].
func (t *TensorInfo) ByteSize() int64 { return t.DataOffsets[1] - t.DataOffsets[0] }

// Header is the parsed and validated header of one safetensors file.
type Header struct {
	// Tensors sorted by data offset, which is their order in the file.
	Tensors []TensorInfo
	// Metadata is the __metadata__ map, nil when the header has none.
	Metadata map[string]string
	// JSONSize is N, the JSON length stored in the 8-byte prefix (padding included).
	JSONSize int64
	// DataStart is the file offset of the data buffer, 8 + N.
	DataStart int64
}

// ParseHeader reads and validates the header of a safetensors file of the given size through r. It
// reads the 8-byte prefix and the JSON only, never the data. Validation follows the reference
// implementation: the JSON must be a UTF-8 object of tensors and an optional __metadata__ map of
// strings; every dtype known; every shape's byte size equal to its byte range; and the tensors,
// sorted by offset, must tile the data buffer, which must be exactly size - DataStart bytes.
// Duplicate keys are refused. Errors wrap the sentinel errors of this package.
func ParseHeader(r io.ReaderAt, size int64) (*Header, error) {
	return parseHeader(r, size, "")
}

// parseHeader is ParseHeader with the file name to put in error messages ("" for none).
func parseHeader(r io.ReaderAt, size int64, file string) (*Header, error) {
	if size < 8 {
		return nil, headerErr(file, "", ErrHeaderTooSmall, fmt.Sprintf("%d bytes", size))
	}
	var prefix [8]byte
	if err := readFull(r, prefix[:], 0); err != nil {
		return nil, headerErr(file, "", err, "reading the header length")
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	if n > MaxHeaderSize {
		return nil, headerErr(file, "", notSafetensors(prefix[:], ErrHeaderTooLarge), fmt.Sprintf("%d bytes, limit %d", n, MaxHeaderSize))
	}
	if int64(n) > size-8 {
		return nil, headerErr(file, "", notSafetensors(prefix[:], ErrInvalidHeaderLength),
			fmt.Sprintf("header of %d bytes in a file of %d bytes", n, size))
	}
	js := make([]byte, n)
	if err := readFull(r, js, 8); err != nil {
		return nil, headerErr(file, "", err, "reading the header")
	}
	h, err := parseHeaderJSON(js, size-8-int64(n), file)
	if err != nil {
		return nil, err
	}
	h.JSONSize = int64(n)
	h.DataStart = 8 + int64(n)
	return h, nil
}

// readFull reads len(p) bytes at off; a short read is reported as io.ErrUnexpectedEOF.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// parseHeaderJSON decodes and validates the header JSON js of a file whose data buffer holds
// bufSize bytes. JSONSize and DataStart are left for the caller.
func parseHeaderJSON(js []byte, bufSize int64, file string) (*Header, error) {
	if !utf8.Valid(js) {
		return nil, headerErr(file, "", ErrInvalidHeader, "not valid UTF-8")
	}
	h, err := decodeHeader(js, file)
	if err != nil {
		return nil, err
	}
	// Sort by offsets, then name so that duplicated ranges are reported deterministically.
	slices.SortFunc(h.Tensors, func(a, b TensorInfo) int {
		if c := cmpInt64(a.DataOffsets[0], b.DataOffsets[0]); c != 0 {
			return c
		}
		if c := cmpInt64(a.DataOffsets[1], b.DataOffsets[1]); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	end, err := validateTiling(h.Tensors, file)
	if err != nil {
		return nil, err
	}
	if end != bufSize {
		return nil, headerErr(file, "", ErrIncompleteBuffer,
			fmt.Sprintf("tensors end at byte %d of a data buffer of %d bytes", end, bufSize))
	}
	return h, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// validateTiling checks tensors sorted by offset: each begins where the previous ended (the first
// at 0), and each byte range matches its dtype and shape. It returns the end of the last tensor.
func validateTiling(ts []TensorInfo, file string) (int64, error) {
	var start int64
	for i := range ts {
		t := &ts[i]
		b, e := t.DataOffsets[0], t.DataOffsets[1]
		if b != start || e < b {
			return 0, headerErr(file, t.Name, ErrInvalidOffset,
				fmt.Sprintf("data_offsets [%d, %d], expected to begin at %d", b, e, start))
		}
		start = e
		size, err := tensorBytes(t.DType, t.Shape)
		if err != nil {
			return 0, headerErr(file, t.Name, err, fmt.Sprintf("%s %v", t.DType, t.Shape))
		}
		if e-b != size {
			return 0, headerErr(file, t.Name, ErrTensorInvalidInfo,
				fmt.Sprintf("%s %v needs %d bytes, data_offsets [%d, %d] hold %d", t.DType, t.Shape, size, b, e, e-b))
		}
	}
	return start, nil
}

// tensorBytes returns the byte size of a tensor of dtype dt and the given shape, whose dimensions
// are known to be non-negative. The element count is folded left to right with overflow checks, as
// the reference implementation does.
func tensorBytes(dt DType, shape []int64) (int64, error) {
	width := uint64(dt.Bits())
	if width == 0 {
		return 0, fmt.Errorf("%w: %q", ErrUnknownDType, string(dt))
	}
	n := uint64(1)
	for _, d := range shape {
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, ErrOverflow
		}
		n = lo
	}
	hi, total := bits.Mul64(n, width)
	if hi != 0 {
		return 0, ErrOverflow
	}
	if total%8 != 0 {
		return 0, ErrMisaligned
	}
	return int64(total / 8), nil
}

// headerErr formats a header error: "safetensors: FILE: tensor "NAME": SENTINEL: detail".
func headerErr(file, tensor string, err error, detail string) error {
	var b strings.Builder
	b.WriteString("safetensors: ")
	if file != "" {
		b.WriteString(file)
		b.WriteString(": ")
	}
	if tensor != "" {
		fmt.Fprintf(&b, "tensor %q: ", tensor)
	}
	if detail == "" {
		return fmt.Errorf("%s%w", b.String(), err)
	}
	return fmt.Errorf("%s%w: %s", b.String(), err, detail)
}
