// CUDA kernels of the pdq quantizer. The Go package kernels (the CPU backend) is the
// specification: every kernel here reproduces its float32 operation order bit for bit.
//
//   - No contraction: every product, quotient and sum goes through an explicitly rounded
//     intrinsic (__fmul_rn, __fdiv_rn, __fadd_rn, __fsub_rn), and the PTX is built with
//     -fmad=false as a second guard.
//   - Group sums use eight lanes: lane j accumulates elements j, j+8, ... in index order; the
//     lanes combine as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
//   - Levels are clamped to [-8, 7] and rounded half to even with (v + 1.5*2^23) - 1.5*2^23,
//     exactly as the Go loops do, so the nibble is read from the same bit pattern.
//
// Every kernel parameter is 8 bytes wide (pointers, long long): the Go launcher copies exactly
// eight bytes per argument.
//
// Regenerate pdq.ptx with `make ptx` (nvcc -ptx -arch=compute_90 -fmad=false).

#include <stdint.h>

typedef long long i64;
typedef unsigned long long u64;

#define RNE 12582912.0f // 1.5 * 2^23
#define NO_BAD 0xffffffffffffffffull

// ---------------------------------------------------------------------------------------------
// Scalar helpers, each the twin of a Go function named in its comment.

// safetensors.Float32ToBF16
__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
    uint32_t b = __float_as_uint(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)(b >> 16) | 0x0040;
    }
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

// safetensors.RoundBF16
__device__ __forceinline__ float round_bf16(float f) {
    return __uint_as_float(((uint32_t)f32_to_bf16(f)) << 16);
}

// kernels.level: clamp to [-8, 7], then round half to even.
__device__ __forceinline__ float level(float v) {
    if (v < -8.0f) v = -8.0f;
    if (v > 7.0f) v = 7.0f;
    return __fsub_rn(__fadd_rn(v, RNE), RNE);
}

__device__ __forceinline__ float lanes(const float *l) {
    return __fadd_rn(__fadd_rn(__fadd_rn(l[0], l[1]), __fadd_rn(l[2], l[3])),
                     __fadd_rn(__fadd_rn(l[4], l[5]), __fadd_rn(l[6], l[7])));
}

// safetensors.f16Decode
__device__ __forceinline__ float f16_decode(uint32_t h) {
    uint32_t sign = (h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (man << 13));
    if (exp != 0) return __uint_as_float(sign | ((exp + 112) << 23) | (man << 13));
    float v = __fmul_rn((float)man, 1.0f / 16777216.0f);
    return __uint_as_float(sign | __float_as_uint(v));
}

// kernels.e4m3: float32 to e4m3fn, nearest even, saturating at 448; NaN gives 0x7f.
__device__ __forceinline__ uint8_t e4m3(float v) {
    uint32_t b = __float_as_uint(v);
    uint8_t sign = (uint8_t)(b >> 24) & 0x80;
    uint32_t a = b & 0x7fffffffu;
    if (a >= 0x43e00000u) {
        return a > 0x7f800000u ? (sign | 0x7f) : (sign | 0x7e);
    }
    if (a >= 0x3c800000u) {
        uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
        return sign | (uint8_t)((r >> 20) - (120u << 3));
    }
    float f = __fadd_rn(__fmul_rn(__uint_as_float(a), 512.0f), RNE);
    return sign | (uint8_t)(__float_as_uint(f) - 0x4b400000u);
}

// ---------------------------------------------------------------------------------------------
// (a) Source decode to float32.

// decode_bf16: dst[i] = bf16 code src[i] widened (exact).
extern "C" __global__ void decode_bf16(float *dst, const uint16_t *src, i64 n) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        dst[i] = __uint_as_float(((uint32_t)src[i]) << 16);
    }
}

// decode_f16: dst[i] = binary16 code src[i] widened (exact, NaN payload kept like the Go codec).
extern "C" __global__ void decode_f16(float *dst, const uint16_t *src, i64 n) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        dst[i] = f16_decode(src[i]);
    }
}

// dequant_fp8: dst[r][c] = table[codes[r][c]] * scale[(r+roff)/bh][c/bw] (one rounded product), the
// decode of an FP8-block source and kernels.DequantizeFP8Block. table holds the 256 float32
// values of the e4m3fn codes as the Go codec decodes them (NaN codes included). Grid: x along
// the columns, y strides the rows. roff is the chunk's first row modulo bh (scale starts at the
// scale row of the chunk's first row).
extern "C" __global__ void dequant_fp8(float *dst, const uint8_t *codes, const float *scale,
                                       const float *table, i64 rows, i64 cols, i64 bh, i64 bw,
                                       i64 roff) {
    __shared__ float t[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) t[i] = table[i];
    __syncthreads();
    i64 sc = (cols + bw - 1) / bw;
    for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *srow = scale + ((r + roff) / bh) * sc;
        for (i64 c = blockIdx.x * (i64)blockDim.x + threadIdx.x; c < cols; c += (i64)gridDim.x * blockDim.x) {
            dst[r * cols + c] = __fmul_rn(t[codes[r * cols + c]], srow[c / bw]);
        }
    }
}

