package fsutil

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestCombineCRC32C(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := crc32.MakeTable(crc32.Castagnoli)
	for _, n := range []int{0, 1, 2, 3, 7, 8, 63, 64, 1000, 4096, 65537, 1 << 20} {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
		whole := crc32.Checksum(buf, tab)
		for _, cut := range []int{0, n / 3, n / 2, n} {
			a, b := buf[:cut], buf[cut:]
			got := CombineCRC32C(crc32.Checksum(a, tab), crc32.Checksum(b, tab), int64(len(b)))
			if got != whole {
				t.Fatalf("n=%d cut=%d: combined %08x, whole %08x", n, cut, got, whole)
			}
		}
		// three pieces combined left to right and right to left (associativity)
		if n >= 3 {
			x, y, z := buf[:n/3], buf[n/3:2*n/3], buf[2*n/3:]
			cx, cy, cz := crc32.Checksum(x, tab), crc32.Checksum(y, tab), crc32.Checksum(z, tab)
			l := CombineCRC32C(CombineCRC32C(cx, cy, int64(len(y))), cz, int64(len(z)))
			r := CombineCRC32C(cx, CombineCRC32C(cy, cz, int64(len(z))), int64(len(y)+len(z)))
			if l != whole || r != whole {
				t.Fatalf("n=%d: three pieces %08x / %08x, whole %08x", n, l, r, whole)
			}
		}
	}
	// a large length (past 2^32 bytes) against zeros appended the slow way is too costly; check
	// the shift's doubling against repeated single-byte shifts instead
	for _, n := range []int64{5, 1 << 33} {
		p := shiftBytes(n)
		q := shiftBytes(n/2 + n%2)
		if n%2 == 0 && mulModP(q, q) != p {
			t.Fatalf("x^(8*%d) != (x^(8*%d))^2", n, n/2)
		}
	}
	zeros := make([]byte, 10000)
	if got, want := ZerosCRC32C(crc32.Checksum([]byte("ab"), tab), 10000), crc32.Checksum(append([]byte("ab"), zeros...), tab); got != want {
		t.Fatalf("zeros: %08x, want %08x", got, want)
	}
}

func BenchmarkCombineCRC32C(b *testing.B) {
	for i := 0; i < b.N; i++ {
		CombineCRC32C(uint32(i), 12345, 1<<24+int64(i))
	}
}
