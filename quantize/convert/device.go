package convert

import "pdq/calib"

// gptqOptions are the plan's GPTQ options, on the worker's backend when it runs GPTQ
// (calib.Device: the CUDA backend), which gives the CPU's bytes.
func (wk *worker) gptqOptions() calib.GPTQOptions {
	o := wk.r.plan.Options.gptqOptions()
	o.Device, _ = wk.backend.(calib.Device)
	return o
}