// dequant_int4: dst = (nibble-8)*scale, kernels.DequantizeInt4. One thread per packed word.
extern "C" __global__ void dequant_int4(float *dst, const uint32_t *packed, const float *scales,
                                        i64 words, i64 words_per_group) {
    for (i64 w = blockIdx.x * (i64)blockDim.x + threadIdx.x; w < words; w += (i64)gridDim.x * blockDim.x) {
        float s = scales[w / words_per_group];
        uint32_t p = packed[w];
        float4 lo, hi;
        lo.x = __fmul_rn((float)((int)(p & 15) - 8), s);
        lo.y = __fmul_rn((float)((int)((p >> 4) & 15) - 8), s);
        lo.z = __fmul_rn((float)((int)((p >> 8) & 15) - 8), s);
        lo.w = __fmul_rn((float)((int)((p >> 12) & 15) - 8), s);
        hi.x = __fmul_rn((float)((int)((p >> 16) & 15) - 8), s);
        hi.y = __fmul_rn((float)((int)((p >> 20) & 15) - 8), s);
        hi.z = __fmul_rn((float)((int)((p >> 24) & 15) - 8), s);
        hi.w = __fmul_rn((float)((int)((p >> 28) & 15) - 8), s);
        reinterpret_cast<float4 *>(dst)[2 * w] = lo;
        reinterpret_cast<float4 *>(dst)[2 * w + 1] = hi;
    }
}

// ---------------------------------------------------------------------------------------------
// (b) INT4 group quantization: kernels.quantGroup and its loops.

// Group statistics, laid out like kernels.GroupStats (16 bytes).
struct GroupStats {
    float sum_sq, err, rtn_err;
    int clipped;
};

// err_sums: Σ(x-q·s)², Σx·q, Σq² with q = level(x/s) (div) or level(x·inv).
// With want_xq false only the first is computed (errDiv / errMul).
template <int G>
__device__ __forceinline__ void err_sums(const float *x, int g, float s, float inv, bool div,
                                         bool want_xq, float *e, float *xq, float *qq) {
    float le[8], lx[8], lq[8];
#pragma unroll
    for (int j = 0; j < 8; j++) le[j] = lx[j] = lq[j] = 0.0f;
    const int n = G > 0 ? G : g;
#pragma unroll
    for (int i = 0; i < n; i += 8) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float v = x[i + j];
            float q = level(div ? __fdiv_rn(v, s) : __fmul_rn(v, inv));
            float d = __fsub_rn(v, __fmul_rn(q, s));
            le[j] = __fadd_rn(le[j], __fmul_rn(d, d));
            if (want_xq) {
                lx[j] = __fadd_rn(lx[j], __fmul_rn(v, q));
                lq[j] = __fadd_rn(lq[j], __fmul_rn(q, q));
            }
        }
    }
    *e = lanes(le);
    if (want_xq) {
        *xq = lanes(lx);
        *qq = lanes(lq);
    }
}

