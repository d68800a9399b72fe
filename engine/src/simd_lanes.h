// 8-lane fp32 vectors for the engine's own CPU kernels (fused_ops.cpp, fused_train_ops.cpp,
// fused_layer_norm.cpp): GCC/Clang vector extensions, loads and stores of fp32 and bf16 (bf16
// widened exactly, rounded to nearest even on the way back), Cephes' expf and the run-time
// choice of an AVX2 copy of a kernel's loops. Internal to the engine; every helper is inlined
// into its caller.
#pragma once

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

// Why not at::vec::Vectorized: the engine is not compiled per CPU capability as ATen's kernels
// are (ATen's AVX2/AVX-512 Vectorized needs CPU_CAPABILITY_* and <sleef.h>, absent from Debian's
// libtorch-dev), so outside ATen Vectorized<float> is its generic 8-float array, which GCC 12
// scalarises lane by lane (loop-carried accumulators, NaN-checking max): the fused kernel built
// on it ran 2-3x slower than the unfused LibTorch ops (B=32, H=12, T=128, forward+backward).
// GCC/Clang vector extensions give the same 8 lanes in registers (one AVX2 register, two SSE ones),
// and the row loops are compiled a second time for AVX2 and picked at run time. Other compilers
// take the unfused composition.
#if defined(__GNUC__) || defined(__clang__)
#define TUPE_SIMD_LANES 1
#endif

// 32-byte vectors are passed in memory when AVX is off: a note GCC prints for the baseline copy
// at the end of the file (so no pop), irrelevant here since every helper is inlined.
#if defined(TUPE_SIMD_LANES) && defined(__clang__)
#pragma clang diagnostic ignored "-Wunknown-warning-option"
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(TUPE_SIMD_LANES)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#ifdef TUPE_SIMD_LANES

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace engine::lanes {

#define TUPE_INLINE __attribute__((always_inline)) inline

typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));  // lane masks: -1 true, 0 false
typedef uint32_t U8 __attribute__((vector_size(32)));
typedef uint16_t H8 __attribute__((vector_size(16)));
constexpr int64_t kLanes = 8;

// ---- lanes ------------------------------------------------------------------------------------

TUPE_INLINE F8 splat(float x) { return F8{x, x, x, x, x, x, x, x}; }

// m ? a : b lane by lane, as bit operations (a vector ?: on floats is scalarised by GCC 12).
TUPE_INLINE F8 select(const I8& m, const F8& a, const F8& b) {
    return (F8)(((I8)a & m) | ((I8)b & ~m));
}

// Running max: a NaN in x is not kept here, but it reaches exp and the row sum, so the whole
// row still comes out NaN, as torch::softmax gives it.
TUPE_INLINE F8 max8(const F8& x, const F8& m) { return select(x > m, x, m); }

TUPE_INLINE float sum_lanes(const F8& v) {
    float s = 0.0f;
    for (int k = 0; k < kLanes; ++k) s += v[k];
    return s;
}

TUPE_INLINE float max_lanes(const F8& v) {
    float m = v[0];
    for (int k = 1; k < kLanes; ++k) m = v[k] > m ? v[k] : m;
    return m;
}

// exp(x) for x <= 88.3 (softmax feeds it x - max <= 0): Cephes' expf (range reduction by ln 2,
// degree-6 polynomial, ~1 ulp). Accurate down to FLT_MIN (x = -87.3); flushes to zero by
// x = -87.7 (ATen's Sleef gives denormals down to 1e-45). NaN stays NaN.
TUPE_INLINE F8 exp8(const F8& in) {
    // At x = -88, n = -127 puts 0 in the exponent field: the scale below is exactly 0.
    const F8 x = select(in < splat(-88.0f), splat(-88.0f), in);
    // Adding 1.5 * 2^23 rounds x * log2(e) to the nearest integer n, held in t's low mantissa bits.
    const F8 t = x * splat(1.44269504088896341f) + splat(12582912.0f);
    const F8 n = t - splat(12582912.0f);
    F8 r = x - n * splat(0.693359375f);  // ln 2 in two parts (Cephes C1, C2): |r| <= ln2 / 2
    r = r - n * splat(-2.12194440e-4f);
    F8 p = splat(1.9875691500e-4f);
    p = p * r + splat(1.3981999507e-3f);
    p = p * r + splat(8.3334519073e-3f);
    p = p * r + splat(4.1665795894e-2f);
    p = p * r + splat(1.6666665459e-1f);
    p = p * r + splat(5.0000001201e-1f);
    p = p * r * r + r + splat(1.0f);
    // 2^n: bits(t) = 0x4B400000 + n, so n + 127 goes into the exponent field (n in [-127, 128]).
    const I8 biased = (I8)t - (0x4B400000 - 127);
    return p * (F8)(biased << 23);
}

