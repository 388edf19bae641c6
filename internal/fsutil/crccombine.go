package fsutil

import "hash/crc32"

// castagnoliReflected is the CRC-32C polynomial in the bit-reflected form hash/crc32 uses.
const castagnoliReflected = 0x82f63b78

// x2nTable[k] is x^(2^k) modulo the polynomial (reflected; x^0 is bit 31).
var x2nTable = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = mulModP(p, p)
	}
	return t
}()

// mulModP multiplies a and b modulo the CRC-32C polynomial, both reflected.
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; a != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			a ^= m
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
	return p
}

// shiftBytes returns x^(8n) modulo the polynomial: what appending n bytes multiplies a CRC by.
func shiftBytes(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = mulModP(x2nTable[k&31], p)
		}
	}
	return p
}

// CombineCRC32C returns the CRC-32C of A followed by B from crcA = CRC-32C(A), crcB = CRC-32C(B)
// and lenB = len(B), without the bytes: pieces of a file checksummed as they are written, in any
// order, combine into the file's checksum.
func CombineCRC32C(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	return mulModP(shiftBytes(lenB), crcA) ^ crcB
}

// UpdateCRC32C returns crc extended by the bytes of p (crc32.Update with the Castagnoli table).
func UpdateCRC32C(crc uint32, p []byte) uint32 { return crc32.Update(crc, crc32c, p) }

// ZerosCRC32C returns the CRC-32C of crc's bytes followed by n zero bytes.
func ZerosCRC32C(crc uint32, n int64) uint32 {
	var zero [4096]byte
	for n > 0 {
		k := min(n, int64(len(zero)))
		crc = UpdateCRC32C(crc, zero[:k])
		n -= k
	}
	return crc
}
