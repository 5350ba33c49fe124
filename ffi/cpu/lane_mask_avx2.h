// The mask of an AVX2 vector's first lanes, for the masked loads and stores
// of a run's last (n % 8) floats.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_LANE_MASK_AVX2_H_
#define JAX_GRIDSAMPLE_FFI_CPU_LANE_MASK_AVX2_H_

#include <cstdint>

#include "grid_sample_cpu.h"

#if GS_CPU_HAVE_AVX2_PATH
#include <immintrin.h>

namespace gs_cpu {

// All ones in lanes l < n, zero in the others (n from 0 to 8).
__attribute__((target("avx2,fma"))) inline __m256i FirstLanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace gs_cpu

#endif  // GS_CPU_HAVE_AVX2_PATH
#endif  // JAX_GRIDSAMPLE_FFI_CPU_LANE_MASK_AVX2_H_