// kernels.search; returns the best scale and whether its levels are the RTN ones (x/s).
template <int G>
__device__ float search(const float *x, int g, float a, float sR, const float *pos, int npos,
                        const float *neg, int nneg, int refine, bool sgn, bool *div_out,
                        float *rtn_err) {
    float dummy1, dummy2;
    float bestE;
    err_sums<G>(x, g, sR, 0.0f, true, false, &bestE, &dummy1, &dummy2);
    *rtn_err = bestE;
    float best = sR;
    bool div = true;
    float prev = 0.0f;
    for (int k = 0; k < npos; k++) {
        float s = round_bf16(__fmul_rn(a, pos[k]));
        if (s == prev || s == sR) continue;
        prev = s;
        float e;
        err_sums<G>(x, g, s, __fdiv_rn(1.0f, s), false, false, &e, &dummy1, &dummy2);
        if (e < bestE) {
            bestE = e;
            best = s;
            div = false;
        }
    }
    if (sgn && nneg > 0) {
        // kernels.extreme: the first element whose magnitude is a.
        float ext = a;
        const int n = G > 0 ? G : g;
        for (int i = 0; i < n; i++) {
            float v = x[i];
            if (v == a || v == -a) {
                ext = v;
                break;
            }
        }
        float sign = ext > 0.0f ? -1.0f : 1.0f;
        prev = 0.0f;
        for (int k = 0; k < nneg; k++) {
            float s = round_bf16(__fmul_rn(a, neg[k]));
            if (s == prev) continue;
            prev = s;
            s = __fmul_rn(s, sign);
            float e;
            err_sums<G>(x, g, s, __fdiv_rn(1.0f, s), false, false, &e, &dummy1, &dummy2);
            if (e < bestE) {
                bestE = e;
                best = s;
                div = false;
            }
        }
    }
    *div_out = div;
    if (refine <= 0) return best;
    float sxq, sqq;
    err_sums<G>(x, g, best, div ? 0.0f : __fdiv_rn(1.0f, best), div, true, &dummy1, &sxq, &sqq);
    for (int it = 0; it < refine; it++) {
        if (sqq == 0.0f) break;
        float s = round_bf16(__fdiv_rn(sxq, sqq));
        if (s == best || s == 0.0f || (!sgn && s < 0.0f)) break;
        float e, sxq2, sqq2;
        err_sums<G>(x, g, s, __fdiv_rn(1.0f, s), false, true, &e, &sxq2, &sqq2);
        if (!(e < bestE)) break;
        bestE = e;
        best = s;
        div = false;
        sxq = sxq2;
        sqq = sqq2;
    }
    *div_out = div;
    return best;
}

// kernels.pack (packDiv / packMul): writes the nibbles, returns the statistics.
template <int G>
__device__ GroupStats pack(uint32_t *dst, const float *x, int g, float s, bool div) {
    float inv = div ? 0.0f : __fdiv_rn(1.0f, s);
    float le[8], ls[8];
    int clip = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) le[j] = ls[j] = 0.0f;
    const int n = G > 0 ? G : g;
#pragma unroll
    for (int i = 0; i < n; i += 8) {
        uint32_t w = 0;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float v = x[i + j];
            float f = div ? __fdiv_rn(v, s) : __fmul_rn(v, inv);
            if (f >= 7.5f || f < -8.5f) clip++;
            if (f < -8.0f) f = -8.0f;
            if (f > 7.0f) f = 7.0f;
            float r = __fadd_rn(f, RNE);
            float d = __fsub_rn(v, __fmul_rn(__fsub_rn(r, RNE), s));
            w |= ((__float_as_uint(r) + 8u) & 15u) << (4 * j);
            le[j] = __fadd_rn(le[j], __fmul_rn(d, d));
            ls[j] = __fadd_rn(ls[j], __fmul_rn(v, v));
        }
        dst[i / 8] = w;
    }
    GroupStats st;
    st.sum_sq = lanes(ls);
    st.err = lanes(le);
    st.rtn_err = 0.0f;
    st.clipped = clip;
    return st;
}

