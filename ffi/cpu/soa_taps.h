// Struct-of-arrays tap tables of a block of points for the vector kernels
// (gather_sampler.cc, tile_sampler.cc, the nearest backward), compiled
// with their target (GS_CPU_VECTOR).
//
// Per axis: tap index (or -1) and weight of each point; per tap: int32
// offset into one input plane (-1 when out of range) and the product weight
// (nearest: the per-tap tables only).
// The per-axis loops call gs::ComputeAxisTaps with int32 indices and are
// vectorized across points (GCC: -fno-trapping-math -fno-tree-pre
// -fno-thread-jumps, set for every CPU source).
#ifndef JAX_GRIDSAMPLE_FFI_CPU_SOA_TAPS_H_
#define JAX_GRIDSAMPLE_FFI_CPU_SOA_TAPS_H_

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "../common/grid_sample_math.h"
#include "grid_sample_cpu.h"

namespace gs_cpu {

template <int K, int kInterp>
struct SoaTaps {
  static constexpr int kT1 = gs::TapsPerAxis(kInterp);
  static constexpr int kTaps = K == 2 ? kT1 * kT1 : kT1 * kT1 * kT1;
  static constexpr int kB = std::clamp(16384 / kTaps, 64, 4096);
  static_assert(kB % 16 == 0, "blocks are padded to groups of 16 points");
  // Row stride of the per-point tables: one cache line more than the block,
  // so that the rows that a loop reads together do not all fall into the
  // same L1 set (as rows of 4096 floats would).
  static constexpr int kStride = kB + 16;
  alignas(64) int32_t ax[K][kT1][kStride];
  alignas(64) float aw[K][kT1][kStride];
  alignas(64) int32_t off[kTaps][kStride];
  alignas(64) float w[kTaps][kStride];
  // Bilinear, channels-first (see FillPairs). Per point, the offset of the
  // two floats (xb, xb + 1) that hold its x taps in its first row of taps
  // (yb, zb), inside the plane also for a point without taps; its rows
  // r = j + 2 l (y index yb + j, z index zb + l) lie j w + l h w further.
  // Per row r and group of 8 points, 16 entries: the pairs of points
  // 0 1 4 5, then of 2 3 6 7, each as (first float, second float): its
  // weight (0 when it is no tap) and, only once FillPairMasks has run,
  // whether it is a tap (all bits set) or not (zero).
  static constexpr int kPairRows = K == 2 ? 2 : 4;
  static constexpr int kPairStride = kInterp == gs::kBilinear ? kStride : 8;
  alignas(64) int32_t pair_off[kPairStride];
  alignas(64) int32_t pair_mask[kPairRows][2 * kPairStride];
  alignas(64) float pair_w[kPairRows][2 * kPairStride];
  int32_t pair_step[kPairRows];  // j w + l h w
  // Bilinear, channels-first, per axis a and point (FillPairAxes): the
  // weights of the pair's first and second index, 0 for one that is no tap;
  // where the axes' modes differ, the pair's first index (PairAxis).
  alignas(64) float pair_aw[K][2][kPairStride];
  alignas(64) int32_t pair_base[K][kPairStride];
  // Whether pair_mask holds the masks of the current block (FillPairMasks).
  bool pair_masks_ready = false;
  // Bilinear pairs with a "wrap" axis (FillSeamTaps in gather_sampler.cc).
  // Per point, whether its two taps along a wrap axis are size - 1 and 0
  // (the seam: not a pair), all bits set or 0; its sum is the gather path's
  // (GatherDot on off and w, which hold the seam points alone, compacted),
  // stored per channel to seam_val at the point's index. seam_points: the
  // indices of the seam_count seam points; seam_grid: their coordinates.
  // Per whole group of 16 points, whether it has a seam point (nonzero).
  alignas(64) int32_t seam_mask[kPairStride];
  alignas(64) float seam_val[kPairStride];
  alignas(64) int32_t seam_points[kPairStride];
  alignas(64) float seam_grid[K * kPairStride];
  int32_t group_seams[kPairStride / 16];
  int seam_count = 0;
  // With a fill value (g.fill): each point's 1 - W (FillWeights).
  alignas(64) float outside[kStride];
  // Nearest: the tap offsets with 0 for "out of range" (an address that may
  // be read; see NearestDot).
  static constexpr int kSafeB = kInterp == gs::kNearest ? kB : 8;
  alignas(32) int32_t off_safe[kSafeB];

