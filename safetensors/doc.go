// Package safetensors reads and writes safetensors checkpoints without loading tensor data.
//
// Reading: Open parses and validates every header of a checkpoint (one file, a directory of
// files, or a sharded directory with model.safetensors.index.json) and returns lazy Tensor
// handles; ReadTensor, ReadTensorAt and TensorReader fetch bytes with positioned reads. Headers
// are held to the rules of the reference implementation (see ParseHeader), and every violation
// wraps one of the sentinel errors so that callers can test it with errors.Is.
//
// Writing is plan-then-write: ComputeLayout (or PlanShards for a sharded checkpoint) fixes the
// header bytes and every tensor offset first; a Writer then accepts tensors whole or in chunks,
// in any order and from several goroutines, and only renames a complete file into place.
// WriteIndex writes the index of a sharded checkpoint.
package safetensors
