package convert_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pdq/quantize/convert"
	"pdq/quantize/rules"
)

// TestNoTargetsRefused: a decode output with no INT4 module is refused at planning, naming what
// the checkpoint holds, unless asked for; a prefill-only plan is not affected.
func TestNoTargetsRefused(t *testing.T) {
	src := glm4Source(t)
	for _, tc := range []struct {
		name string
		o    convert.Options
		want string
	}{
		{"typo", convert.Options{Targets: `experts\.\d+\.(gate|up|down)_prj$`}, "no module matches the targets"},
		{"ignore-all", convert.Options{Ignore: `experts`}, "the ignore pattern \"experts\" removes all"},
	} {
		_, err := tryPlan(t, src, tc.o)
		if !errors.Is(err, convert.ErrNoTargets) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Linear modules, e.g. model.layers.") {
			t.Errorf("%s: %v, want ErrNoTargets saying %q and what the checkpoint holds", tc.name, err, tc.want)
		}
		tc.o.NoInt4OK = true
		if _, err := tryPlan(t, src, tc.o); err != nil {
			t.Errorf("%s with NoInt4OK: %v", tc.name, err)
		}
		tc.o.NoInt4OK, tc.o.Only = false, convert.KindPrefill
		if _, err := tryPlan(t, src, tc.o); err != nil {
			t.Errorf("%s, prefill only: %v", tc.name, err)
		}
	}
}

// withConfig copies src with its config.json's key set to the raw JSON value.
func withConfig(t *testing.T, src, key, value string) string {
	t.Helper()
	dir := copyDir(t, src)
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg[key] = json.RawMessage(value)
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestConfigValues: sizes and counts of config.json that are not integers in range are refused;
// values that contradict the tensors are warned about; numbers pdq copies stay as written.
func TestConfigValues(t *testing.T) {
	src := smallSource(t)
	for _, v := range []string{`"8"`, `-8`, `0`, `1e30`, `9223372036854775808`, `2.5`} {
		_, err := tryPlan(t, withConfig(t, src, "n_routed_experts", v), smallOptions)
		if !errors.Is(err, rules.ErrBadConfig) || !strings.Contains(err.Error(), "n_routed_experts is "+v) {
			t.Errorf("n_routed_experts %s: %v, want ErrBadConfig naming it", v, err)
		}
	}
	if _, err := tryPlan(t, withConfig(t, src, "hidden_size", `-256`), smallOptions); !errors.Is(err, rules.ErrBadConfig) {
		t.Errorf("hidden_size -256: %v", err)
	}
	p := plan(t, withConfig(t, src, "hidden_size", `512`), smallOptions)
	if w := strings.Join(p.Warnings, "\n"); !strings.Contains(w, "config.json says hidden_size 512 but the embedding has width 256") {
		t.Errorf("hidden_size contradicting the embedding: warnings %q", w)
	}
	p = plan(t, withConfig(t, src, "n_routed_experts", `2`), smallOptions)
	if w := strings.Join(p.Warnings, "\n"); !strings.Contains(w, "config.json says n_routed_experts 2 but the checkpoint holds expert") {
		t.Errorf("too few experts: warnings %q", w)
	}
	// A number pdq does not read is copied exactly as written, however large.
	dir := withConfig(t, src, "some_big_number", `9223372036854775808`)
	out := filepath.Join(t.TempDir(), "out")
	convertTo(t, dir, out, smallOptions, convert.RunOptions{Workers: 2})
	for _, kind := range []string{"prefill", "decode"} {
		b, err := os.ReadFile(filepath.Join(out, kind, "config.json"))
		if err != nil || !strings.Contains(string(b), `"some_big_number": 9223372036854775808`) {
			t.Errorf("%s/config.json does not keep 9223372036854775808 as written (%v)", kind, err)
		}
	}
}
