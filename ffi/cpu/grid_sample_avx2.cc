// AVX2 + FMA forward path for float32; see grid_sample_avx2.h.
//
// This file is compiled with -fno-trapping-math -fno-tree-pre
// -fno-thread-jumps (GCC) so that the per-axis coordinate loops, which call
// gs::ComputeAxisTaps, are if-converted and vectorized across points.
#include "grid_sample_avx2.h"

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define GS_CPU_HAVE_AVX2_PATH 1
#else
#define GS_CPU_HAVE_AVX2_PATH 0
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>

#include "../common/grid_sample_math.h"
#include "grid_sample_cpu.h"

#if GS_CPU_HAVE_AVX2_PATH
#include <immintrin.h>
#endif

namespace gs_cpu {

#if GS_CPU_HAVE_AVX2_PATH

bool HasAvx2Fma() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}

bool Avx2PathFits(const Geometry& g) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  return g.plane <= kMax && g.d <= kMax && g.h <= kMax && g.w <= kMax;
}

template <int K, int kInterp>
struct SoaTaps {
  static constexpr int kT1 = gs::TapsPerAxis(kInterp);
  static constexpr int kTaps = K == 2 ? kT1 * kT1 : kT1 * kT1 * kT1;
  static constexpr int kB = std::clamp(4096 / kTaps, 64, 512);  // multiple of 8
  alignas(32) int32_t ax[K][kT1][kB];
  alignas(32) float aw[K][kT1][kB];
  alignas(32) int32_t off[kTaps][kB];
  alignas(32) float w[kTaps][kB];
};

// Taps of one axis for `cnt` points (coordinate stride K); padding and
// align_corners are constants here so that the loop has no branches left.
template <int K, int kInterp, int kPad, bool kAlign, int kB>
__attribute__((target("avx2,fma"), flatten)) void AxisSoa(const float* __restrict coord,
                                                          int cnt, int64_t size,
                                                          int32_t (*__restrict ix)[kB],
                                                          float (*__restrict wx)[kB]) {
  constexpr int kT1 = gs::TapsPerAxis(kInterp);
  for (int b = 0; b < cnt; ++b) {
    gs::AxisTaps<float, kT1, int32_t> t;
    gs::ComputeAxisTaps<kInterp, float, int32_t>(coord[b * K], size, kPad, kAlign, &t);
    for (int i = 0; i < kT1; ++i) {
      ix[i][b] = t.idx[i];
      wx[i][b] = t.w[i];
    }
  }
}

