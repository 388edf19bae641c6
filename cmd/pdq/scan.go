package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"pdq/safetensors"
)

// scanResult is what inspect --scan found reading every tensor.
type scanResult struct {
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	NaN      int64   `json:"nan"`
	Inf      int64   `json:"inf"`
	FirstBad string  `json:"first_bad,omitempty"` // the first tensor holding a NaN or Inf
}

// scanChunk is the read size of the scan: memory stays flat whatever the tensor size.
const scanChunk = 4 << 20

// scanTensors streams every tensor once, in file order, counting non-finite float values.
func scanTensors(ctx context.Context, ck *safetensors.Checkpoint, ts []*safetensors.Tensor) (*scanResult, error) {
	res := &scanResult{}
	start := time.Now()
	buf := make([]byte, scanChunk)
	vals := make([]float32, scanChunk)
	for _, t := range ts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, err := ck.TensorReader(t)
		if err != nil {
			return nil, err
		}
		elem := t.DType.Bits() / 8
		decodable := t.DType.IsFloat() && elem > 0
		chunk := scanChunk
		if elem > 0 {
			chunk -= chunk % elem
		}
		var got int64
		for {
			n, err := io.ReadFull(r, buf[:chunk])
			got += int64(n)
			if decodable && n > 0 {
				v := vals[:n/elem]
				if derr := safetensors.DecodeFloat32(v, buf[:n-n%elem], t.DType); derr != nil {
					return nil, derr
				}
				for _, x := range v {
					switch {
					case x != x:
						res.NaN++
					case math.IsInf(float64(x), 0):
						res.Inf++
					default:
						continue
					}
					if res.FirstBad == "" {
						res.FirstBad = t.Name
					}
				}
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				if got != t.ByteSize() {
					return nil, fmt.Errorf("scan: %s: tensor %q: read %d of %d bytes (file truncated?)", t.Shard.Name, t.Name, got, t.ByteSize())
				}
				break
			}
			if err != nil {
				return nil, fmt.Errorf("scan: %s: tensor %q: %w", t.Shard.Name, t.Name, err)
			}
		}
		res.Bytes += got
	}
	res.Seconds = max(time.Since(start).Seconds(), 1e-9)
	return res, nil
}
