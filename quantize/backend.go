package quantize

import "pdq/kernels"

// Every entry point takes a kernels.Backend (in its options, or as the be of a …On function; the
// plain forms run on kernels.CPU). Results are identical for every backend (the Backend contract:
// identical bytes).

// slabStep returns the rows per backend call: CPU calls take chunks of about chunkElems
// elements spread over the workers; any other backend (a GPU) gets the whole slab in one call,
// as it splits and pipelines the work itself and small calls would only add latency.
func slabStep(be kernels.Backend, cpuStep, rows int) int {
	if _, cpu := be.(kernels.CPU); cpu || be == nil {
		return cpuStep
	}
	return max(rows, 1)
}

// backendOr is be, or kernels.CPU for nil.
func backendOr(be kernels.Backend) kernels.Backend {
	if be == nil {
		return kernels.CPU{}
	}
	return be
}
