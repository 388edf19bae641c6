package convert_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"pdq/quantize/convert"
)

// TestDeterministic: every output file and report.json are byte-identical whatever the number
// of workers and readers and the memory budget (a 1 MiB budget runs one slab at a time).
func TestDeterministic(t *testing.T) {
	o := convert.Options{GroupSize: 32, MaxShardSize: 1 << 20}
	for _, tc := range []struct {
		name string
		src  func(testing.TB) string
		runs []convert.RunOptions
	}{
		{"glm4-bf16", glm4Source, []convert.RunOptions{{Workers: 1}, {Workers: 8}, {Workers: 8, MaxMemory: 1 << 20}, {Workers: 2, Readers: 3}}},
		{"deepseek-fp8", deepseekSource, []convert.RunOptions{{Workers: 1}, {Workers: 8, MaxMemory: 1 << 20}, {Workers: 2, Readers: 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src(t)
			var first map[string][]byte
			for i, ro := range tc.runs {
				out := filepath.Join(t.TempDir(), "out")
				convertTo(t, src, out, o, ro)
				files := outputFiles(t, out)
				if i == 0 {
					first = files
					continue
				}
				sameFiles(t, tc.name+": workers 1 vs "+describeRun(ro), first, files)
			}
		})
	}
}

func describeRun(ro convert.RunOptions) string {
	d := fmt.Sprintf("workers %d", ro.Workers)
	if ro.Readers > 0 {
		d += fmt.Sprintf(", readers %d", ro.Readers)
	}
	if ro.MaxMemory > 0 {
		d += fmt.Sprintf(", max memory %d", ro.MaxMemory)
	}
	return d
}
