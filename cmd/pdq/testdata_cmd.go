package main

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"pdq/safetensors"
	"pdq/synth"
)

func init() { commands = append(commands, newTestdataCmd) }

// genOptions are the flags of pdq testdata gen.
type genOptions struct {
	out             string
	style           string
	fp8             bool
	dtype           string
	size            int64
	moeIntermediate int
	maxShard        int64
	seed            uint64
	config          string
	headerOnly      bool
	layers          int
	experts         int
	vocab           int
	workers         int
	experts4        string
	expertGroup     int
}

func newTestdataCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "testdata",
		Short: "Generate synthetic MoE checkpoints for tests and demos",
		Example: `  pdq testdata gen --out /tmp/tiny --fp8               # a few MiB, FP8 blocks, DeepSeek-style names
  pdq testdata gen --out /tmp/glm4 --style glm4 --size 256MiB
  pdq testdata gen --out /tmp/glm5 --config testdata/configs/glm-5.json --fp8 --header-only
  pdq testdata gen --out /tmp/kimi-int4 --quantized-experts int4   # Kimi-K2.6-style: experts INT4 g32, the rest BF16`,
	}
	var o genOptions
	gen := &cobra.Command{
		Use:   "gen --out DIR",
		Short: "Write a synthetic mixture-of-experts checkpoint (BF16 or FP8 blocks)",
		Long: `Gen writes a sharded safetensors checkpoint with an index, a config.json and tokenizer files, with
the tensor names and shapes of a real MoE model: GLM-4.x style (grouped-query attention with q/k/v/o
and biases) or DeepSeek-V3 style (multi-head latent attention, as in Kimi K2 and GLM-5), dense first
layers, routed and shared experts, router, norms, embeddings and head.

` + wrapText(`Values are realistic: normal with per-row gains, some heavy-tailed (Student-t) tensors and a few
outliers. With --fp8 every Linear weight is stored as F8_E4M3 with F32 weight_scale_inv per 128x128
block, like DeepSeek-V3 and GLM-5-FP8. With --quantized-experts the routed experts are stored already
quantized in compressed-tensors' layouts and the rest in BF16, as Kimi K2-Thinking and K2.6 ship them
(int4: pack-quantized, symmetric, --expert-group-size 32 by default) or as llm-compressor writes FP4
experts (`+fp4Experts()+`): sources for converting an already-quantized checkpoint. --size picks the number of layers to reach about that many
bytes; --config lays out a real model from its config.json (use with --header-only for a sparse
full-size copy that costs no disk). The same flags and --seed always give byte-identical files.`, 98),
		Example: `  pdq testdata gen --out /tmp/tiny
  pdq testdata gen --out /tmp/fp8 --style deepseek --fp8 --size 2GiB
  pdq testdata gen --out /tmp/glm5 --config testdata/configs/glm-5.json --fp8 --header-only  # from the repository root
  pdq testdata gen --out /tmp/kimi-int4 --quantized-experts int4 --size 256MiB
  pdq testdata gen --out /tmp/kimi6 --config testdata/configs/kimi-k2-instruct.json --layers 6 --experts 8 --vocab 8192  # 5.8 GiB of real shapes`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, name := range []string{"layers", "experts", "vocab"} {
				if n, _ := cmd.Flags().GetInt(name); cmd.Flags().Changed(name) && n < 1 {
					return usagef("--%s %d: want at least 1", name, n)
				}
			}
			return runGen(cmd, o)
		},
	}
	f := gen.Flags()
	f.StringVar(&o.out, "out", "", "output directory (created; must be empty)")
	f.StringVar(&o.style, "style", "deepseek", "tensor naming: glm4 (GLM-4.x) or deepseek (DeepSeek-V3, Kimi K2, GLM-5)")
	f.BoolVar(&o.fp8, "fp8", false, "store Linear weights as FP8 e4m3 with 128x128 block scales")
	f.StringVar(&o.dtype, "dtype", "bf16", "dtype of the dense tensors: bf16, f16 or f32")
	f.Var(bytesValue{&o.size}, "size", "approximate tensor bytes to generate, e.g. 64MiB or 4GiB (default: a tiny model of a few MiB)")
	f.Var(bytesValue{&o.maxShard}, "max-shard-size", "largest shard file (default: a quarter of the data, at most 2GiB, so even tiny checkpoints are sharded)")
	f.Uint64Var(&o.seed, "seed", 1, "random seed")
	f.StringVar(&o.config, "config", "", "lay out the model described by this config.json instead of a synthetic one")
	f.BoolVar(&o.headerOnly, "header-only", false, "write real headers and sparse files without data")
	f.IntVar(&o.layers, "layers", 0, "override the number of layers (at least 1)")
	f.IntVar(&o.experts, "experts", 0, "override the number of routed experts (at least 1)")
	f.IntVar(&o.moeIntermediate, "moe-intermediate", 0, "override each routed expert's intermediate size (moe_intermediate_size; 1024 splits across 8 GPUs without the tensor-parallel warnings)")
	f.IntVar(&o.vocab, "vocab", 0, "override the vocabulary size (at least 1): a real model's shapes without its embeddings' gigabytes")
	f.IntVar(&o.workers, "workers", 0, "parallel generators (default: number of CPUs)")
	f.StringVar(&o.experts4, "quantized-experts", "", "store the routed experts already quantized: "+strings.Join(synth.ExpertFormats, ", ")+" (compressed-tensors layouts; the rest BF16)")
	f.IntVar(&o.expertGroup, "expert-group-size", 32, "INT4 group size of --quantized-experts int4 (a multiple of 8 dividing the in features)")
	gen.MarkFlagRequired("out")
	root.AddCommand(gen)
	return root
}