// Parameters of int4_quant, packed into 8-byte kernel arguments by the host:
//   shape = groups | (group size << 40)
//   mode  = search (0 rtn, 1 mse) | signed << 8 | refine << 16 | npos << 32 | nneg << 48
//   cand  = device array of npos positive then nneg negative multipliers (float32)
template <int G>
__device__ void int4_group(uint32_t *packed, uint16_t *scales, GroupStats *stats, u64 *bad,
                           const float *src, i64 k, int g, u64 mode, const float *cand) {
    const float *xg = src + k * (i64)g;
    float buf[G > 0 ? G : 8];
    const float *x = xg;
    if (G > 0) {
        // Small groups live in registers: one load each, then every candidate pass reads them.
        const float4 *v4 = reinterpret_cast<const float4 *>(xg);
#pragma unroll
        for (int i = 0; i < (G > 0 ? G : 8) / 4; i++) {
            float4 v = v4[i];
            buf[4 * i] = v.x;
            buf[4 * i + 1] = v.y;
            buf[4 * i + 2] = v.z;
            buf[4 * i + 3] = v.w;
        }
        x = buf;
    }
    const int n = G > 0 ? G : g;
    uint32_t ab = 0;
#pragma unroll
    for (int i = 0; i < n; i++) ab = max(ab, __float_as_uint(x[i]) & 0x7fffffffu);
    uint32_t *dst = packed + k * (i64)(g / 8);
    if (ab >= 0x7f800000u) {
        for (int i = 0; i < n; i++) {
            if ((__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u) {
                atomicMin(bad, (u64)(k * (i64)g + i));
                break;
            }
        }
        return;
    }
    float a = __uint_as_float(ab);
    float sR = round_bf16(__fdiv_rn(a, 7.5f));
    GroupStats st;
    float s = sR;
    if (sR == 0.0f) {
        float ls[8];
#pragma unroll
        for (int j = 0; j < 8; j++) ls[j] = 0.0f;
#pragma unroll
        for (int i = 0; i < n; i += 8) {
#pragma unroll
            for (int j = 0; j < 8; j++) ls[j] = __fadd_rn(ls[j], __fmul_rn(x[i + j], x[i + j]));
            dst[i / 8] = 0x88888888u;
        }
        float ss = lanes(ls);
        st.sum_sq = st.err = st.rtn_err = ss;
        st.clipped = 0;
        s = 0.0f;
    } else {
        bool div = true;
        float rtn_err = 0.0f;
        bool searched = (mode & 0xff) == 1 && a >= 0x1p-64f;
        if (searched) {
            int npos = (int)((mode >> 32) & 0xffff);
            int nneg = (int)((mode >> 48) & 0xffff);
            bool sgn = ((mode >> 8) & 0xff) != 0;
            int refine = (int)((mode >> 16) & 0xffff);
            s = search<G>(x, g, a, sR, cand, npos, cand + npos, nneg, refine, sgn, &div, &rtn_err);
        }
        st = pack<G>(dst, x, g, s, div);
        st.rtn_err = searched ? rtn_err : st.err;
    }
    scales[k] = f32_to_bf16(s);
    stats[k] = st;
}

#define INT4_KERNEL(name, G)                                                                    \
    extern "C" __global__ void name(uint32_t *packed, uint16_t *scales, GroupStats *stats,      \
                                    u64 *bad, const float *src, i64 shape, u64 mode,            \
                                    const float *cand) {                                        \
        i64 groups = shape & ((1ll << 40) - 1);                                                 \
        int g = (int)(shape >> 40);                                                             \
        for (i64 k = blockIdx.x * (i64)blockDim.x + threadIdx.x; k < groups;                    \
             k += (i64)gridDim.x * blockDim.x) {                                                \
            int4_group<G>(packed, scales, stats, bad, src, k, g, mode, cand);                  \
        }                                                                                       \
    }

INT4_KERNEL(int4_quant_g32, 32)
INT4_KERNEL(int4_quant_g64, 64)
INT4_KERNEL(int4_quant_any, 0)

// ---------------------------------------------------------------------------------------------
// (b2) Weighted INT4: kernels.CPU.QuantizeInt4Weighted (quantGroupWeighted, searchWeighted).

// w_sums: kernels.wSums: Σw(x−q·s)², Σw·x·q, Σw·q² in the eight-lane order, q = level(x/s)
// (div) or level(x·inv); products rounded one at a time: w·(d·d), (w·x)·q, (w·q)·q.
__device__ __forceinline__ void w_sums(const float *x, const float *w, int g, float s, float inv, bool div,
                                       float *e, float *xq, float *qq) {
    float le[8], lx[8], lq[8];
    for (int j = 0; j < 8; j++) le[j] = lx[j] = lq[j] = 0.0f;
    for (int i = 0; i < g; i++) {
        float v = x[i];
        float q = level(div ? __fdiv_rn(v, s) : __fmul_rn(v, inv));
        float d = __fsub_rn(v, __fmul_rn(q, s));
        float wi = w[i];
        le[i & 7] = __fadd_rn(le[i & 7], __fmul_rn(wi, __fmul_rn(d, d)));
        lx[i & 7] = __fadd_rn(lx[i & 7], __fmul_rn(__fmul_rn(wi, v), q));
        lq[i & 7] = __fadd_rn(lq[i & 7], __fmul_rn(__fmul_rn(wi, q), q));
    }
    *e = lanes(le);
    *xq = lanes(lx);
    *qq = lanes(lq);
}

// Weighted search state: the best error, scale, level form and its sums (searchWeighted's try).
struct WBest {
    float e, s, xq, qq;
    bool div;
};

__device__ __forceinline__ bool w_try(WBest *b, const float *x, const float *w, int g, float s) {
    float e, xq, qq;
    w_sums(x, w, g, s, __fdiv_rn(1.0f, s), false, &e, &xq, &qq);
    if (e < b->e) {
        b->e = e;
        b->s = s;
        b->div = false;
        b->xq = xq;
        b->qq = qq;
        return true;
    }
    return false;
}

// int4_quant_weighted: one group per thread, column weights d (one per column, gpr groups per
// row). mode as int4_quant; cand = Pos, Neg, WPos; wmode = len(WPos) | WFineN << 16 |
// bits(WFine) << 32.
extern "C" __global__ void int4_quant_weighted(uint32_t *packed, uint16_t *scales, GroupStats *stats, u64 *bad,
                                               const float *src, i64 shape, u64 mode, const float *cand,
                                               const float *d, u64 wmode, i64 gpr) {
    i64 groups = shape & ((1ll << 40) - 1);
    int g = (int)(shape >> 40);
    int npos = (int)((mode >> 32) & 0xffff), nneg = (int)((mode >> 48) & 0xffff);
    bool sgn = ((mode >> 8) & 0xff) != 0;
    int refine = (int)((mode >> 16) & 0xffff);
    int nw = (int)(wmode & 0xffff), nfine = (int)((wmode >> 16) & 0xffff);
    float wfine = __uint_as_float((uint32_t)(wmode >> 32));
    const float *pos = cand, *neg = cand + npos, *wpos = cand + npos + nneg;
    for (i64 k = blockIdx.x * (i64)blockDim.x + threadIdx.x; k < groups; k += (i64)gridDim.x * blockDim.x) {
        const float *x = src + k * (i64)g;
        const float *w = d + (k % gpr) * (i64)g;
        uint32_t *dst = packed + k * (i64)(g / 8);
        uint32_t ab = 0;
        for (int i = 0; i < g; i++) ab = max(ab, __float_as_uint(x[i]) & 0x7fffffffu);
        if (ab >= 0x7f800000u) {
            for (int i = 0; i < g; i++) {
                if ((__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u) {
                    atomicMin(bad, (u64)(k * (i64)g + i));
                    break;
                }
            }
            continue;
        }
        float a = __uint_as_float(ab);
        float sR = round_bf16(__fdiv_rn(a, 7.5f));
        GroupStats st;
        float s = sR;
        if (sR == 0.0f) {
            float ls[8];
            for (int j = 0; j < 8; j++) ls[j] = 0.0f;
            for (int i = 0; i < g; i++) ls[i & 7] = __fadd_rn(ls[i & 7], __fmul_rn(x[i], x[i]));
            for (int i = 0; i < g; i += 8) dst[i / 8] = 0x88888888u;
            float ss = lanes(ls);
            st.sum_sq = st.err = st.rtn_err = ss;
            st.clipped = 0;
            s = 0.0f;
        } else {
            bool searched = (mode & 0xff) == 1 && a >= 0x1p-64f;
            WBest b;
            b.s = sR;
            b.div = true;
            if (searched) {
                w_sums(x, w, g, sR, 0.0f, true, &b.e, &b.xq, &b.qq);
                float prev = 0.0f;
                bool uniform = true;
                for (int i = 1; i < g; i++) uniform = uniform && w[i] == w[0];
                if (uniform || nw == 0) {
                    for (int j = 0; j < npos; j++) {
                        float c = round_bf16(__fmul_rn(a, pos[j]));
                        if (c == prev || c == sR) continue;
                        prev = c;
                        w_try(&b, x, w, g, c);
                    }
                } else {
                    float kBest = 1.0f / 7.5f;
                    for (int j = 0; j < nw; j++) {
                        float c = round_bf16(__fmul_rn(a, wpos[j]));
                        if (c == prev || c == sR) continue;
                        prev = c;
                        if (w_try(&b, x, w, g, c)) kBest = wpos[j];
                    }
                    for (int i = 1; i <= nfine; i++) {
                        float step = __fmul_rn((float)i, wfine);
                        float ks[2] = {__fsub_rn(kBest, step), __fadd_rn(kBest, step)};
                        for (int t = 0; t < 2; t++) {
                            float c = round_bf16(__fmul_rn(a, ks[t]));
                            if (c > 0.0f && c != b.s && c != sR) w_try(&b, x, w, g, c);
                        }
                    }
                }
                if (sgn && nneg > 0) {
                    float ext = a;
                    for (int i = 0; i < g; i++) {
                        if (x[i] == a || x[i] == -a) {
                            ext = x[i];
                            break;
                        }
                    }
                    float sign = ext > 0.0f ? -1.0f : 1.0f;
                    prev = 0.0f;
                    for (int j = 0; j < nneg; j++) {
                        float c = round_bf16(__fmul_rn(a, neg[j]));
                        if (c == prev) continue;
                        prev = c;
                        w_try(&b, x, w, g, __fmul_rn(sign, c));
                    }
                }
                for (int it = 0; it < refine; it++) {
                    if (b.qq == 0.0f) break;
                    float c = round_bf16(__fdiv_rn(b.xq, b.qq));
                    if (c == b.s || c == 0.0f || (!sgn && c < 0.0f)) break;
                    if (!w_try(&b, x, w, g, c)) break;
                }
            }
            s = b.s;
            st = pack<0>(dst, x, g, s, b.div);
            if (!searched || b.div) {
                st.rtn_err = st.err;
            } else {
                float e, d1, d2;
                err_sums<0>(x, g, sR, 0.0f, true, false, &e, &d1, &d2);
                st.rtn_err = e;
            }
        }
        scales[k] = f32_to_bf16(s);
        stats[k] = st;
    }
}

// ---------------------------------------------------------------------------------------------
// (c) FP8 e4m3 128x128 block quantization: kernels.CPU.QuantizeFP8Block.

// fp8_absmax: one thread block per 128x128 block (grid: block columns x block rows) computes
// scale = absmax/448 (1 for an all-zero block). A non-finite element records, in *bad, the key
// ((block row * block cols + block col) * 128 + row in block) * 128 + column in block of the
// first one in the CPU's search order; the host turns it into the element index.
extern "C" __global__ void fp8_absmax(float *scale, u64 *bad, const float *src, i64 rows, i64 cols) {
    __shared__ uint32_t part[256];
    i64 bj = blockIdx.x, bi = blockIdx.y, bc = gridDim.x;
    i64 r0 = bi * 128, c0 = bj * 128;
    int h = (int)min((i64)128, rows - r0), w = (int)min((i64)128, cols - c0);
    uint32_t m = 0;
    for (int i = threadIdx.x; i < h * 128; i += blockDim.x) {
        int r = i >> 7, c = i & 127;
        if (c < w) m = max(m, __float_as_uint(src[(r0 + r) * cols + c0 + c]) & 0x7fffffffu);
    }
    part[threadIdx.x] = m;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) part[threadIdx.x] = max(part[threadIdx.x], part[threadIdx.x + o]);
        __syncthreads();
    }
    uint32_t ab = part[0];
    if (ab >= 0x7f800000u) {
        for (int i = threadIdx.x; i < h * 128; i += blockDim.x) {
            int r = i >> 7, c = i & 127;
            if (c < w && (__float_as_uint(src[(r0 + r) * cols + c0 + c]) & 0x7f800000u) == 0x7f800000u) {
                atomicMin(bad, (u64)(((bi * bc + bj) * 128 + r) * 128 + c));
            }
        }
        return;
    }
    if (threadIdx.x == 0) {
        float s = __fdiv_rn(__uint_as_float(ab), 448.0f);
        if (s == 0.0f) s = 1.0f;
        scale[bi * bc + bj] = s;
    }
}

