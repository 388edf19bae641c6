package engines

import (
	"errors"
	"fmt"

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
	return FromCheckpoint(ck, cfg), nil
}

// FromCheckpoint is the Input of an open checkpoint with its config.
func FromCheckpoint(ck *safetensors.Checkpoint, cfg map[string]any) Input {
	in := Input{Config: cfg}
	for _, t := range ck.Tensors() {
		in.Tensors = append(in.Tensors, Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape})
	}
	return in
}
