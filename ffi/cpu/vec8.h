// F8: 8 floats as one value (GCC / Clang vector extensions), with the few
// operations the vector kernels need, written once for every target: one
// AVX register where the function is compiled for AVX2 + FMA, two NEON (or
// SSE) registers elsewhere.
//
// Each lane computes what the scalar code computes: a * b + c is a
// multiply, then an add (contraction is off for the kernels), and Fma is
// std::fma lane by lane, a vector fused multiply-add (NEON's, or AVX2's).
// The only file of the CPU kernels with instruction-set intrinsics: each
// has a portable form beside it (#else), the one aarch64 builds (but for
// Fma, which has NEON's there), so the suite run on aarch64 checks them.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_VEC8_H_
#define JAX_GRIDSAMPLE_FFI_CPU_VEC8_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "grid_sample_cpu.h"

#if GS_CPU_HAVE_AVX2_PATH
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace gs_cpu {

typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));

GS_CPU_VECTOR_INLINE F8 Load8(const float* p) {
  F8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

GS_CPU_VECTOR_INLINE void Store8(float* p, F8 v) { std::memcpy(p, &v, sizeof v); }

// 8 floats at p (32-byte aligned): a non-temporal store on x86-64 (see
// output_store.h), an ordinary one elsewhere.
GS_CPU_VECTOR_INLINE void StreamStore8(float* p, F8 v) {
#if GS_CPU_HAVE_AVX2_PATH
  _mm256_stream_ps(p, v);
#else
  Store8(p, v);
#endif
}

// Orders earlier non-temporal stores before later stores.
GS_CPU_VECTOR_INLINE void StreamFence() {
#if GS_CPU_HAVE_AVX2_PATH
  _mm_sfence();
#endif
}

GS_CPU_VECTOR_INLINE I8 LoadI8(const int32_t* p) {
  I8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The first n (0 to 8) floats at p, the other lanes zero; reads nothing past
// p + n (on x86-64 a masked load).
GS_CPU_VECTOR_INLINE F8 LoadFirst(const float* p, int64_t n) {
#if GS_CPU_HAVE_AVX2_PATH
  const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(n)),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_maskload_ps(p, lanes);
#else
  F8 v = {};
  for (int i = 0; i < 8; ++i) v[i] = i < n ? p[i] : 0.f;
  return v;
#endif
}

GS_CPU_VECTOR_INLINE F8 Broadcast8(float x) { return F8{} + x; }

// src[off[i]] in lane i, 0 where off[i] < 0 (nothing is read there): AVX2's
// masked gather, or one load per lane.
GS_CPU_VECTOR_INLINE F8 Gather8(const float* src, const int32_t* off) {
#if GS_CPU_HAVE_AVX2_PATH
  const __m256i o = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(off));
  const __m256 in_range = _mm256_castsi256_ps(_mm256_cmpgt_epi32(o, _mm256_set1_epi32(-1)));
  return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), src, o, in_range, 4);
#else
  F8 v;
  for (int i = 0; i < 8; ++i) v[i] = off[i] >= 0 ? src[off[i]] : 0.f;
  return v;
#endif
}

// a * b + c, lane by lane, rounded once (on x86-64 one instruction from the
// start, so that loops around it unroll as they would around a multiply).
GS_CPU_VECTOR_INLINE F8 Fma(F8 a, F8 b, F8 c) {
#if GS_CPU_HAVE_AVX2_PATH
  return _mm256_fmadd_ps(a, b, c);
#elif defined(__aarch64__)
  typedef float F4 __attribute__((vector_size(16)));
  auto half = [&](int h) {
    const F4 a4 = h == 0 ? __builtin_shufflevector(a, a, 0, 1, 2, 3)
                         : __builtin_shufflevector(a, a, 4, 5, 6, 7);
    const F4 b4 = h == 0 ? __builtin_shufflevector(b, b, 0, 1, 2, 3)
                         : __builtin_shufflevector(b, b, 4, 5, 6, 7);
    const F4 c4 = h == 0 ? __builtin_shufflevector(c, c, 0, 1, 2, 3)
                         : __builtin_shufflevector(c, c, 4, 5, 6, 7);
    return (F4)vfmaq_f32((float32x4_t)c4, (float32x4_t)a4, (float32x4_t)b4);
  };
  return __builtin_shufflevector(half(0), half(1), 0, 1, 2, 3, 4, 5, 6, 7);
#else
  F8 r;
  for (int i = 0; i < 8; ++i) r[i] = std::fma(a[i], b[i], c[i]);
  return r;
#endif
}

// gs::FillTerm lane by lane: fill * outside, +0 where outside is 0.
GS_CPU_VECTOR_INLINE F8 FillTerm8(F8 fill, F8 outside) {
  return (F8)((I8)(fill * outside) & (outside != 0.f));
}

// out[s][r] = in[r][s].
GS_CPU_VECTOR_INLINE void Transpose8x8(const F8 (&in)[8], F8 (&out)[8]) {
  F8 t[8], u[8];
  for (int i = 0; i < 4; ++i) {  // interleave rows 2i and 2i + 1
    t[2 * i] = __builtin_shufflevector(in[2 * i], in[2 * i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[2 * i + 1] = __builtin_shufflevector(in[2 * i], in[2 * i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 2; ++i) {  // pairs of pairs
    for (int j = 0; j < 2; ++j) {
      const F8 a = t[4 * i + j], b = t[4 * i + j + 2];
      u[4 * i + 2 * j] = __builtin_shufflevector(a, b, 0, 1, 8, 9, 4, 5, 12, 13);
      u[4 * i + 2 * j + 1] = __builtin_shufflevector(a, b, 2, 3, 10, 11, 6, 7, 14, 15);
    }
  }
  for (int i = 0; i < 4; ++i) {  // halves
    out[i] = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    out[i + 4] = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_VEC8_H_
