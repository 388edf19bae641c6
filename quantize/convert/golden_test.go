package convert_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"pdq/quantize"
	"pdq/quantize/convert"
)

// TestGoldenOutputs pins the bytes pdq convert writes for the shared generated checkpoints: the
// checkpoint files of both outputs (one hash) and report.json (another). They are the contract
// every faster path (SIMD, CUDA, more workers) keeps; update them only on purpose, in a commit
// that says why.
func TestGoldenOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("converts five checkpoints")
	}
	for _, tc := range []struct {
		name          string
		src           func(testing.TB) string
		o             convert.Options
		files, report string
	}{
		{"glm4-bf16-mse-g32", glm4Source, convert.Options{GroupSize: 32, Method: quantize.MethodMSE}, "bcf570c906aa36b6", "9723fb5d94cc034f"},
		{"glm4-bf16-rtn-g128", glm4Source, convert.Options{GroupSize: 128, Method: quantize.MethodRTN}, "f4ed9b7320952912", "026200217689fb30"},
		{"glm4-f16-rtn-g32", glm4F16Source, convert.Options{GroupSize: 32, Method: quantize.MethodRTN}, "ba08698167cb9c6b", "fb0fcafc87e047ee"},
		{"deepseek-fp8-mse-g32", deepseekSource, convert.Options{GroupSize: 32, Method: quantize.MethodMSE}, "a3a4bc181199d58c", "ca2cbf64400a76ea"},
		{"deepseek-fp8-rtn-g64", deepseekSource, convert.Options{GroupSize: 64, Method: quantize.MethodRTN}, "7d2fe98090275606", "243fd713e5d6a7fb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			tc.o.MaxShardSize = 1 << 20
			convertTo(t, tc.src(t), out, tc.o, convert.RunOptions{Workers: 2})
			files := outputFiles(t, out)
			report := reportWithoutSource(t, files["report.json"])
			delete(files, "report.json")
			if got := hashFiles(files); got != tc.files {
				t.Errorf("checkpoint files hash %s, want %s", got, tc.files)
			}
			if got := hashFiles(map[string][]byte{"report.json": report}); got != tc.report {
				t.Errorf("report.json hash %s, want %s", got, tc.report)
			}
		})
	}
}

// reportWithoutSource returns report.json re-encoded with its "source" path (a temporary
// directory of the test) removed, so that its hash depends on the figures alone.
func reportWithoutSource(t *testing.T, b []byte) []byte {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	delete(r, "source")
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// hashFiles returns a short SHA-256 over the names and contents of files in name order.
func hashFiles(files map[string][]byte) string {
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, k := range names {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(files[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

var update = flag.Bool("update", false, "rewrite the golden layout files under testdata/golden")

// TestGoldenLayout pins a whole conversion in a file a person can read: the SHA-256 and size of
// every output file, and the full text of each output's config.json and index. A change of
// layout, tensor naming or quantization_config shows up as a diff of that file; go test -run
// GoldenLayout -update rewrites it (commit it with a message saying why).
func TestGoldenLayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  func(testing.TB) string
		o    convert.Options
	}{
		{"glm4-bf16-mse-g32", glm4Source, convert.Options{GroupSize: 32, Method: quantize.MethodMSE}},
		{"deepseek-fp8-rtn-g64", deepseekSource, convert.Options{GroupSize: 64, Method: quantize.MethodRTN}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			tc.o.MaxShardSize = 1 << 20
			convertTo(t, tc.src(t), out, tc.o, convert.RunOptions{Workers: 2})
			files := outputFiles(t, out)
			delete(files, "report.json") // its figures are pinned by TestGoldenOutputs
			var b strings.Builder
			names := make([]string, 0, len(files))
			for k := range files {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				sum := sha256.Sum256(files[k])
				fmt.Fprintf(&b, "%x %9d %s\n", sum, len(files[k]), k)
			}
			for _, k := range names {
				if strings.HasSuffix(k, "/config.json") || strings.HasSuffix(k, ".index.json") {
					fmt.Fprintf(&b, "\n== %s\n%s", k, files[k])
				}
			}
			path := filepath.Join("testdata", "golden", tc.name+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -run GoldenLayout -update writes it)", err)
			}
			if got := b.String(); got != string(want) {
				gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
				for i := range max(len(gl), len(wl)) {
					var g, w string
					if i < len(gl) {
						g = gl[i]
					}
					if i < len(wl) {
						w = wl[i]
					}
					if g != w {
						t.Fatalf("%s differs from this conversion at line %d:\n got: %s\nwant: %s\n(go test -run GoldenLayout -update rewrites it)", path, i+1, g, w)
					}
				}
			}
		})
	}
}
