package quantize

import (
	"errors"
	"testing"
)

func TestCheckW4AFP8(t *testing.T) {
	cases := []struct {
		hidden, inter int
		ok            bool
	}{
		{7168, 2048 / 8, true},   // DeepSeek-V3 / Kimi K2 experts at TP8
		{7168, 2048 / 16, false}, // TP16: 128 per rank
		{6144, 1536 / 8, false},  // 192 per rank
		{4096, 0, false},
		{7000, 256, false},
	}
	for _, c := range cases {
		err := CheckW4AFP8Experts(c.hidden, c.inter)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrBadShape) {
			t.Errorf("CheckW4AFP8Experts(%d, %d) = %v, want ok %v", c.hidden, c.inter, err, c.ok)
		}
	}
	if err := CheckW4AFP8Linear(7168, 1536); err != nil {
		t.Errorf("7168×1536: %v", err)
	}
	if err := CheckW4AFP8Linear(7168, 1600); !errors.Is(err, ErrBadShape) {
		t.Errorf("7168×1600: %v", err)
	}
}