func runGen(cmd *cobra.Command, o genOptions) error {
	style := synth.Style(strings.ToLower(o.style))
	if style != synth.StyleGLM4 && style != synth.StyleDeepSeek {
		return usagef("--style %q: want glm4 or deepseek", o.style)
	}
	dt := safetensors.DType(strings.ToUpper(o.dtype))
	if dt != safetensors.BF16 && dt != safetensors.F16 && dt != safetensors.F32 {
		return usagef("--dtype %q: want bf16, f16 or f32", o.dtype)
	}
	var m synth.Model
	switch {
	case o.config != "":
		var err error
		if m, err = synth.FromConfigFile(o.config); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("--config %s: no such file (the configs of real models are in testdata/configs of the pdq repository)", o.config)
			}
			return err
		}
	case o.size > 0:
		m = synth.Sized(style, o.size, o.fp8)
	default:
		m = synth.Tiny(style)
	}
	if o.layers > 0 {
		m.Layers = o.layers
		m.DenseLayers = min(m.DenseLayers, o.layers)
	}
	if o.experts > 0 {
		m.Experts = o.experts
		m.ExpertsPerTok = min(m.ExpertsPerTok, o.experts)
	}
	if o.vocab > 0 {
		m.Vocab = o.vocab
	}
	if o.moeIntermediate > 0 {
		m.MoEIntermediate = o.moeIntermediate
	}
	if o.experts4 != "" && !slices.Contains(synth.ExpertFormats, strings.ToLower(o.experts4)) {
		return usagef("--quantized-experts %q: want %s", o.experts4, strings.Join(synth.ExpertFormats, ", "))
	}
	if o.experts4 != "" && o.fp8 {
		return usagef("--quantized-experts with --fp8: the already-quantized checkpoints keep everything but the experts BF16; drop --fp8")
	}
	experts := strings.ToLower(o.experts4)
	if o.maxShard == 0 {
		data := synth.Options{Model: m, DType: dt, FP8: o.fp8, ExpertFormat: experts, ExpertGroup: o.expertGroup}.DataBytes()
		o.maxShard = min(max(1<<20, data/4), 2<<30)
	}
	opts := synth.Options{Model: m, DType: dt, FP8: o.fp8, Seed: o.seed, MaxShardBytes: o.maxShard, HeaderOnly: o.headerOnly, Workers: o.workers,
		ExpertFormat: experts, ExpertGroup: o.expertGroup}
	if err := synth.Generate(cmd.Context(), o.out, opts); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s model, %d layers, %d experts, %s of tensor data\n",
		o.out, m.ModelType, m.Layers, m.Experts, formatBytes(opts.DataBytes()))
	if data := opts.DataBytes(); o.size > 0 && o.config == "" && data > 2*o.size {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: --size %s is below the smallest %s model (%s), which was written; shrink it further with --vocab, --layers or --experts\n",
			formatBytes(o.size), o.style, formatBytes(data))
	}
	return nil
}

// fp4Experts lists the already-quantized expert layouts of --quantized-experts beside INT4's,
// comma-separated, as the synthetic generator names them (synth.ExpertFormats).
func fp4Experts() string {
	return strings.Join(slices.DeleteFunc(slices.Clone(synth.ExpertFormats), func(f string) bool { return f == synth.ExpertsInt4 }), ", ")
}
