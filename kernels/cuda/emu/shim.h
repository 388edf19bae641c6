// Host definitions of the CUDA built-ins pdq.cu uses, so that the same kernel source compiles
// as C++ and runs on the CPU, one thread per launch (every kernel loops over its work with
// grid strides, and fp8_absmax reduces correctly with one thread per block). Each intrinsic is
// the plain IEEE operation; kernels.cc turns floating-point contraction off, so no product is fused
// into an addition, exactly as on the GPU.
#include <math.h>
#include <stdint.h>
#include <string.h>

struct emu_dim3 {
    unsigned x, y, z;
};
static emu_dim3 blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0};
static emu_dim3 blockDim = {1, 1, 1}, gridDim = {1, 1, 1};

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

struct float4 {
    float x, y, z, w;
};

static inline void __syncthreads() {}
static inline float __uint_as_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t __float_as_uint(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dsqrt_rn(double a) { return sqrt(a); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v) {
    unsigned long long old = *p;
    if (v < old) *p = v;
    return old;
}
static inline uint32_t max(uint32_t a, uint32_t b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }

extern "C" void emu_dims(unsigned gx, unsigned gy, unsigned bx, unsigned by) {
    gridDim.x = gx;
    gridDim.y = gy;
    blockIdx.x = bx;
    blockIdx.y = by;
}
