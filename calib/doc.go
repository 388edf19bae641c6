// Package calib reads calibration statistics (per-input-channel activation moments and input
// Hessians of Linear modules, written by tools/collect_calib.py) and uses them to quantize INT4
// weights: a scale search weighted by E[x²] (quantize.QuantizeInt4Weighted) and GPTQ with static
// groups (GPTQ), whose output stays plain group-wise INT4. docs/CALIBRATION.md describes the file
// format, the lookup rules and the fallbacks.
package calib