// fp8_quant: codes = e4m3(x / scale[block]). Grid: x along the columns, y strides the rows.
extern "C" __global__ void fp8_quant(uint8_t *codes, const float *scale, const float *src, i64 rows, i64 cols) {
    i64 bc = (cols + 127) / 128;
    for (i64 r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *srow = scale + (r >> 7) * bc;
        for (i64 c = blockIdx.x * (i64)blockDim.x + threadIdx.x; c < cols; c += (i64)gridDim.x * blockDim.x) {
            codes[r * cols + c] = e4m3(__fdiv_rn(src[r * cols + c], srow[c >> 7]));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (d) Error-metric partial sums: kernels.CPU.ErrorSums over chunks.
//
// Each thread sums one chunk of `chunk` consecutive elements sequentially in float64 (no fused
// multiply-add), exactly as the CPU loop does; the host adds the chunk sums in chunk order. The
// only difference from the sequential CPU sum is where the float64 additions are grouped, so
// the sums can differ in their last bits (bounded, see the Go side); N, MaxAbsErr and
// MaxAbsIdx are exact. out holds 6 doubles per chunk: Σref², Σerr², Σ|err|, Σref·got, Σgot²,
// max|err|, then (after all chunks' doubles) one int64 index per chunk.
extern "C" __global__ void err_partial(double *out, i64 *idx, const float *ref, const float *got, i64 n, i64 chunk) {
    i64 chunks = (n + chunk - 1) / chunk;
    for (i64 k = blockIdx.x * (i64)blockDim.x + threadIdx.x; k < chunks; k += (i64)gridDim.x * blockDim.x) {
        i64 i0 = k * chunk, i1 = min(n, i0 + chunk);
        double srr = 0, see = 0, sae = 0, dot = 0, sgg = 0, mx = 0;
        i64 mi = -1;
        for (i64 i = i0; i < i1; i++) {
            double r = ref[i], g = got[i];
            double e = __dsub_rn(g, r);
            double a = fabs(e);
            srr = __dadd_rn(srr, __dmul_rn(r, r));
            see = __dadd_rn(see, __dmul_rn(e, e));
            sae = __dadd_rn(sae, a);
            dot = __dadd_rn(dot, __dmul_rn(r, g));
            sgg = __dadd_rn(sgg, __dmul_rn(g, g));
            if (a > mx || mi < 0) {
                mx = a;
                mi = i;
            }
        }
        double *o = out + 6 * k;
        o[0] = srr;
        o[1] = see;
        o[2] = sae;
        o[3] = dot;
        o[4] = sgg;
        o[5] = mx;
        idx[k] = mi;
    }
}

// ---------------------------------------------------------------------------------------------
// (e) GPTQ (calib/gptq.go): the Cholesky factorization of the reversed, dampened Hessian, its
// turn into the unit upper N, and the column loop. Matrix products follow kernels.MatMulAddF32:
// each element of C is updated once per block of 128 inner indices, C += t (float32), where t
// starts at 0 and accumulates a·b in index order with fused multiply-adds rounded once to
// float32 (__fmaf_rn, the Go fma32); AxpyF32 is y = fma32(a, x, y). The diagonal blocks of the
// factorization sum in float64 as the Go loop does (the float32 products are exact in float64).
// flag is set to 1 when the matrix is not numerically positive definite (or N not finite).

#define GEMM_KC 128

// chol_diag factorizes the diagonal block [j0, j0+w) of the k×k matrix a (row-major float32,
// lower triangle) in place: one thread block; column after column, the rows below in parallel.
extern "C" __global__ void chol_diag(float *a, u64 *flag, i64 k, i64 j0, i64 w) {
    __shared__ double l;
    __shared__ int fail;
    i64 j1 = j0 + w;
    for (i64 c = j0; c < j1; c++) {
        if (threadIdx.x == 0) {
            double d = (double)a[c * k + c];
            for (i64 p = j0; p < c; p++) {
                double x = (double)a[c * k + p];
                d = __dsub_rn(d, __dmul_rn(x, x));
            }
            fail = !(d > 0) || isinf(d);
            if (fail) {
                *flag = 1;
            } else {
                l = __dsqrt_rn(d);
                a[c * k + c] = (float)l;
            }
        }
        __syncthreads();
        if (fail) return;
        for (i64 r = c + 1 + threadIdx.x; r < j1; r += blockDim.x) {
            double s = (double)a[r * k + c];
            for (i64 p = j0; p < c; p++) {
                s = __dsub_rn(s, __dmul_rn((double)a[r * k + p], (double)a[c * k + p]));
            }
            a[r * k + c] = (float)__ddiv_rn(s, l);
        }
        __syncthreads();
    }
}

// chol_panel solves the panel below the diagonal block: for each row r ≥ j0+w, its columns
// [j0, j0+w) as x: x_p /= L_pp, then x_c = fma32(-L_cp, x_p, x_c) for c > p, in p order. The
// solved panel also goes to bt transposed (w × m, m = k−j0−w), for coalesced reads in chol_trail.
extern "C" __global__ void chol_panel(float *a, float *bt, i64 k, i64 j0, i64 w) {
    float x[GEMM_KC];
    i64 j1 = j0 + w, m = k - j1;
    for (i64 r = j1 + blockIdx.x * (i64)blockDim.x + threadIdx.x; r < k; r += (i64)gridDim.x * blockDim.x) {
        float *row = a + r * k + j0;
        for (i64 p = 0; p < w; p++) x[p] = row[p];
        for (i64 p = 0; p < w; p++) {
            x[p] = __fdiv_rn(x[p], a[(j0 + p) * k + j0 + p]);
            for (i64 c = p + 1; c < w; c++) {
                x[c] = __fmaf_rn(-a[(j0 + c) * k + j0 + p], x[p], x[c]);
            }
        }
        for (i64 p = 0; p < w; p++) {
            row[p] = x[p];
            bt[p * m + (r - j1)] = x[p];
        }
    }
}

// chol_trail updates the trailing matrix A22 −= L21·L21ᵀ, elements on or below the diagonal,
// as kernels.MatMulAddF32(sub, lower); L21 is read from its transpose bt (chol_panel).
// Consecutive threads take consecutive columns j of one row i.
extern "C" __global__ void chol_trail(float *a, const float *bt, i64 k, i64 j0, i64 w) {
    i64 j1 = j0 + w, m = k - j1;
    i64 total = m * m;
    for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e < total; e += (i64)gridDim.x * blockDim.x) {
        i64 i = e / m, j = e % m;
        if (j > i) continue;
        float c = a[(j1 + i) * k + j1 + j];
        for (i64 p0 = 0; p0 < w; p0 += GEMM_KC) {
            float t = 0;
            for (i64 p = p0; p < min(w, p0 + GEMM_KC); p++) t = __fmaf_rn(-bt[p * m + i], bt[p * m + j], t);
            c = __fadd_rn(c, t);
        }
        a[(j1 + i) * k + j1 + j] = c;
    }
}

// chol_unit_upper writes N (k×k, unit upper triangular, processing order) from the factor L of
// the reversed matrix: T[i][j] = L[k-1-i][k-1-j], N[i][j] = T[i][j]/T[j][j] (reverseToUnitUpper).
extern "C" __global__ void chol_unit_upper(float *n, u64 *flag, const float *a, i64 k) {
    i64 total = k * k;
    for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e < total; e += (i64)gridDim.x * blockDim.x) {
        i64 i = e / k, j = e % k;
        float v = 0;
        if (j == i) {
            float d = a[(k - 1 - i) * k + (k - 1 - i)];
            if (!(d > 0) || isinf(d)) *flag = 1;
            v = 1;
        } else if (j > i) {
            float d = a[(k - 1 - j) * k + (k - 1 - j)];
            v = __fdiv_rn(a[(k - 1 - i) * k + (k - 1 - j)], d);
            if (isnan(v) || isinf(v)) *flag = 1;
        }
        n[e] = v;
    }
}

// The working copies are column-major so that the threads of a warp (consecutive rows) touch
// consecutive addresses: wk[i·rows + r] is row r's compensated weight in processing position i,
// ek[(i−b0)·rows + r] its error in the current block.

// gptq_perm copies the rows of w into processing order: wk[i][r] = w[r][perm[i]].
extern "C" __global__ void gptq_perm(float *wk, const float *w, const i64 *perm, i64 rows, i64 k) {
    i64 total = rows * k;
    for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e < total; e += (i64)gridDim.x * blockDim.x) {
        i64 i = e / rows, r = e % rows;
        wk[e] = w[r * k + perm[i]];
    }
}

