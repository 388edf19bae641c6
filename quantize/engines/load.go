package engines

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"pdq/quantize/rules"
	"pdq/safetensors"
)

// ErrNoConfig: the directory has no config.json; the engines need one to build the model.
var ErrNoConfig = errors.New("no config.json")

// Load reads a checkpoint directory's config.json and tensor headers (never tensor data).
func Load(dir string) (Input, error) {
	cfg, err := rules.LoadConfig(dir)
	if err != nil {
		return Input{}, fmt.Errorf("engines: %w", err)
	}
	if cfg == nil {
		return Input{}, fmt.Errorf("engines: %s: %w", dir, ErrNoConfig)
	}
	ck, err := safetensors.Open(dir)
	if err != nil {
		return Input{}, fmt.Errorf("engines: %w", err)
	}
	defer ck.Close()
	in := FromCheckpoint(ck, cfg)
	if in.GlobalScales, err = readGlobalScales(ck); err != nil {
		return Input{}, fmt.Errorf("engines: %w", err)
	}
	return in, nil
}

// readGlobalScales reads every one-element F32 weight_global_scale tensor (FP4 global scales): four bytes
// each, a few thousand reads for a whole model. nil when there is none.
func readGlobalScales(ck *safetensors.Checkpoint) (map[string]float32, error) {
	var out map[string]float32
	var b [4]byte
	for _, t := range ck.Tensors() {
		if !strings.HasSuffix(t.Name, ".weight_global_scale") || t.DType != safetensors.F32 || t.ByteSize() != 4 {
			continue
		}
		if err := ck.ReadTensor(t, b[:]); err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string]float32{}
		}
		out[t.Name] = math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
	}
	return out, nil
}

// FromCheckpoint is the Input of an open checkpoint with its config.
func FromCheckpoint(ck *safetensors.Checkpoint, cfg map[string]any) Input {
	in := Input{Config: cfg}
	for _, t := range ck.Tensors() {
		in.Tensors = append(in.Tensors, Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	return in
}
