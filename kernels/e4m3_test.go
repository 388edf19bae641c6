package kernels

import (
	"flag"
	"math"
	"testing"

	"pdq/internal/floatcodec"
)

func checkE4M3(t *testing.T, b uint32) {
	v := math.Float32frombits(b)
	if got, want := e4m3(v), floatcodec.Float32ToF8E4M3(v); got != want {
		t.Fatalf("e4m3(%v = %#08x) = %#02x, want %#02x", v, b, got, want)
	}
}

var e4m3Full = flag.Bool("e4m3full", false, "compare e4m3 with the codec on all 2^32 float32 patterns (about a minute)")

// TestE4M3MatchesCodec compares the fast encoder with the floatcodec encoder: every float32 whose
// low 12 bits are a rounding-relevant pattern (ties, just above and below), and a strided sweep
// of the whole range (every pattern with -e4m3full).
func TestE4M3MatchesCodec(t *testing.T) {
	for hi := uint32(0); hi < 1<<20; hi++ {
		for _, lo := range []uint32{0, 1, 0x7fe, 0x7ff, 0x800, 0x801, 0xfff} {
			checkE4M3(t, hi<<12|lo)
		}
	}
	stride := uint64(61)
	if testing.Short() {
		stride = 7919
	}
	if *e4m3Full {
		stride = 1
	}
	for b := uint64(0); b < 1<<32; b += stride {
		checkE4M3(t, uint32(b))
	}
}
