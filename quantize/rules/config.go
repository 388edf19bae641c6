package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// ConfigFileName is the model configuration file of a checkpoint directory.
const ConfigFileName = "config.json"

// MaxConfigBytes bounds the size of a config.json pdq reads (real ones are a few KiB; GLM-5's is
// 3 KiB): a larger file is refused before it is read.
const MaxConfigBytes = 4 << 20

// ErrBadConfig: config.json is not a JSON object pdq can use, or a value pdq reads is not what
// the format allows (a count that is not a non-negative integer, a size that is not positive).
var ErrBadConfig = errors.New("bad config.json")

// LoadConfig reads config.json from dir (see LoadConfigFile). A missing file gives (nil, nil):
// single-file checkpoints often come without one.
func LoadConfig(dir string) (map[string]any, error) {
	cfg, err := LoadConfigFile(filepath.Join(dir, ConfigFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return cfg, err
}

// LoadConfigFile reads a config.json: a regular file of at most MaxConfigBytes holding one JSON
// object. Numbers are kept as json.Number, so a config pdq rewrites keeps every number exactly as
// written (2^63 stays 9223372036854775808, not 9223372036854776000); read them with ConfigInt.
func LoadConfigFile(path string) (map[string]any, error) {
	// Non-blocking, so that a FIFO (or a device) under the name cannot hang the open; it is
	// then refused as not regular.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("rules: %s: %w: not a regular file (%s)", path, ErrBadConfig, fi.Mode().Type())
	}
	if fi.Size() > MaxConfigBytes {
		return nil, fmt.Errorf("rules: %s: %w: %d bytes, more than the %d a model configuration can need", path, ErrBadConfig, fi.Size(), MaxConfigBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	if len(b) > MaxConfigBytes {
		return nil, fmt.Errorf("rules: %s: %w: grew past %d bytes while read", path, ErrBadConfig, MaxConfigBytes)
	}
	cfg, err := decodeConfig(b)
	if err != nil {
		return nil, fmt.Errorf("rules: %s: %w: %v", path, ErrBadConfig, err)
	}
	return cfg, nil
}

// decodeConfig parses one JSON object with numbers kept as written.
func decodeConfig(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var cfg map[string]any
	if err := dec.Decode(&cfg); err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, errors.New("not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return cfg, nil
}

// CloneConfig deep-copies a parsed config, numbers kept as written (nil gives an empty map).
func CloneConfig(cfg map[string]any) map[string]any {
	if cfg == nil {
		return map[string]any{}
	}
	b, err := json.Marshal(cfg)
	if err == nil {
		if out, err := decodeConfig(b); err == nil {
			return out
		}
	}
	return map[string]any{}
}

// IntOf reads an integer JSON value (json.Number or float64).
func IntOf(v any) (int64, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err == nil {
			return n, true
		}
		f, err := x.Float64()
		if err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f), true
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	}
	return 0, false
}

// ConfigInt returns the integer value of key in cfg, read from its text_config when the top
// level lacks the key (see ConfigValue).
func ConfigInt(cfg map[string]any, key string) (int64, bool) { return IntOf(ConfigValue(cfg, key)) }

// TextConfig returns the text_config object of cfg, nil when it has none: multimodal wrappers
// (Kimi K2.5 and K2.6) keep the language model's keys there, quantization_config included.
func TextConfig(cfg map[string]any) map[string]any {
	tc, _ := cfg["text_config"].(map[string]any)
	return tc
}

// ConfigValue returns the value of key in cfg, or in its text_config when the top level lacks
// the key: a multimodal wrapper's language model is read like a top-level one.
func ConfigValue(cfg map[string]any, key string) any {
	if v, ok := cfg[key]; ok {
		return v
	}
	return TextConfig(cfg)[key]
}

// QuantizationConfig returns cfg's quantization_config object (ConfigValue's), nil when it has
// none.
func QuantizationConfig(cfg map[string]any) map[string]any {
	qc, _ := ConfigValue(cfg, "quantization_config").(map[string]any)
	return qc
}

// maxConfigValue bounds the sizes and counts pdq reads from a config (2^40: far above any model).
const maxConfigValue = 1 << 40

// configSizes must be positive integers when present; configCounts non-negative integers.
var (
	configSizes = []string{"hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size", "moe_intermediate_size",
		"num_attention_heads", "num_key_value_heads", "head_dim", "n_routed_experts", "num_experts", "num_local_experts",
		"num_experts_per_tok", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"}
	configCounts = []string{"n_shared_experts", "first_k_dense_replace", "num_nextn_predict_layers"}
)

// CheckConfig refuses a config whose model sizes and counts (ConfigValue's: the top level's, or
// text_config's) are not integers in range: a value pdq reads must not be a string, a fraction,
// negative, or absurdly large (ErrBadConfig).
// null is accepted (some configs write q_lora_rank: null).
func CheckConfig(cfg map[string]any) error {
	check := func(k string, lo int64) error {
		v := ConfigValue(cfg, k)
		if v == nil {
			return nil
		}
		n, ok := IntOf(v)
		if !ok || n < lo || n > maxConfigValue {
			want := "a non-negative integer"
			if lo > 0 {
				want = "a positive integer"
			}
			b, _ := json.Marshal(v)
			return fmt.Errorf("rules: %w: %s is %s, want %s up to 2^40", ErrBadConfig, k, b, want)
		}
		return nil
	}
	for _, k := range configSizes {
		if err := check(k, 1); err != nil {
			return err
		}
	}
	for _, k := range configCounts {
		if err := check(k, 0); err != nil {
			return err
		}
	}
	return nil
}
