package kernels

import "encoding/binary"

// DequantizeInt4 implements Backend. Per group it builds the 16 products (k-8)·s once, so each
// element is a table lookup; the products are exact for BF16 scales and rounded once otherwise.
func (CPU) DequantizeInt4(dst []float32, packed []byte, scales []float32, rows, cols, groupSize int) error {
	g := groupSize
	if err := checkInt4("destination", len(dst), len(packed), len(scales), rows, cols, g); err != nil {
		return err
	}
	for k, s := range scales {
		lut := int4LUT(s)
		expandInt4(dst[k*g:(k+1)*g], packed[k*g/2:(k+1)*g/2], &lut)
	}
	return nil
}

// checkInt4 checks the lengths of an INT4 slab of rows×cols in groups of g: values (named
// what), packed bytes and scales.
func checkInt4(what string, values, packed, scales, rows, cols, g int) error {
	return checkPackedSlab("INT4 row", 8, "scales", what, values, packed, scales, rows, cols, g)
}

// checkPackedSlab checks a slab of two codes per byte: g a positive multiple of mult dividing
// cols (else an error naming row), then values (named what), packed bytes and the group scales
// (named scaleName).
func checkPackedSlab(row string, mult int, scaleName, what string, values, packed, scales, rows, cols, g int) error {
	if g <= 0 || g%mult != 0 || rows < 0 || cols < 0 || cols%g != 0 {
		return shapeErr(row, cols, g)
	}
	n := rows * cols
	switch {
	case values != n:
		return shapeErr(what, values, n)
	case packed != n/2:
		return shapeErr("packed bytes", packed, n/2)
	case scales != n/g:
		return shapeErr(scaleName, scales, n/g)
	}
	return nil
}

// int4LUT returns the 16 values (nibble-8)·s of a group with scale s.
func int4LUT(s float32) [16]float32 {
	var lut [16]float32
	for i := range lut {
		lut[i] = float32(i-8) * s
	}
	return lut
}

// expandInt4 writes the values of the packed words p (len(d)/2 bytes) into d through lut.
func expandInt4(d []float32, p []byte, lut *[16]float32) {
	for len(d) >= 8 {
		w := binary.LittleEndian.Uint32(p)
		dd := d[:8:8]
		for j := range 8 {
			dd[j] = lut[w>>(4*j)&15]
		}
		d, p = d[8:], p[4:]
	}
}
