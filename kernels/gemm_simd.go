//go:build goexperiment.simd && amd64

package kernels

import "simd/archsimd"

// SIMD forms of gemmTileScalar and axpyScalar. Each lane is one element of C (or y) and gets
// the specification's fused multiply-adds in the same order, so the bits are the same.

// gemmTileAVX512: the 4×32 tile in eight Float32x16 accumulators.
func gemmTileAVX512(kc int, ap, bp, c []float32, ldc int) {
	var c00, c01, c10, c11, c20, c21, c30, c31 archsimd.Float32x16
	ap, bp = ap[:kc*gemmMR], bp[:kc*gemmNR]
	for p := range kc {
		b := bp[p*gemmNR : (p+1)*gemmNR : (p+1)*gemmNR]
		b0 := archsimd.LoadFloat32x16Slice(b)
		b1 := archsimd.LoadFloat32x16Slice(b[16:])
		a := ap[p*gemmMR : (p+1)*gemmMR : (p+1)*gemmMR]
		x := archsimd.BroadcastFloat32x16(a[0])
		c00, c01 = x.MulAdd(b0, c00), x.MulAdd(b1, c01)
		x = archsimd.BroadcastFloat32x16(a[1])
		c10, c11 = x.MulAdd(b0, c10), x.MulAdd(b1, c11)
		x = archsimd.BroadcastFloat32x16(a[2])
		c20, c21 = x.MulAdd(b0, c20), x.MulAdd(b1, c21)
		x = archsimd.BroadcastFloat32x16(a[3])
		c30, c31 = x.MulAdd(b0, c30), x.MulAdd(b1, c31)
	}
	add16x2(c[0*ldc:], c00, c01)
	add16x2(c[1*ldc:], c10, c11)
	add16x2(c[2*ldc:], c20, c21)
	add16x2(c[3*ldc:], c30, c31)
	archsimd.ClearAVXUpperBits()
}

func add16x2(row []float32, v0, v1 archsimd.Float32x16) {
	row = row[:32:32]
	archsimd.LoadFloat32x16Slice(row).Add(v0).StoreSlice(row)
	archsimd.LoadFloat32x16Slice(row[16:]).Add(v1).StoreSlice(row[16:])
}

// gemmTileAVX2: the tile as two 4×16 halves, eight Float32x8 accumulators each.
func gemmTileAVX2(kc int, ap, bp, c []float32, ldc int) {
	gemmHalfAVX2(kc, ap, bp, c, ldc)
	gemmHalfAVX2(kc, ap, bp[16:], c[16:], ldc)
}

func gemmHalfAVX2(kc int, ap, bp, c []float32, ldc int) {
	var c00, c01, c10, c11, c20, c21, c30, c31 archsimd.Float32x8
	ap = ap[:kc*gemmMR]
	for p := range kc {
		b := bp[p*gemmNR : p*gemmNR+16 : p*gemmNR+16]
		b0 := archsimd.LoadFloat32x8Slice(b)
		b1 := archsimd.LoadFloat32x8Slice(b[8:])
		a := ap[p*gemmMR : (p+1)*gemmMR : (p+1)*gemmMR]
		x := archsimd.BroadcastFloat32x8(a[0])
		c00, c01 = x.MulAdd(b0, c00), x.MulAdd(b1, c01)
		x = archsimd.BroadcastFloat32x8(a[1])
		c10, c11 = x.MulAdd(b0, c10), x.MulAdd(b1, c11)
		x = archsimd.BroadcastFloat32x8(a[2])
		c20, c21 = x.MulAdd(b0, c20), x.MulAdd(b1, c21)
		x = archsimd.BroadcastFloat32x8(a[3])
		c30, c31 = x.MulAdd(b0, c30), x.MulAdd(b1, c31)
	}
	add8x2(c[0*ldc:], c00, c01)
	add8x2(c[1*ldc:], c10, c11)
	add8x2(c[2*ldc:], c20, c21)
	add8x2(c[3*ldc:], c30, c31)
	archsimd.ClearAVXUpperBits()
}

func add8x2(row []float32, v0, v1 archsimd.Float32x8) {
	row = row[:16:16]
	archsimd.LoadFloat32x8Slice(row).Add(v0).StoreSlice(row)
	archsimd.LoadFloat32x8Slice(row[8:]).Add(v1).StoreSlice(row[8:])
}

func axpyAVX512(y, x []float32, a float32) {
	x = x[:len(y)]
	// The tail (GPTQ's are most of a short row) goes through a vector too, copied in and out
	// of stack arrays (the scalar fused multiply-add is emulated, several times slower): the
	// copies in first, while the upper halves are clean, the copy out after VZEROUPPER.
	t := len(y) &^ 15
	var tx, ty [16]float32
	n := copy(tx[:], x[t:])
	copy(ty[:], y[t:])
	va := archsimd.BroadcastFloat32x16(a)
	for i := 0; i < t; i += 16 {
		va.MulAdd(archsimd.LoadFloat32x16Slice(x[i:]), archsimd.LoadFloat32x16Slice(y[i:])).StoreSlice(y[i:])
	}
	if n > 0 {
		va.MulAdd(archsimd.LoadFloat32x16(&tx), archsimd.LoadFloat32x16(&ty)).Store(&ty)
	}
	archsimd.ClearAVXUpperBits()
	copy(y[t:], ty[:n])
}

func axpyAVX2(y, x []float32, a float32) {
	x = x[:len(y)]
	// The tail as axpyAVX512's, through stack arrays (a partial load would trip -race's
	// pointer checks).
	t := len(y) &^ 7
	var tx, ty [8]float32
	n := copy(tx[:], x[t:])
	copy(ty[:], y[t:])
	va := archsimd.BroadcastFloat32x8(a)
	for i := 0; i < t; i += 8 {
		va.MulAdd(archsimd.LoadFloat32x8Slice(x[i:]), archsimd.LoadFloat32x8Slice(y[i:])).StoreSlice(y[i:])
	}
	if n > 0 {
		va.MulAdd(archsimd.LoadFloat32x8(&tx), archsimd.LoadFloat32x8(&ty)).Store(&ty)
	}
	archsimd.ClearAVXUpperBits()
	copy(y[t:], ty[:n])
}
