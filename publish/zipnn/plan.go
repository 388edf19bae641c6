package zipnn

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// maxHeader is the largest safetensors header the reference reader accepts.
const maxHeader = 100_000_000

// KindOf returns how to code the bytes of a tensor of a safetensors dtype: BF16 values get the
// exponent split; everything else (FP8, INT4 packed in I32, integers, F16, F32) is coded as bytes.
func KindOf(dtype string) Kind {
	if dtype == "BF16" {
		return KindBF16
	}
	return KindBytes
}

// PlanSafetensors reads the header of the safetensors file of size bytes in r (an 8-byte
// little-endian length, then that many bytes of JSON) and returns a plan that codes each tensor
// by its dtype, the header and any gaps as bytes. It returns an error wrapping ErrNotSafetensors
// when the header does not describe the file; such a file can still be coded with PlanBytes.
func PlanSafetensors(r io.ReaderAt, size int64) ([]Segment, error) {
	var lb [8]byte
	if size < 8 {
		return nil, fmt.Errorf("%w: %d bytes", ErrNotSafetensors, size)
	}
	if _, err := r.ReadAt(lb[:], 0); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotSafetensors, err)
	}
	n := binary.LittleEndian.Uint64(lb[:])
	if n > maxHeader || int64(n) > size-8 {
		return nil, fmt.Errorf("%w: header length %d in a %d-byte file", ErrNotSafetensors, n, size)
	}
	hb := make([]byte, n)
	if _, err := r.ReadAt(hb, 8); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotSafetensors, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hb, &raw); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrNotSafetensors, err)
	}
	type tensor struct {
		Dtype   string   `json:"dtype"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	base := 8 + int64(n)
	var ts []tensor
	for name, msg := range raw {
		if name == "__metadata__" {
			continue
		}
		var t tensor
		if err := json.Unmarshal(msg, &t); err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %v", ErrNotSafetensors, name, err)
		}
		if t.Offsets[0] < 0 || t.Offsets[1] < t.Offsets[0] || t.Offsets[1] > size-base {
			return nil, fmt.Errorf("%w: tensor %q: data_offsets %v outside the %d data bytes", ErrNotSafetensors, name, t.Offsets, size-base)
		}
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Offsets[0] < ts[j].Offsets[0] })
	var plan []Segment
	add := func(off, n int64, k Kind) {
		if n == 0 {
			return
		}
		if l := len(plan); l > 0 && plan[l-1].Kind == k && plan[l-1].Off+plan[l-1].Len == off &&
			(k != KindBF16 || plan[l-1].Len%2 == 0) {
			plan[l-1].Len += n
			return
		}
		plan = append(plan, Segment{Off: off, Len: n, Kind: k})
	}
	add(0, base, KindBytes)
	pos := base
	for _, t := range ts {
		b, e := base+t.Offsets[0], base+t.Offsets[1]
		if b < pos {
			return nil, fmt.Errorf("%w: tensors overlap at byte %d", ErrNotSafetensors, b)
		}
		add(pos, b-pos, KindBytes)
		k := KindOf(t.Dtype)
		if (e-b)%2 != 0 {
			k = KindBytes
		}
		add(b, e-b, k)
		pos = e
	}
	add(pos, size-pos, KindBytes)
	return plan, nil
}
