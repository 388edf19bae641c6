package kernels

// NVFP4Scales writes into dst the effective float32 scale f32(S/g) of each e4m3 scale code.
func NVFP4Scales(dst []float32, codes []byte, g float32) {
	dst = dst[:len(codes)]
	if len(codes) < 2*len(nvfp4ScaleTab{}) {
		for i, c := range codes {
			dst[i] = NVFP4Scale(c, g)
		}
		return
	}
	// Every code's scale once (the same divisions), then a lookup per group.
	var tab nvfp4ScaleTab
	for c := range tab {
		tab[c] = NVFP4Scale(uint8(c), g)
	}
	for i, c := range codes {
		dst[i] = tab[c]
	}
}

// nvfp4ScaleTab holds the effective scale of each of the 256 e4m3 codes under one global scale.
type nvfp4ScaleTab [256]float32

// MXFP4Scales writes into dst the effective float32 scale 2^(c-127) of each E8M0 scale code.
func MXFP4Scales(dst []float32, codes []byte) {
	dst = dst[:len(codes)]
	for i, c := range codes {
		dst[i] = MXFP4Scale(c)
	}
}

// DequantizeFP4 writes into dst (rows×cols) the values f32(value(code)·s) of packed E2M1 codes
// in groups of groupSize consecutive elements of a row, group k with the effective scale
// scales[k] (NVFP4Scales, MXFP4Scales). Lengths that do not fit give an error wrapping ErrShape.
func DequantizeFP4(dst []float32, packed []byte, scales []float32, rows, cols, groupSize int) error {
	if err := checkFP4("destination", len(dst), len(packed), len(scales), rows, cols, groupSize); err != nil {
		return err
	}
	callExpandFP4(dst, packed, scales, 0, groupSize)
	return nil
}

// expandFP4Range writes into dst the values of elements i0 .. i0+len(dst)-1 (i0 even) of a slab
// in groups of g with effective scales scales; p holds those elements' codes.
func expandFP4Range(dst []float32, p []byte, scales []float32, i0, g int) {
	for i := 0; i < len(dst); {
		k := (i0 + i) / g
		end := min(len(dst), (k+1)*g-i0)
		expandFP4(dst[i:end], p[i/2:end/2], scales[k])
		i = end
	}
}

// expandFP4 decodes the codes of p (two per byte, low nibble first) times s into dst.
func expandFP4(dst []float32, p []byte, s float32) {
	dst = dst[:2*len(p)]
	for i, b := range p {
		dst[2*i] = e2m1Values[b&15] * s
		dst[2*i+1] = e2m1Values[b>>4] * s
	}
}

// checkFP4 checks the lengths of a rows×cols FP4 slab in groups of g: n values, its packed
// bytes and its group scales.
func checkFP4(what string, n, packed, scales, rows, cols, g int) error {
	return checkPackedSlab("FP4 row", 2, "group scales", what, n, packed, scales, rows, cols, g)
}

// ErrorSumsFP4 returns ErrorSums(ref, got, base) for got the dequantization of packed E2M1
// codes (as DequantizeFP4 writes it), without materialising got.
func (CPU) ErrorSumsFP4(ref []float32, packed []byte, scales []float32, rows, cols, groupSize int, base int64) (ErrSums, error) {
	var e ErrAccumulator
	if err := e.AddFP4(ref, packed, scales, rows, cols, groupSize); err != nil {
		return ErrSums{}, err
	}
	return e.Result(base), nil
}

// AddFP4 adds the error sums of ref (rows×cols) against the dequantization of packed E2M1
// codes with float32 effective group scales, as DequantizeFP4 takes them.
func (e *ErrAccumulator) AddFP4(ref []float32, packed []byte, scales []float32, rows, cols, groupSize int) error {
	g := groupSize
	if err := checkFP4("reference", len(ref), len(packed), len(scales), rows, cols, g); err != nil {
		return err
	}
	e.start()
	if callErrLanesFP4(&e.a, ref, packed, scales, g) {
		return nil
	}
	var buf [512]float32
	for i0 := 0; i0 < len(ref); i0 += len(buf) {
		i1 := min(len(ref), i0+len(buf))
		callExpandFP4(buf[:i1-i0], packed[i0/2:i1/2], scales, i0, g)
		callErrLanes(&e.a, ref[i0:i1], buf[:i1-i0])
	}
	return nil
}
