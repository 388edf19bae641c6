package units

import "testing"

func TestBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.00 KiB"},
		{3 << 19, "1.50 MiB"},
		{1<<30 + 1<<29, "1.50 GiB"},
		{5 << 40, "5.00 TiB"},
		{-1, "-1 B"},
	} {
		if got := Bytes(c.n); got != c.want {
			t.Errorf("Bytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