// gptq_block quantizes columns [b0, b1) of every row (one thread per row), column after column:
// level of w'/s, the error w − q·s into ek, and its spread over the block's later columns
// (Factor.chunk). clipped[r] counts the row's levels outside [-8, 7].
extern "C" __global__ void gptq_block(float *wk, float *ek, int8_t *lv, u64 *clipped, const float *w,
                                      const i64 *perm, const float *scales, const float *nn, i64 rows,
                                      i64 k, i64 b0, i64 b1, i64 g) {
    i64 ng = k / g;
    for (i64 r = blockIdx.x * (i64)blockDim.x + threadIdx.x; r < rows; r += (i64)gridDim.x * blockDim.x) {
        u64 cl = clipped[r];
        for (i64 i = b0; i < b1; i++) {
            i64 c = perm[i];
            float s = scales[r * ng + c / g];
            float q = 0;
            if (s != 0) {
                float v = __fdiv_rn(wk[i * rows + r], s);
                if (v >= 7.5f || v < -8.5f) cl++;
                q = level(v);
            }
            lv[r * k + c] = (int8_t)q;
            float e = __fsub_rn(w[r * k + c], __fmul_rn(q, s));
            ek[(i - b0) * rows + r] = e;
            if (e != 0) {
                const float *ni = nn + i * k;
                for (i64 j = i + 1; j < b1; j++) wk[j * rows + r] = __fmaf_rn(e, ni[j], wk[j * rows + r]);
            }
        }
        clipped[r] = cl;
    }
}

