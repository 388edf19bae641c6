package safetensors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// IndexFileName is the index of a sharded checkpoint: it maps every tensor to its shard file.
const IndexFileName = "model.safetensors.index.json"

// ShardPlan is one file of a sharded checkpoint to be written: its name, tensors and layout.
type ShardPlan struct {
	FileName string
	Specs    []TensorSpec
	Layout   *Layout
}

// PlanShards splits specs, kept in order, into shards of at most maxShardBytes of tensor data:
// greedily, a tensor starts a new shard when it would take the current one over the cap, and a
// tensor bigger than the cap gets a shard of its own. Files are named
// model-00001-of-00042.safetensors, also when there is only one. Each layout gets the metadata (see
// ComputeLayout). Tensor names must be unique across all shards.
func PlanShards(specs []TensorSpec, maxShardBytes int64, metadata map[string]string) ([]ShardPlan, error) {
	if maxShardBytes <= 0 {
		return nil, fmt.Errorf("safetensors: plan shards: maximum shard size %d is not positive", maxShardBytes)
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("safetensors: plan shards: %w", ErrNoTensors)
	}
	var groups [][]TensorSpec
	seen := make(map[string]struct{}, len(specs))
	var cur int64 // data bytes in the last group
	for _, s := range specs {
		size, err := specBytes(s)
		if err != nil {
			return nil, err
		}
		if _, dup := seen[s.Name]; dup {
			return nil, fmt.Errorf("safetensors: tensor %q: %w: listed twice", s.Name, ErrDuplicateTensor)
		}
		seen[s.Name] = struct{}{}
		if len(groups) == 0 || (len(groups[len(groups)-1]) > 0 && size > maxShardBytes-cur) {
			groups = append(groups, nil)
			cur = 0
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], s)
		cur += size
	}
	plans := make([]ShardPlan, len(groups))
	for i, g := range groups {
		l, err := ComputeLayout(g, metadata)
		if err != nil {
			return nil, err
		}
		plans[i] = ShardPlan{FileName: ShardName(i+1, len(groups)), Specs: g, Layout: l}
	}
	return plans, nil
}

// ShardName returns the conventional file name of shard i (1-based) of n:
// model-00001-of-00042.safetensors.
func ShardName(i, n int) string { return fmt.Sprintf("model-%05d-of-%05d.safetensors", i, n) }

// WriteIndex writes IndexFileName into dir for the planned shards:
// {"metadata": {"total_size": N, ...extra}, "weight_map": {tensor: file, ...}} with keys sorted,
// 2-space indentation and a final newline, through a temporary file and a rename. total_size, the
// sum of the tensor byte sizes, replaces any "total_size" in extra.
func WriteIndex(dir string, plans []ShardPlan, extra map[string]any) error {
	md := make(map[string]any, len(extra)+1)
	for k, v := range extra {
		md[k] = v
	}
	weights := map[string]string{}
	var total int64
	for _, p := range plans {
		if err := checkShardName(p.FileName); err != nil {
			return fmt.Errorf("safetensors: write index: shard %q: %w", p.FileName, err)
		}
		for _, s := range p.Specs {
			size, err := specBytes(s)
			if err != nil {
				return fmt.Errorf("safetensors: write index: %w", err)
			}
			if prev, dup := weights[s.Name]; dup {
				return fmt.Errorf("safetensors: write index: tensor %q: %w: in %s and %s", s.Name, ErrDuplicateTensor, prev, p.FileName)
			}
			weights[s.Name] = p.FileName
			total += size
		}
	}
	md["total_size"] = total
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{"metadata": md, "weight_map": weights}); err != nil {
		return fmt.Errorf("safetensors: write index: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, IndexFileName), buf.Bytes()); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// checkShardName refuses anything but a plain file name in the checkpoint directory.
func checkShardName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") ||
		filepath.IsAbs(name) || filepath.VolumeName(name) != "" {
		return ErrHostilePath
	}
	return nil
}
