//go:build cudaemu

// The CUDA kernel source, compiled for the host with the built-ins of shim.h.
// No fused multiply-add: every product is rounded before it is added, as on the GPU (the
// baseline x86-64 target has no FMA instruction either).
#pragma GCC optimize("fp-contract=off")
#pragma STDC FP_CONTRACT OFF

#include "shim.h"

#include "../../pdq.cu"

// The SHA-256 of the pdq.cu compiled here, passed as -DPDQ_CU_SHA256=<hex> through CGO_CXXFLAGS
// (make test-cuda-emu). The Go build cache does not see files included from outside the
// package, but it does see CGO_CXXFLAGS: the hash forces a rebuild when pdq.cu changes, and the
// test refuses to run kernels compiled from another version of the source.
#define PDQ_STR2(x) #x
#define PDQ_STR(x) PDQ_STR2(x)
#ifdef PDQ_CU_SHA256
extern "C" const char *emu_source_sha256() { return PDQ_STR(PDQ_CU_SHA256); }
#else
extern "C" const char *emu_source_sha256() { return "unknown"; }
#endif
