// An 8 x 8 transpose of floats in AVX2 registers, shared by the kernels that
// move data between channels-first rows and channels-last pixels.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_TRANSPOSE_AVX2_H_
#define JAX_GRIDSAMPLE_FFI_CPU_TRANSPOSE_AVX2_H_

#include "grid_sample_cpu.h"

#if GS_CPU_HAVE_AVX2_PATH
#include <immintrin.h>

namespace gs_cpu {

// out[s][r] = in[r][s].
__attribute__((target("avx2,fma"), always_inline)) inline void Transpose8x8(
    const __m256 (&in)[8], __m256 (&out)[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(in[0], in[1]);
  const __m256 t1 = _mm256_unpackhi_ps(in[0], in[1]);
  const __m256 t2 = _mm256_unpacklo_ps(in[2], in[3]);
  const __m256 t3 = _mm256_unpackhi_ps(in[2], in[3]);
  const __m256 t4 = _mm256_unpacklo_ps(in[4], in[5]);
  const __m256 t5 = _mm256_unpackhi_ps(in[4], in[5]);
  const __m256 t6 = _mm256_unpacklo_ps(in[6], in[7]);
  const __m256 t7 = _mm256_unpackhi_ps(in[6], in[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44);
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44);
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44);
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44);
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  out[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  out[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  out[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  out[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  out[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  out[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  out[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  out[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

}  // namespace gs_cpu

#endif  // GS_CPU_HAVE_AVX2_PATH
#endif  // JAX_GRIDSAMPLE_FFI_CPU_TRANSPOSE_AVX2_H_
