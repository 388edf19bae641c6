package main

import (
	"fmt"
	"strconv"
	"strings"

	"pdq/internal/units"
)

// byteUnits maps size suffixes to multipliers: decimal (KB, MB, GB, TB) and binary (KiB, ...).
var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
}

// parseBytes reads a size such as "5GB", "512MiB", "1.5G" or "4096".
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if len(t) > len(u.suffix) && strings.EqualFold(t[len(t)-len(u.suffix):], u.suffix) {
			mult, t = u.mult, strings.TrimSpace(t[:len(t)-len(u.suffix)])
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || f*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("invalid size %q (examples: 4096, 512MiB, 5GB, 1.5GiB)", s)
	}
	return int64(f * float64(mult)), nil
}

// bytesValue is a pflag.Value holding a size given with units.
type bytesValue struct{ n *int64 }

// String is the size with a binary unit; zero is "0", which pflag reads as no default, so a
// flag whose usage explains its zero ("default: a quarter of the data") shows no second default.
func (b bytesValue) String() string {
	if b.n == nil || *b.n == 0 {
		return "0"
	}
	return formatBytes(*b.n)
}
func (b bytesValue) Set(s string) error {
	v, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b.n = v
	return nil
}
func (b bytesValue) Type() string { return "size" }

// formatBytes prints a byte count with a binary unit (units.Bytes).
func formatBytes(n int64) string { return units.Bytes(n) }