// Loads 8 elements (or the first `count`, the rest zero) as fp32; bf16 widens exactly.
TUPE_INLINE F8 load(const float* p) {
    F8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
TUPE_INLINE F8 load(const c10::BFloat16* p) {
    H8 h;
    std::memcpy(&h, p, sizeof h);
    return (F8)(__builtin_convertvector(h, U8) << 16);
}
template <typename T>
TUPE_INLINE F8 load(const T* p, int64_t count) {
    T tmp[kLanes] = {};
    std::memcpy(tmp, p, count * sizeof(T));
    return load(tmp);
}

// Stores 8 lanes (or the first `count`); bf16 rounds to nearest even with NaN kept, exactly as
// c10::BFloat16(float) does.
TUPE_INLINE void store(const F8& v, float* p) { std::memcpy(p, &v, sizeof v); }
TUPE_INLINE void store(const F8& v, c10::BFloat16* p) {
    const U8 u = (U8)v;
    U8 r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const U8 nan = (U8)(v != v);
    r = (r & ~nan) | ((U8{} + 0x7FC0u) & nan);
    const H8 h = __builtin_convertvector(r, H8);
    std::memcpy(p, &h, sizeof h);
}
template <typename T>
TUPE_INLINE void store(const F8& v, T* p, int64_t count) {
    T tmp[kLanes];
    store(v, tmp);
    std::memcpy(p, tmp, count * sizeof(T));
}

// Whether to run a kernel's AVX2 copy: the CPU has AVX2 and ATEN_CPU_CAPABILITY is not
// "default" (ATen's own switch, which also lets the tests run the baseline copy).
inline bool use_avx2() {
#if defined(__x86_64__) || defined(__i386__)
    static const bool yes = [] {
        const char* env = std::getenv("ATEN_CPU_CAPABILITY");
        return __builtin_cpu_supports("avx2") && !(env && std::strcmp(env, "default") == 0);
    }();
    return yes;
#else
    return false;
#endif
}

// Square root lane by lane, correctly rounded (sqrtps, as std::sqrt): vector extensions have no
// sqrt, and std::sqrt in a loop stays scalar while errno is in play.
TUPE_INLINE F8 sqrt8(const F8& v) {
#if defined(__x86_64__)
    __m128 lo, hi;
    std::memcpy(&lo, &v, sizeof lo);
    std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
    lo = _mm_sqrt_ps(lo);
    hi = _mm_sqrt_ps(hi);
    F8 r;
    std::memcpy(&r, &lo, sizeof lo);
    std::memcpy(reinterpret_cast<char*>(&r) + sizeof lo, &hi, sizeof hi);
    return r;
#else
    F8 r;
    for (int k = 0; k < kLanes; ++k) r[k] = std::sqrt(v[k]);
    return r;
#endif
}

// ---- kernels compiled twice ---------------------------------------------------------------------

// A kernel K is a struct whose TUPE_INLINE run(i0, i1) does items [i0, i1). parallel_items runs
// it under at::parallel_for, in a copy compiled for AVX2 when use_avx2() or the baseline copy.
// Neither contracts a * b + c into an FMA, so both round alike; with Fma = true (the training
// step's kernels, engine/src/fused_train_rows.h) the AVX2 copy may, where the CPU has FMA, and
// then agrees with the baseline to the kernels' tolerances rather than bit for bit.
template <typename K>
void run_items_baseline(const K& k, int64_t i0, int64_t i1) {
    k.run(i0, i1);
}

#if defined(__x86_64__) || defined(__i386__)
#define TUPE_LANES_AVX2 1
template <typename K>
__attribute__((target("avx2"))) void run_items_avx2(const K& k, int64_t i0, int64_t i1) {
    k.run(i0, i1);
}
template <typename K>
__attribute__((target("avx2,fma"))) void run_items_avx2_fma(const K& k, int64_t i0, int64_t i1) {
    k.run(i0, i1);
}
#endif

inline bool use_avx2_fma() {
#ifdef TUPE_LANES_AVX2
    static const bool yes = use_avx2() && __builtin_cpu_supports("fma");
    return yes;
#else
    return false;
#endif
}

template <bool Fma = false, typename K>
void parallel_items(const K& k, int64_t items, int64_t grain) {
    const bool fast = Fma ? use_avx2_fma() : use_avx2();
    at::parallel_for(0, items, grain, [&](int64_t i0, int64_t i1) {
#ifdef TUPE_LANES_AVX2
        if (fast) {
            if constexpr (Fma)
                return run_items_avx2_fma(k, i0, i1);
            else
                return run_items_avx2(k, i0, i1);
        }
#endif
        run_items_baseline(k, i0, i1);
    });
}

}  // namespace engine::lanes

#endif  // TUPE_SIMD_LANES
