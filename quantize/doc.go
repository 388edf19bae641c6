// Package quantize turns float32 weights into the checkpoint encodings pdq writes and measures
// what that cost: INT4 group quantization in the compressed-tensors pack-quantized layout (BF16
// scales, chosen by the reference rule or by a per-group error search), FP8 e4m3 128×128 block
// quantization, the decoders of the source layouts (dense BF16/F16/F32, FP8 block, FP8 per
// channel) and the error metrics of the per-tensor report.
//
// Every function works on one row slab at a time, so callers can stream large tensors: INT4 on
// any range of rows, FP8 block on slabs that start on a multiple of 128 rows. Results are
// byte-identical for every worker count: work is split by rows and each group or block is
// computed on its own (the loops, and the arithmetic they promise, live in package kernels).
//
// Following gonum, destination slices come first and are named dst; bad data and bad shapes are
// returned as errors wrapping the sentinels below; a programmer error (slices of different
// lengths handed to Metrics.Add) panics.
package quantize
