// ChannelsLastPoints for float32 in AVX2 + FMA: eight channels a vector,
// the last (n % 8) under a mask; see channels_last_backward.h for the order
// of the dot product's sums, which this form keeps.
#include "channels_last_backward.h"

#include <cstdint>

#include "grid_sample_cpu.h"
#include "lane_mask_avx2.h"

#if GS_CPU_HAVE_AVX2_PATH
#include <immintrin.h>
#endif

namespace gs_cpu {

#if GS_CPU_HAVE_AVX2_PATH

namespace {

struct Avx2F32ChannelRun {
  static_assert(PortableChannelRun<gs::F32Format>::kLanes == 8);

  __attribute__((target("avx2,fma"))) static inline void AddScaled(float* gi, float w,
                                                                   const float* g, int64_t n) {
    const __m256 wv = _mm256_set1_ps(w);
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) {
      const __m256 sum =
          _mm256_add_ps(_mm256_loadu_ps(gi + c), _mm256_mul_ps(wv, _mm256_loadu_ps(g + c)));
      _mm256_storeu_ps(gi + c, sum);
    }
    if (c < n) {
      const __m256i m = FirstLanes(n - c);
      const __m256 sum = _mm256_add_ps(_mm256_maskload_ps(gi + c, m),
                                       _mm256_mul_ps(wv, _mm256_maskload_ps(g + c, m)));
      _mm256_maskstore_ps(gi + c, m, sum);
    }
  }

  // Masked-off lanes load 0 from both sides and add 0 * 0, as the portable
  // form adds 0 there.
  __attribute__((target("avx2,fma"))) static inline float Dot(const float* g, const float* src,
                                                              int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) {
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(g + c), _mm256_loadu_ps(src + c)));
    }
    if (c < n) {
      const __m256i m = FirstLanes(n - c);
      const __m256 gv = _mm256_maskload_ps(g + c, m), sv = _mm256_maskload_ps(src + c, m);
      acc = _mm256_add_ps(acc, _mm256_mul_ps(gv, sv));
    }
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
  }
};

}  // namespace

// Compiled for AVX2 + FMA (the target is on the declaration). The run's
// functions are plain inline: always_inline would fail where GCC compiles
// ChannelsLastPoints on its own, without a target.
template <int K, int kInterp>
void ChannelsLastPointsAvx2F32(const ChannelsLastBlock<gs::F32Format>& blk,
                               const TapBlock<float, K, kInterp>& tb, int cnt,
                               const int64_t* pidx, float* gacc) {
  ChannelsLastPoints<Avx2F32ChannelRun>(blk, tb, cnt, pidx, nullptr, gacc);
}

#else  // !GS_CPU_HAVE_AVX2_PATH

template <int K, int kInterp>
void ChannelsLastPointsAvx2F32(const ChannelsLastBlock<gs::F32Format>&,
                               const TapBlock<float, K, kInterp>&, int, const int64_t*, float*) {}

#endif  // GS_CPU_HAVE_AVX2_PATH

#define GS_INSTANTIATE(K, INTERP)                                                               \
  template void ChannelsLastPointsAvx2F32<K, INTERP>(const ChannelsLastBlock<gs::F32Format>&,  \
                                                     const TapBlock<float, K, INTERP>&, int,    \
                                                     const int64_t*, float*);
GS_INSTANTIATE(2, gs::kBilinear)
GS_INSTANTIATE(2, gs::kNearest)
GS_INSTANTIATE(2, gs::kBicubic)
GS_INSTANTIATE(3, gs::kBilinear)
GS_INSTANTIATE(3, gs::kNearest)
GS_INSTANTIATE(3, gs::kBicubic)
#undef GS_INSTANTIATE

}  // namespace gs_cpu