// gptq_update spreads a block's errors over the later columns: wk[b1:][:] += (ek·N[b0:b1, b1:])ᵀ
// (kernels.MatMulAddF32); consecutive threads take consecutive rows of one column.
extern "C" __global__ void gptq_update(float *wk, const float *ek, const float *nn, i64 rows, i64 k, i64 b0, i64 b1) {
    i64 nb = b1 - b0, cols = k - b1, total = rows * cols;
    for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e < total; e += (i64)gridDim.x * blockDim.x) {
        i64 r = e % rows, j = b1 + e / rows;
        float c = wk[j * rows + r];
        for (i64 p0 = 0; p0 < nb; p0 += GEMM_KC) {
            float t = 0;
            for (i64 p = p0; p < min(nb, p0 + GEMM_KC); p++) t = __fmaf_rn(ek[p * rows + r], nn[(b0 + p) * k + j], t);
            c = __fadd_rn(c, t);
        }
        wk[j * rows + r] = c;
    }
}

// gptq_pack writes levels in [-8, 7] as nibbles q+8, two per byte, low nibble first.
extern "C" __global__ void gptq_pack(uint8_t *packed, const int8_t *lv, i64 bytes) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < bytes; i += (i64)gridDim.x * blockDim.x) {
        packed[i] = (uint8_t)((lv[2 * i] + 8) | ((lv[2 * i + 1] + 8) << 4));
    }
}
