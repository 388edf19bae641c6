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

// emu_launch runs kernel k (the order of host.Kernel) with the 8-byte arguments args. Grid-
// stride kernels run as one thread covering everything; fp8_absmax, whose grid is the block
// grid, runs once per block.
typedef unsigned long long A;
#define P(T, i) reinterpret_cast<T>(args[i])
extern "C" int emu_launch(int k, unsigned gx, unsigned gy, const A *args) {
    emu_dims(1, 1, 0, 0);
    switch (k) {
    case 0: decode_bf16(P(float *, 0), P(const uint16_t *, 1), (i64)args[2]); return 0;
    case 1: decode_f16(P(float *, 0), P(const uint16_t *, 1), (i64)args[2]); return 0;
    case 2:
        dequant_fp8(P(float *, 0), P(const uint8_t *, 1), P(const float *, 2), P(const float *, 3),
                    (i64)args[4], (i64)args[5], (i64)args[6], (i64)args[7], (i64)args[8]);
        return 0;
    case 3: dequant_int4(P(float *, 0), P(const uint32_t *, 1), P(const float *, 2), (i64)args[3], (i64)args[4]); return 0;
    case 4: case 5: case 6: {
        void (*f)(uint32_t *, uint16_t *, GroupStats *, u64 *, const float *, i64, u64, const float *) =
            k == 4 ? int4_quant_g32 : k == 5 ? int4_quant_g64 : int4_quant_any;
        f(P(uint32_t *, 0), P(uint16_t *, 1), P(GroupStats *, 2), P(u64 *, 3), P(const float *, 4),
          (i64)args[5], args[6], P(const float *, 7));
        return 0;
    }
    case 7:
        for (unsigned by = 0; by < gy; by++) {
            for (unsigned bx = 0; bx < gx; bx++) {
                emu_dims(gx, gy, bx, by);
                fp8_absmax(P(float *, 0), P(u64 *, 1), P(const float *, 2), (i64)args[3], (i64)args[4]);
            }
        }
        return 0;
    case 8: fp8_quant(P(uint8_t *, 0), P(const float *, 1), P(const float *, 2), (i64)args[3], (i64)args[4]); return 0;
    case 9:
        err_partial(P(double *, 0), P(i64 *, 1), P(const float *, 2), P(const float *, 3), (i64)args[4], (i64)args[5]);
        return 0;
    case 10: chol_diag(P(float *, 0), P(u64 *, 1), (i64)args[2], (i64)args[3], (i64)args[4]); return 0;
    case 11: chol_panel(P(float *, 0), P(float *, 1), (i64)args[2], (i64)args[3], (i64)args[4]); return 0;
    case 12: chol_trail(P(float *, 0), P(const float *, 1), (i64)args[2], (i64)args[3], (i64)args[4]); return 0;
    case 13: chol_unit_upper(P(float *, 0), P(u64 *, 1), P(const float *, 2), (i64)args[3]); return 0;
    case 14: gptq_perm(P(float *, 0), P(const float *, 1), P(const i64 *, 2), (i64)args[3], (i64)args[4]); return 0;
    case 15:
        gptq_block(P(float *, 0), P(float *, 1), P(int8_t *, 2), P(u64 *, 3), P(const float *, 4), P(const i64 *, 5),
                   P(const float *, 6), P(const float *, 7), (i64)args[8], (i64)args[9], (i64)args[10], (i64)args[11],
                   (i64)args[12]);
        return 0;
    case 16:
        gptq_update(P(float *, 0), P(const float *, 1), P(const float *, 2), (i64)args[3], (i64)args[4], (i64)args[5],
                    (i64)args[6]);
        return 0;
    case 17: gptq_pack(P(uint8_t *, 0), P(const int8_t *, 1), (i64)args[2]); return 0;
    case 18:
        int4_quant_weighted(P(uint32_t *, 0), P(uint16_t *, 1), P(GroupStats *, 2), P(u64 *, 3), P(const float *, 4),
                            (i64)args[5], args[6], P(const float *, 7), P(const float *, 8), args[9], (i64)args[10]);
        return 0;
    }
    return -1;
}

extern "C" void emu_memset(A dst, int v, long long n) { memset(reinterpret_cast<void *>(dst), v, (size_t)n); }
