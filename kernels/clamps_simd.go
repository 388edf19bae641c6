//go:build goexperiment.simd && amd64

package kernels

import "simd/archsimd"

// Which clamps of level a batched search's candidate error needs. The error Σ(x−q·s)² of a
// candidate scale s > 0 takes the levels q = level(f) = rne(min(max(f, -8), 7)) of f = x·inv,
// inv = 1/s. In a lane whose group is finite with absolute maximum a, every x lies in [-a, a];
// float32 multiplication by inv > 0 is monotonic and symmetric (round to nearest is, and
// fl(-y) = -fl(y)), so every f lies in [-(a·inv), a·inv], a·inv rounded as the lane rounds x·inv.
//
//   - Where a·inv ≤ 8.5, every f ≥ -8.5. For f ≥ -8, max(f, -8) = f; for f in [-8.5, -8) the clamp
//     gives -8, and so does rne(f) without it (-8.5 is a tie, and -8 is even). Leaving the clamp
//     at -8 out changes no level. Above 8.5 it would: f just below -8.5 rounds to -9.
//   - Where a·inv < 7.5, every f < 7.5. For f ≤ 7, min(f, 7) = f; for f in (7, 7.5) the clamp gives
//     7, and so does rne(f). Leaving the clamp at 7 out changes no level. At 7.5 it would: rne(7.5)
//     is 8.
//
// The vector rounding (VRNDSCALEPS) rounds any float32 to the nearest integer, ties to even:
// unlike the scalar (v + 1.5·2^23) - 1.5·2^23 it needs no clamp to be exact, so an element the
// clamp would not have changed gets the scalar level. A batch runs one instruction sequence for
// its lanes, so a clamp is left out of a candidate's error only where no lane that can take the
// candidate (keep: a searched group whose candidate is not skipped) needs it; the errors of the
// other lanes are never compared. Every candidate error that can be chosen, and with it every
// choice of the search, is the scalar loops'. The packing and the refinement sums always clamp
// (they run once or a few times per batch). search8_avx2.go leaves out the clamp at -8 the same
// way; TestClampSkipBounds checks the rounding above on every float32 concerned, and the edge
// tests (clampedge_test.go) build batches on both sides of the bounds.
//
// On the benchmark's groups of 32 the plain search leaves the clamp at -8 out of about 81% of the
// candidates (a/s ≤ 8.5: r ≥ 0.82 of the range [0.8, 1]), of 128 of about 36%; the clamp at 7 of
// about 31% and 14% (a/s < 7.5). The weighted search's candidates reach further (r from 0.4):
// about 23% leave out the clamp at -8. On AVX-512 the candidate loops of both searches are
// assembly (search_amd64.h, PREP and DISPATCH): per candidate they pick one of four loops, with
// or without each clamp, by the bounds above. The AVX2 weighted batch leaves out the clamp at
// -8 (needsClampLo8).

// needsClampLo8 reports, for the lanes of keep, whether some lane's levels need the clamp at -8
// (a·inv > 8.5; AVX2: the mask is a vector, its ToBits VMOVMSKPS), for the AVX2 weighted batch,
// which keeps the clamp at 7 (leaving it out as well measured no faster).
func needsClampLo8(a, inv archsimd.Float32x8, keep archsimd.Mask32x8) bool {
	return keep.And(a.Mul(inv).Greater(bc(8.5))).ToBits() != 0
}