// Fills the tables for `cnt` (<= kB) points of `grid` (K floats per point);
// entries [cnt, round_up(cnt, 8)) are set to "no tap".
template <int K, int kInterp>
__attribute__((target("avx2,fma"))) void FillSoaTaps(const float* __restrict grid, int cnt,
                                                     const Geometry& g,
                                                     SoaTaps<K, kInterp>* __restrict st) {
  using ST = SoaTaps<K, kInterp>;
  constexpr int kT1 = ST::kT1;
  const int64_t sizes[3] = {g.w, g.h, g.d};
  for (int a = 0; a < K; ++a) {
    const float* coord = grid + a;
    const int64_t size = sizes[a];
    constexpr int kB = ST::kB;
    if (g.align_corners) {
      switch (g.padding) {
        case gs::kZeros: AxisSoa<K, kInterp, gs::kZeros, true, kB>(coord, cnt, size, st->ax[a], st->aw[a]); break;
        case gs::kBorder: AxisSoa<K, kInterp, gs::kBorder, true, kB>(coord, cnt, size, st->ax[a], st->aw[a]); break;
        default: AxisSoa<K, kInterp, gs::kReflection, true, kB>(coord, cnt, size, st->ax[a], st->aw[a]); break;
      }
    } else {
      switch (g.padding) {
        case gs::kZeros: AxisSoa<K, kInterp, gs::kZeros, false, kB>(coord, cnt, size, st->ax[a], st->aw[a]); break;
        case gs::kBorder: AxisSoa<K, kInterp, gs::kBorder, false, kB>(coord, cnt, size, st->ax[a], st->aw[a]); break;
        default: AxisSoa<K, kInterp, gs::kReflection, false, kB>(coord, cnt, size, st->ax[a], st->aw[a]); break;
      }
    }
  }
  const int32_t w32 = static_cast<int32_t>(g.w);
  const int32_t h32 = static_cast<int32_t>(g.h);
  constexpr int kTz = K == 3 ? kT1 : 1;
  int t = 0;
  for (int l = 0; l < kTz; ++l) {
    for (int j = 0; j < kT1; ++j) {
      for (int i = 0; i < kT1; ++i, ++t) {
        const int32_t* __restrict xi = st->ax[0][i];
        const int32_t* __restrict yi = st->ax[1][j];
        const int32_t* __restrict zi = st->ax[K - 1][l];
        const float* __restrict xw = st->aw[0][i];
        const float* __restrict yw = st->aw[1][j];
        const float* __restrict zw = st->aw[K - 1][l];
        int32_t* __restrict o = st->off[t];
        float* __restrict w = st->w[t];
        for (int b = 0; b < cnt; ++b) {
          int32_t row = yi[b];
          bool valid = (xi[b] >= 0) & (yi[b] >= 0);
          float wt = xw[b] * yw[b];
          if (K == 3) {
            row = zi[b] * h32 + yi[b];
            valid = valid & (zi[b] >= 0);
            wt = wt * zw[b];
          }
          // Valid taps: < plane <= INT32_MAX.
          o[b] = valid ? row * w32 + xi[b] : -1;
          w[b] = wt;
        }
        for (int b = cnt; b < ((cnt + 7) & ~7); ++b) {
          o[b] = -1;
          w[b] = 0.f;
        }
      }
    }
  }
}

// Sum over the taps of points b .. b + 7 of one plane: masked gathers (lanes
// of out-of-range taps read nothing and add exactly 0); two accumulators.
template <int K, int kInterp>
__attribute__((target("avx2,fma"), always_inline)) inline __m256 GatherDot(
    const float* src, const SoaTaps<K, kInterp>* __restrict st, int b) {
  constexpr int kTaps = SoaTaps<K, kInterp>::kTaps;
  const __m256i minus1 = _mm256_set1_epi32(-1);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int t = 0; t < kTaps; ++t) {
    const __m256i o = _mm256_load_si256(reinterpret_cast<const __m256i*>(st->off[t] + b));
    const __m256 m = _mm256_castsi256_ps(_mm256_cmpgt_epi32(o, minus1));
    const __m256 v = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), src, o, m, 4);
    acc[t & 1] = _mm256_fmadd_ps(_mm256_load_ps(st->w[t] + b), v, acc[t & 1]);
  }
  return kTaps == 1 ? acc[0] : _mm256_add_ps(acc[0], acc[1]);
}

