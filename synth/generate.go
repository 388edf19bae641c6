package synth

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"pdq/internal/floatcodec"
	"pdq/internal/par"
	"pdq/safetensors"
)

// Options says what to generate.
type Options struct {
	Model Model
	// DType of the dense tensors: BF16 (default), F16 or F32.
	DType safetensors.DType
	// FP8 stores every Linear weight as F8_E4M3 with F32 weight_scale_inv in 128x128 blocks, the
	// layout of DeepSeek-V3, Kimi K2 and GLM-5-FP8.
	FP8 bool
	// Seed makes different but reproducible checkpoints.
	Seed uint64
	// MaxShardBytes caps the size of one shard (default 64 MiB).
	MaxShardBytes int64
	// HeaderOnly writes real headers and sparse files without data: a full-size layout for planning
	// tests that costs no disk.
	HeaderOnly bool
	// Workers generating tensors in parallel; <= 0 means GOMAXPROCS.
	Workers int
	// ExpertFormat, when set, stores the routed experts already quantized (one of
	// ExpertFormats, in compressed-tensors' layouts: packed.go) and the rest dense, as Kimi
	// K2.6 ships; ExpertGroup is the INT4 group size (default 32).
	ExpertFormat string
	ExpertGroup  int
}

// Specs returns the safetensors tensor list the options produce, in checkpoint order.
func (o Options) Specs() []safetensors.TensorSpec {
	dt := o.dtype()
	var specs []safetensors.TensorSpec
	for _, t := range o.Model.Tensors() {
		switch {
		case t.F32:
			specs = append(specs, safetensors.TensorSpec{Name: t.Name, DType: safetensors.F32, Shape: t.Shape})
		case o.packedExpert(t):
			specs = append(specs, o.packedSpecs(t)...)
		case o.FP8 && t.Kind == KindLinear:
			specs = append(specs, safetensors.TensorSpec{Name: t.Name, DType: safetensors.F8E4M3, Shape: t.Shape})
			sr, sc := ceilDiv(t.Shape[0], floatcodec.FP8Block), ceilDiv(t.Shape[1], floatcodec.FP8Block)
			specs = append(specs, safetensors.TensorSpec{
				Name: t.Name + "_scale_inv", DType: safetensors.F32, Shape: []int64{sr, sc},
			})
		default:
			specs = append(specs, safetensors.TensorSpec{Name: t.Name, DType: dt, Shape: t.Shape})
		}
	}
	return specs
}

func (o Options) dtype() safetensors.DType {
	if o.DType == "" {
		return safetensors.BF16
	}
	return o.DType
}

// DataBytes returns the tensor bytes the options produce.
func (o Options) DataBytes() int64 {
	var n int64
	for _, s := range o.Specs() {
		n += specBytes(s)
	}
	return n
}

func specBytes(s safetensors.TensorSpec) int64 {
	n := int64(1)
	for _, d := range s.Shape {
		n *= d
	}
	return n * int64(s.DType.Bits()) / 8
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// ErrNotEmpty is returned when the output directory already holds files.
var ErrNotEmpty = errors.New("output directory is not empty")

// Generate writes the checkpoint into dir (created if needed; it must be empty): shards, the index,
// config.json, and small tokenizer and generation files that a real checkpoint ships.
func Generate(ctx context.Context, dir string, o Options) error {
	if err := o.Model.Validate(); err != nil {
		return err
	}
	if err := o.checkExperts(); err != nil {
		return err
	}
	switch o.dtype() {
	case safetensors.BF16, safetensors.F16, safetensors.F32:
	default:
		return fmt.Errorf("synth: dense dtype %s: want BF16, F16 or F32", o.DType)
	}
	if o.MaxShardBytes <= 0 {
		o.MaxShardBytes = 64 << 20
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	if ents, err := os.ReadDir(dir); err != nil {
		return fmt.Errorf("synth: %w", err)
	} else if len(ents) > 0 {
		return fmt.Errorf("synth: %s: %w", dir, ErrNotEmpty)
	}
	plans, err := safetensors.PlanShards(o.Specs(), o.MaxShardBytes, nil)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	kinds := map[string]Tensor{}
	for _, t := range o.Model.Tensors() {
		kinds[t.Name] = t
	}
	for _, p := range plans {
		path := filepath.Join(dir, p.FileName)
		if o.HeaderOnly {
			err = writeSparse(path, p.Layout)
		} else {
			err = o.writeShard(ctx, path, p, kinds)
		}
		if err != nil {
			return err
		}
	}
	if err := safetensors.WriteIndex(dir, plans, nil); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	cfg, err := o.configJSON()
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	files := map[string][]byte{
		"config.json":            cfg,
		"generation_config.json": []byte("{\n  \"bos_token_id\": 0,\n  \"eos_token_id\": 1,\n  \"do_sample\": true,\n  \"temperature\": 0.6\n}\n"),
		"tokenizer_config.json":  []byte("{\n  \"model_max_length\": 4096,\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\"\n}\n"),
		"tokenizer.json":         []byte("{\"version\": \"1.0\", \"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}\n"),
		"chat_template.jinja":    []byte("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}\n"),
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), files[n], 0o644); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	return nil
}

// writeSparse writes a shard's header and extends the file to its full size without data.
func writeSparse(path string, l *safetensors.Layout) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	_, err = f.Write(l.Prefix)
	if err == nil {
		err = f.Truncate(l.FileSize)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("synth: %s: %w", path, err)
	}
	return nil
}

