package quantize

// W4AFP8 is INT4 g128 symmetric weights in the pack-quantized layout with dynamic per-token FP8
// input activations declared in the config: vLLM's W4A8 path, on SM90 GPUs only
// (docs/FP4.md). The weights are ordinary INT4 output (QuantizeInt4, GroupSize
// W4AFP8GroupSize); the engine converts their BF16 group scales to e4m3 with a per-channel
// float32 scale when it loads them.

// W4AFP8GroupSize is the only group size vLLM's W4A8 FP8 kernels accept.
const W4AFP8GroupSize = 128

// CheckW4AFP8Experts reports whether routed experts of hidden size hidden and intermediate size
// interPerRank per tensor-parallel rank fit vLLM's W4A8 FP8 MoE kernels: both must be
// multiples of 256 (the CUTLASS weight reorder). The error wraps ErrBadShape and names the rule.
func CheckW4AFP8Experts(hidden, interPerRank int) error {
	for _, d := range []struct {
		name string
		n    int
	}{{"hidden size", hidden}, {"expert intermediate size per tensor-parallel rank", interPerRank}} {
		if d.n <= 0 || d.n%256 != 0 {
			return badShape("W4AFP8 experts need the %s divisible by 256 (vLLM's W4A8 MoE kernels), have %d", d.name, d.n)
		}
	}
	return nil
}

// CheckW4AFP8Linear reports whether a dense Linear of in×out features per tensor-parallel rank
// fits vLLM's CUTLASS W4A8 linear kernel: both multiples of 128. The error wraps ErrBadShape.
func CheckW4AFP8Linear(in, out int) error {
	if in <= 0 || out <= 0 || in%128 != 0 || out%128 != 0 {
		return badShape("W4AFP8 Linear layers need input and output features per rank divisible by 128 (vLLM's CUTLASS W4A8 kernel), have %d×%d", in, out)
	}
	return nil
}
