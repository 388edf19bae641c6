package convert

import (
	"fmt"

	"pdq/safetensors"
)

// checkOrder refuses a verify whose arguments are swapped: a source written by pdq (an output of
// an earlier conversion, which pdq can read since it reads already-quantized sources) checked
// against a directory pdq did not write.
func checkOrder(src, out *safetensors.Checkpoint) error {
	if writtenByPDQ(src) && !writtenByPDQ(out) {
		return fmt.Errorf("convert: verify: %s: %w: its shards were not written by pdq while the source %s's were (the source comes first, then the output)",
			out.Dir, ErrNotOutput, src.Dir)
	}
	return nil
}

// writtenByPDQ reports whether every shard of ck carries the producer metadata pdq writes.
func writtenByPDQ(ck *safetensors.Checkpoint) bool {
	for _, s := range ck.Shards {
		if s.Header == nil || s.Header.Metadata["producer"] != "pdq" {
			return false
		}
	}
	return len(ck.Shards) > 0
}
