//go:build goexperiment.simd && amd64

package kernels

// searchState is what the assembly loops (search_*amd64.s) read and update: the groups'
// absolute maxima a and RTN scales sR, the best error and scale so far, the scale s of
// errSumsAsm and wSumsAsm, their sums e, xq, qq and eu, the multiplier of the best coarse
// candidate (wSearchPosAsm), Σx² (rtnErrAsm), and the lanes whose best is a searched scale. The assembly takes
// the field offsets from go_asm.h.
type searchState struct {
	a, sR, bestE, best, s [batchGroups]float32
	e, xq, qq, eu         [batchGroups]float32
	kBest, ss             [batchGroups]float32
	mul                   uint32
}

// searchPosAsm runs the loop over the positive candidates pos[:npos] of searchBatch on the
// sixteen transposed groups of t (rows of them, a multiple of 8) in the lanes of ok, as search
// tries them after the RTN scale: s = bf16(a·k), skipped in a lane where it repeats the lane's
// previous candidate or sR, else its error replaces st.bestE, and s st.best, where strictly
// smaller, and the lane's bit is set in st.mul. A candidate that no lane of ok takes is not
// summed.
//
//go:noescape
func searchPosAsm(t *float32, rows int, pos *float32, npos int, ok uint32, st *searchState)

// errSumsAsm is errSums16 for the scale st.s, into st.e, st.xq and st.qq: the levels of rows
// (a multiple of 8) of t, level(x·(1/s)), or level(x/s) in the lanes of div.
//
//go:noescape
func errSumsAsm(t *float32, rows int, div uint32, st *searchState)

// wSumsAsm is wSums16 for the scale st.s, into st.e, st.xq, st.qq and st.eu: the rows (a
// multiple of 8) of t with their weights tw, the levels level(x/s) when div, else
// level(x·(1/s)).
//
//go:noescape
func wSumsAsm(t, tw *float32, rows int, div bool, st *searchState)

// wSearchPosAsm is searchPosAsm for searchBatchWeighted's plain or coarse candidates
// pos[:npos] in the lanes of lanes, with the weighted error of the rows of t and their weights
// tw: the lanes that take a candidate are or-ed into st.mul and take its multiplier as
// st.kBest.
//
//go:noescape
func wSearchPosAsm(t, tw *float32, rows int, pos *float32, npos int, lanes uint32, st *searchState)

// wFineAsm is the fine stage of searchBatchWeighted in the lanes of lanes: for i = 1..n the
// candidates bf16(a·(kBest ∓ i·(*wfine))), kBest from st.kBest, each tried where it is
// positive and differs from the lane's current best and from sR, as searchPosAsm tries its
// candidates. n > 0.
//
//go:noescape
func wFineAsm(t, tw *float32, rows int, wfine *float32, n int, lanes uint32, st *searchState)

// rtnErrAsm is errDiv16 and sumSq16 in one pass over the rows (a multiple of 8) of t: the error
// of the RTN levels of st.sR into st.e, Σx² into st.ss.
//
//go:noescape
func rtnErrAsm(t *float32, rows int, st *searchState)