// Forward of points [p_begin, p_end) of batch element n, float32.
template <int K, int kInterp, bool kChannelsLast>
__attribute__((target("avx2,fma"))) void ForwardChunkAvx2(const Geometry& g,
                                                          const float* __restrict input,
                                                          const float* __restrict grid,
                                                          float* __restrict output, int64_t n,
                                                          int64_t p_begin, int64_t p_end,
                                                          SoaTaps<K, kInterp>* st) {
  using ST = SoaTaps<K, kInterp>;
  constexpr int kTaps = ST::kTaps;
  const int64_t channels = g.c, points = g.points, plane = g.plane;
  for (int64_t p0 = p_begin; p0 < p_end; p0 += ST::kB) {
    const int cnt = static_cast<int>(std::min<int64_t>(ST::kB, p_end - p0));
    FillSoaTaps<K, kInterp>(grid + (n * points + p0) * K, cnt, g, st);
    if (!kChannelsLast) {
      const int cnt8 = cnt & ~7;
      const int cnt16 = cnt & ~15;
      for (int64_t c = 0; c < channels; ++c) {
        const float* src = input + (n * channels + c) * plane;
        float* dst = output + (n * channels + c) * points + p0;
        // Two groups of 8 points at a time: independent FMA chains.
        for (int b = 0; b < cnt16; b += 16) {
          const __m256 a0 = GatherDot(src, st, b);
          const __m256 a1 = GatherDot(src, st, b + 8);
          _mm256_storeu_ps(dst + b, a0);
          _mm256_storeu_ps(dst + b + 8, a1);
        }
        if (cnt16 < cnt8) _mm256_storeu_ps(dst + cnt16, GatherDot(src, st, cnt16));
        if (cnt8 < cnt) {
          // Tail: the tables are padded to a multiple of 8; masked store.
          alignas(32) int32_t lane[8];
          for (int i = 0; i < 8; ++i) lane[i] = cnt8 + i < cnt ? -1 : 0;
          const __m256i store_mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(lane));
          _mm256_maskstore_ps(dst + cnt8, store_mask, GatherDot(src, st, cnt8));
        }
      }
    } else {
      const float* src_n = input + n * plane * channels;
      constexpr int64_t kCBlock = 128;
      // Same sums as the channels-first path (bitwise): even taps into one
      // accumulator, odd taps into another, fused multiply-adds, then added.
      alignas(32) float acc[2][kCBlock];
      for (int b = 0; b < cnt; ++b) {
        float* dst = output + (n * points + p0 + b) * channels;
        for (int64_t c0 = 0; c0 < channels; c0 += kCBlock) {
          const int64_t cn = std::min(kCBlock, channels - c0);
          for (int64_t c = 0; c < cn; ++c) acc[0][c] = acc[1][c] = 0.f;
          for (int t = 0; t < kTaps; ++t) {
            const int32_t o = st->off[t][b];
            if (o < 0) continue;
            const float wt = st->w[t][b];
            const float* row = src_n + static_cast<int64_t>(o) * channels + c0;
            float* a = acc[t & 1];
            for (int64_t c = 0; c < cn; ++c) a[c] = std::fma(wt, row[c], a[c]);
          }
          if (kTaps == 1) {
            for (int64_t c = 0; c < cn; ++c) dst[c0 + c] = acc[0][c];
          } else {
            for (int64_t c = 0; c < cn; ++c) dst[c0 + c] = acc[0][c] + acc[1][c];
          }
        }
      }
    }
  }
}

namespace {

template <int K, int kInterp>
void RunChunk(const Geometry& g, const float* input, const float* grid, float* output,
              int64_t n, int64_t p_begin, int64_t p_end) {
  std::unique_ptr<SoaTaps<K, kInterp>> st(new SoaTaps<K, kInterp>);
  if (g.channels_last) {
    ForwardChunkAvx2<K, kInterp, true>(g, input, grid, output, n, p_begin, p_end, st.get());
  } else {
    ForwardChunkAvx2<K, kInterp, false>(g, input, grid, output, n, p_begin, p_end, st.get());
  }
}

template <int K>
void RunChunkK(const Geometry& g, int64_t interpolation, const float* input, const float* grid,
               float* output, int64_t n, int64_t p_begin, int64_t p_end) {
  switch (interpolation) {
    case gs::kBilinear:
      return RunChunk<K, gs::kBilinear>(g, input, grid, output, n, p_begin, p_end);
    case gs::kNearest:
      return RunChunk<K, gs::kNearest>(g, input, grid, output, n, p_begin, p_end);
    default:
      return RunChunk<K, gs::kBicubic>(g, input, grid, output, n, p_begin, p_end);
  }
}

}  // namespace

void ForwardChunkAvx2F32(const Geometry& g, int64_t interpolation, const float* input,
                         const float* grid, float* output, int64_t n, int64_t p_begin,
                         int64_t p_end) {
  if (g.k == 2) {
    RunChunkK<2>(g, interpolation, input, grid, output, n, p_begin, p_end);
  } else {
    RunChunkK<3>(g, interpolation, input, grid, output, n, p_begin, p_end);
  }
}

#else  // !GS_CPU_HAVE_AVX2_PATH

bool HasAvx2Fma() { return false; }
inline bool Avx2PathFits(const Geometry&) { return false; }

#endif  // GS_CPU_HAVE_AVX2_PATH

}  // namespace gs_cpu