// writeShard generates the tensors of one shard with a pool of workers writing at planned offsets.
func (o Options) writeShard(ctx context.Context, path string, p safetensors.ShardPlan, kinds map[string]Tensor) error {
	w, err := safetensors.Create(path, p.Layout)
	if err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	var specs []safetensors.TensorSpec
	for _, s := range p.Specs {
		if _, known := kinds[s.Name]; known { // scale companions are written with their weight
			specs = append(specs, s)
		} else if t, ok := packedOwner(s.Name, kinds); ok && o.packedExpert(t) {
			specs = append(specs, s) // each tensor of a quantized expert is written on its own
		}
	}
	err = par.ForEach(ctx, len(specs), o.Workers, func(i int) error { return o.writeTensor(w, specs[i], kinds) })
	if err != nil {
		w.Abort()
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return nil
}

// writeTensor generates one tensor (and its FP8 scale companion) in stripes of floatcodec.FP8Block rows.
func (o Options) writeTensor(w *safetensors.Writer, s safetensors.TensorSpec, kinds map[string]Tensor) error {
	t, ok := kinds[s.Name]
	if !ok {
		t, _ = packedOwner(s.Name, kinds)
		return o.writePacked(w, s, t)
	}
	g := newValueGen(o.Seed, t)
	rows, cols := int64(1), int64(1)
	switch len(s.Shape) {
	case 1:
		cols = s.Shape[0]
	case 2:
		rows, cols = s.Shape[0], s.Shape[1]
	}
	elem := int64(s.DType.Bits() / 8)
	buf := make([]float32, floatcodec.FP8Block*cols)
	out := make([]byte, floatcodec.FP8Block*cols*elem)
	var scales []float32
	fp8 := s.DType == safetensors.F8E4M3
	if fp8 {
		scales = make([]float32, ceilDiv(rows, floatcodec.FP8Block)*ceilDiv(cols, floatcodec.FP8Block))
	}
	for r0 := int64(0); r0 < rows; r0 += floatcodec.FP8Block {
		n := min(floatcodec.FP8Block, rows-r0)
		vals := buf[:n*cols]
		g.fill(vals)
		if fp8 {
			quantizeStripe(out[:n*cols], vals, int(n), int(cols), scales[(r0/floatcodec.FP8Block)*ceilDiv(cols, floatcodec.FP8Block):])
		} else if err := safetensors.EncodeFloat32(out[:n*cols*elem], vals, s.DType); err != nil {
			return err
		}
		if err := w.WriteTensorAt(s.Name, r0*cols*elem, out[:n*cols*elem]); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	if fp8 {
		b := make([]byte, 4*len(scales))
		for i, v := range scales {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		if err := w.WriteTensor(s.Name+"_scale_inv", b); err != nil {
			return fmt.Errorf("synth: %w", err)
		}
	}
	return nil
}

// quantizeStripe turns n rows of FP8-block source values into e4m3 codes, one scale per 128x128
// block (absmax/448), the way FP8 checkpoints were made.
func quantizeStripe(dst []byte, vals []float32, n, cols int, scales []float32) {
	for b := 0; b*floatcodec.FP8Block < cols; b++ {
		c0, c1 := b*floatcodec.FP8Block, min((b+1)*floatcodec.FP8Block, cols)
		var amax float32
		for r := range n {
			for _, v := range vals[r*cols+c0 : r*cols+c1] {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
		}
		scale := amax / 448
		if scale == 0 {
			scale = 1
		}
		scales[b] = scale
		for r := range n {
			for c := c0; c < c1; c++ {
				dst[r*cols+c] = safetensors.Float32ToF8E4M3(vals[r*cols+c] / scale)
			}
		}
	}
}