  // The weight of tap t of point b: w, or 1 for nearest (which fills no w).
  float TapWeight(int t, int b) const { return kInterp == gs::kNearest ? 1.f : w[t][b]; }
};

// Taps of one axis for `cnt` points (coordinate stride K); padding (the
// axis's own) and align_corners are constants here so that the loop has no
// branches left.
// With kDmult, also each point's chain factor d(padded coordinate) /
// d(normalized coordinate) in dm (the backward's).
template <int K, int kInterp, int kPad, bool kAlign, int kB, bool kDmult = false>
GS_CPU_VECTOR __attribute__((flatten)) void AxisSoa(const float* __restrict coord, int cnt,
                                                    int64_t size, int32_t (*__restrict ix)[kB],
                                                    float (*__restrict wx)[kB],
                                                    float* __restrict dm = nullptr) {
  constexpr int kT1 = gs::TapsPerAxis(kInterp);
  GS_CPU_VECTORIZE_LOOP
  for (int b = 0; b < cnt; ++b) {
    gs::AxisTaps<float, kT1, int32_t> t;
    gs::ComputeAxisTaps<kInterp, float, int32_t>(coord[b * K], size, kPad, kAlign, &t);
    for (int i = 0; i < kT1; ++i) {
      ix[i][b] = t.idx[i];
      wx[i][b] = t.w[i];
    }
    if constexpr (kDmult) dm[b] = t.dmult;
  }
}

// Nearest: each point's tap offset (or -1) and its "safe" offset (0 for
// -1), in one pass over the points (the per-axis tables are not needed).
// The same gs::ComputeAxisTaps calls as AxisSoa, so the same offsets.
// kPad: the padding of every axis, or kPerAxis to read each axis's from
// `pads`.
// kFill: also each point's 1 - W in `outside` (a tap's weight is 1).
template <int K, int kPad, bool kAlign, bool kFill>
GS_CPU_VECTOR __attribute__((flatten)) void NearestOffsets(const float* __restrict grid, int cnt,
                                                           const int64_t* sizes,
                                                           const int64_t* pads,
                                                           int32_t* __restrict off,
                                                           int32_t* __restrict off_safe,
                                                           float* __restrict outside) {
  const int32_t w32 = static_cast<int32_t>(sizes[0]);
  const int32_t h32 = static_cast<int32_t>(sizes[1]);
  GS_CPU_VECTORIZE_LOOP
  for (int b = 0; b < cnt; ++b) {
    int32_t idx[K];
    bool valid = true;
    float inside = 1.f;
    // Unrolled, or GCC leaves the 3D loops scalar.
#pragma GCC unroll 3
    for (int a = 0; a < K; ++a) {
      gs::AxisTaps<float, 1, int32_t> t;
      const int64_t pad = kPad == gs_ffi::kPerAxis ? pads[a] : kPad;
      gs::ComputeAxisTaps<gs::kNearest, float, int32_t>(grid[b * K + a], sizes[a], pad, kAlign,
                                                        &t);
      idx[a] = t.idx[0];
      valid = valid & (t.idx[0] >= 0);
      if constexpr (kFill) {
        if (gs::ReadsFill(pad)) inside = inside * gs::SubtractOutsideWeight(1.f, t.idx[0], 1.f);
      }
    }
    if constexpr (kFill) outside[b] = 1.f - inside;
    const int32_t row = K == 3 ? idx[K - 1] * h32 + idx[1] : idx[1];
    // Valid taps: < plane <= INT32_MAX.
    const int32_t o = valid ? row * w32 + idx[0] : -1;
    off[b] = o;
    off_safe[b] = std::max(o, 0);
  }
}

// The nearest tables of SoaTaps (off[0] and the safe offsets) for `cnt`
// points, in one pass (NearestOffsets), with no per-axis tables written
// and read back by further loops. No weights: a nearest tap's is 1.
template <int K>
GS_CPU_INLINE void FillNearestOffsets(const float* __restrict grid, int cnt, const Geometry& g,
                                      SoaTaps<K, gs::kNearest>* __restrict st) {
  const int64_t sizes[3] = {g.w, g.h, g.d};
  DispatchPadding(g, [&](auto pad, auto align) {
    constexpr int kPad = static_cast<int>(decltype(pad)::value);
    if (g.fill != nullptr) {
      NearestOffsets<K, kPad, decltype(align)::value, true>(grid, cnt, sizes, g.axis_padding,
                                                            st->off[0], st->off_safe,
                                                            st->outside);
    } else {
      NearestOffsets<K, kPad, decltype(align)::value, false>(grid, cnt, sizes, g.axis_padding,
                                                             st->off[0], st->off_safe, nullptr);
    }
  });
  for (int b = cnt; b < ((cnt + 15) & ~15); ++b) {
    st->off[0][b] = -1;
    st->off_safe[b] = 0;
    st->outside[b] = 0.f;
  }
}

// Bilinear pairs (see FillPairs in gather_sampler.cc): per point, the
// gs::ComputeAxisTaps of each axis and what the pair tables need of them:
// along each axis the pair's first index base = min(i0, size - 2) (0 when
// i0 is out of range; then i1 is 0 or out of range too), and the weights of
// indices base and base + 1 (pair_aw: a point with one tap in range has its
// two weights swapped, so that each index carries its tap's; 0 for an index
// that is no tap); the offset of the point's first row of taps (pair_off);
// and whether its taps cross a "wrap" axis's seam (seam: -1 or 0; such a
// point's pair tables are read, inside the plane, but its sum is another's,
// see FillSeamTaps). With kIndices, also the tap indices, to ax as AxisSoa
// stores them (FillPairMasks reads them).

// Point b along one axis (coordinate c; ix, pw: the axis's tables): its
// base, and whether its taps cross a wrap seam (1 or 0).
template <int kB, bool kIndices>
GS_CPU_VECTOR_INLINE int32_t PairTaps(float c, int64_t size, int64_t pad, bool align, int b,
                                      int32_t (*__restrict ix)[kB], float (*__restrict pw)[kB],
                                      int32_t* base) {
  gs::AxisTaps<float, 2, int32_t> t;
  gs::ComputeAxisTaps<gs::kBilinear, float, int32_t>(c, size, pad, align, &t);
  const bool in0 = t.idx[0] >= 0, in1 = t.idx[1] >= 0;
  const int32_t last = static_cast<int32_t>(size) - 2;
  *base = in0 ? std::min(t.idx[0], last) : 0;
  // Swapped when one of the two is in range, then 0 where no tap is.
  const float first = in0 ? t.w[0] : t.w[1];
  const float second = in1 ? t.w[1] : t.w[0];
  pw[0][b] = in1 ? first : 0.f;
  pw[1][b] = in0 ? second : 0.f;
  if constexpr (kIndices) {
    ix[0][b] = t.idx[0];
    ix[1][b] = t.idx[1];
  }
  // Wrap's taps are in range; at the seam they are size - 1, then 0.
  return (pad == gs::kWrap) & (t.idx[1] < t.idx[0]);
}

// The offset of a point's first row of taps from its bases. Every base is in
// [0, size - 2], so the pair's last float is inside the plane (< plane <=
// INT32_MAX, SamplesPairs), also for a point without taps (its weights are
// all 0).
template <int K>
GS_CPU_VECTOR_INLINE int32_t PairOffset(const int32_t* base, int32_t w32, int32_t h32) {
  const int32_t row = K == 3 ? base[2] * h32 + base[1] : base[1];
  return row * w32 + base[0];
}

// The pair tables of every axis in one loop, for a padding mode common to
// all axes: no per-axis tables written and read back.
template <int K, int kPad, bool kAlign, int kB, bool kIndices>
GS_CPU_VECTOR __attribute__((flatten)) void PairAxes(const float* __restrict grid, int cnt,
                                                     const int64_t* sizes,
                                                     int32_t (*__restrict ix)[2][kB],
                                                     float (*__restrict pw)[2][kB],
                                                     int32_t* __restrict off,
                                                     int32_t* __restrict seam) {
  const int32_t w32 = static_cast<int32_t>(sizes[0]);
  const int32_t h32 = static_cast<int32_t>(sizes[1]);
  GS_CPU_VECTORIZE_LOOP
  for (int b = 0; b < cnt; ++b) {
    int32_t base[K];
    int32_t crosses = 0;
#pragma GCC unroll 3
    for (int a = 0; a < K; ++a) {
      crosses |= PairTaps<kB, kIndices>(grid[b * K + a], sizes[a], kPad, kAlign, b, ix[a], pw[a],
                                        &base[a]);
    }
    seam[b] = -crosses;
    off[b] = PairOffset<K>(base, w32, h32);
  }
}

// One axis's pair tables (its bases to `bases`, its seam crossings or-ed
// into `seam`), for the calls whose axes differ in padding: each axis's loop
// then has its mode as a constant, and vectorizes.
template <int K, int kPad, bool kAlign, int kB, bool kIndices>
GS_CPU_VECTOR __attribute__((flatten)) void PairAxis(const float* __restrict coord, int cnt,
                                                     int64_t size, int32_t (*__restrict ix)[kB],
                                                     float (*__restrict pw)[kB],
                                                     int32_t* __restrict bases,
                                                     int32_t* __restrict seam) {
  GS_CPU_VECTORIZE_LOOP
  for (int b = 0; b < cnt; ++b) {
    seam[b] |= -PairTaps<kB, kIndices>(coord[b * K], size, kPad, kAlign, b, ix, pw, &bases[b]);
  }
}

// pair_off of the points from their per-axis bases (PairAxis).
template <int K, int kB>
GS_CPU_VECTOR __attribute__((flatten)) void PairOffsets(int cnt, const int64_t* sizes,
                                                        const int32_t (*__restrict bases)[kB],
                                                        int32_t* __restrict off) {
  const int32_t w32 = static_cast<int32_t>(sizes[0]);
  const int32_t h32 = static_cast<int32_t>(sizes[1]);
  for (int b = 0; b < cnt; ++b) {
    int32_t base[K];
    for (int a = 0; a < K; ++a) base[a] = bases[a][b];
    off[b] = PairOffset<K>(base, w32, h32);
  }
}

// PairAxes (or, where the axes' modes differ, PairAxis per axis) for `cnt`
// (<= kB) points of `grid`; entries [cnt, round_up(cnt, 16)) get no tap
// (index -1, weight 0, offset 0). The tap indices are stored only with
// kIndices: only the reads with masks need them.
template <int K, bool kIndices>
void FillPairAxes(const float* __restrict grid, int cnt, const Geometry& g,
                  SoaTaps<K, gs::kBilinear>* __restrict st) {
  using ST = SoaTaps<K, gs::kBilinear>;
  constexpr int kStride = ST::kStride;
  static_assert(ST::kPairStride == kStride, "bilinear pair tables");
  const int64_t sizes[3] = {g.w, g.h, g.d};
  if (g.padding == gs_ffi::kPerAxis) {
    std::fill(st->seam_mask, st->seam_mask + cnt, 0);
    for (int a = 0; a < K; ++a) {
      DispatchPaddingCode(g.axis_padding[a], g.align_corners, [&](auto pad, auto align) {
        PairAxis<K, static_cast<int>(decltype(pad)::value), decltype(align)::value, kStride,
                 kIndices>(grid + a, cnt, sizes[a], st->ax[a], st->pair_aw[a], st->pair_base[a],
                           st->seam_mask);
      });
    }
    PairOffsets<K, kStride>(cnt, sizes, st->pair_base, st->pair_off);
  } else {
    DispatchPadding(g, [&](auto pad, auto align) {
      PairAxes<K, static_cast<int>(decltype(pad)::value), decltype(align)::value, kStride,
               kIndices>(grid, cnt, sizes, st->ax, st->pair_aw, st->pair_off, st->seam_mask);
    });
  }
  for (int b = cnt; b < ((cnt + 15) & ~15); ++b) {
    st->pair_off[b] = 0;
    st->seam_mask[b] = 0;
    for (int a = 0; a < K; ++a) {
      for (int i = 0; i < 2; ++i) {
        st->ax[a][i][b] = -1;
        st->pair_aw[a][i][b] = 0.f;
      }
    }
  }
}

// Fills the tables for `cnt` (<= kB) points of `grid` (K floats per point);
// entries [cnt, round_up(cnt, 16)) are set to "no tap" (index -1, weight 0).
// With a fill value, also `outside` of the first cnt points.
// Nearest fills only its per-tap tables (FillNearestOffsets); the bilinear
// pair sampler has its own (FillPairAxes).
template <int K, int kInterp>
GS_CPU_VECTOR void FillSoaTaps(const float* __restrict grid, int cnt, const Geometry& g,
                               SoaTaps<K, kInterp>* __restrict st) {
  using ST = SoaTaps<K, kInterp>;
  constexpr int kT1 = ST::kT1;
  if constexpr (kInterp == gs::kNearest) {
    FillNearestOffsets<K>(grid, cnt, g, st);
    return;
  }
  const int64_t sizes[3] = {g.w, g.h, g.d};
  for (int a = 0; a < K; ++a) {
    const float* coord = grid + a;
    const int64_t size = sizes[a];
    constexpr int kStride = ST::kStride;
    // By value: a `cnt` captured by reference lives in memory, and clang then
    // cannot count the loops below, whose stores might change it.
    DispatchPaddingCode(g.axis_padding[a], g.align_corners, [=](auto pad, auto align) {
      constexpr int kPad = static_cast<int>(decltype(pad)::value);
      constexpr bool kAlign = decltype(align)::value;
      AxisSoa<K, kInterp, kPad, kAlign, kStride>(coord, cnt, size, st->ax[a], st->aw[a]);
    });
  }
  for (int a = 0; a < K; ++a) {
    for (int i = 0; i < kT1; ++i) {
      for (int b = cnt; b < ((cnt + 15) & ~15); ++b) {
        st->ax[a][i][b] = -1;
        st->aw[a][i][b] = 0.f;
      }
    }
  }
  if (g.fill != nullptr) {
    FillWeights<K, kT1>(g, cnt, st->ax, st->aw, st->outside);
    std::fill(st->outside + cnt, st->outside + ((cnt + 15) & ~15), 0.f);
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
        for (int b = cnt; b < ((cnt + 15) & ~15); ++b) {
          o[b] = -1;
          w[b] = 0.f;
        }
      }
    }
  }
}

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_SOA_TAPS_H_
