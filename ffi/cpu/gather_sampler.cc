// The gather sampler: float32 forwards of channels-first input; see
// gather_sampler.h.
//
// This file is compiled with -fno-trapping-math -fno-tree-pre
// -fno-thread-jumps (GCC) so that the per-axis coordinate loops, which call
// gs::ComputeAxisTaps, are if-converted and vectorized across points.
#include "gather_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

#include "../common/grid_sample_math.h"
#include "grid_sample_cpu.h"
#include "output_store.h"
#include "soa_taps.h"
#include "vec8.h"

namespace gs_cpu {

bool SamplesPairs(const Geometry& g, int64_t interpolation) {
  // Up to 2^24 indices along an axis, i0 + 1 is exact in float32, so a point
  // whose two taps along that axis are in range has them at i0 and i0 + 1
  // (but at a wrap axis's seam: size - 1 and 0, see FillSeamTaps).
  constexpr int64_t kExact = int64_t{1} << 24;
  auto fits = [&](int, int64_t size) { return size >= 2 && size <= kExact; };
  return interpolation == gs::kBilinear && !g.channels_last && fits(0, g.w) && fits(1, g.h) &&
         (g.k == 2 || fits(2, g.d));
}

// The 16 entries of the pair tables' layout of 8 points from their first
// floats f and second floats s (lanes 8 + i): points 0 1 4 5, then 2 3 6 7,
// each first then second.
GS_CPU_VECTOR_INLINE void StorePairLayout(float* dst, const F8& f, const F8& s) {
  Store8(dst, __builtin_shufflevector(f, s, 0, 8, 1, 9, 4, 12, 5, 13));
  Store8(dst + 8, __builtin_shufflevector(f, s, 2, 10, 3, 11, 6, 14, 7, 15));
}

// Bilinear: the pair weights of SoaTaps from FillPairAxes's per-axis
// weights, 8 points at a time: per row of a point's taps, each float's
// weight (wx * wy) * wz, as FillSoaTaps forms a tap's weight, and 0 for a
// float that is no tap (a factor is 0 then; the weights are finite and not
// negative, so the product is +0, as a masked one). Each row of a point's
// taps is one 8-byte read that stays inside the plane. The swaps move a tap
// between the two floats of a pair, or between two rows, only when the
// other one is no tap: its product then lands in the sum where the gather
// path adds its 0, and the sums come out the same either way round.
template <int K, int kInterp>
GS_CPU_VECTOR void FillPairWeights(int cnt, const Geometry& g, SoaTaps<K, kInterp>* __restrict st) {
  using ST = SoaTaps<K, kInterp>;
  const int32_t w = static_cast<int32_t>(g.w), h = static_cast<int32_t>(g.h);
  for (int r = 0; r < ST::kPairRows; ++r) st->pair_step[r] = (r & 1) * w + (r >> 1) * h * w;
  for (int b = 0; b < ((cnt + 15) & ~15); b += 8) {
    F8 aw[K][2];
    for (int a = 0; a < K; ++a) {
      for (int s = 0; s < 2; ++s) aw[a][s] = Load8(st->pair_aw[a][s] + b);
    }
    for (int r = 0; r < ST::kPairRows; ++r) {
      const int j = r & 1, l = r >> 1;
      F8 wt[2];
      for (int s = 0; s < 2; ++s) {
        wt[s] = aw[0][s] * aw[1][j];
        if constexpr (K == 3) wt[s] = wt[s] * aw[2][l];
      }
      StorePairLayout(st->pair_w[r] + 2 * b, wt[0], wt[1]);
    }
  }
}

// Bilinear: the pair masks of SoaTaps (whether each float of a pair is a
// tap) from the tap indices of FillPairAxes<K, true>, for the reads with
// masks.
// Index base of a pair is a tap exactly when i1 is in range (it is i0, or
// i1 = 0 when i0 = -1), base + 1 exactly when i0 is (it is i1, or i0 =
// size - 1 when i1 = size).
template <int K, int kInterp>
GS_CPU_VECTOR void FillPairMaskTables(int cnt, SoaTaps<K, kInterp>* __restrict st) {
  using ST = SoaTaps<K, kInterp>;
  for (int b = 0; b < ((cnt + 15) & ~15); b += 8) {
    I8 tap[K][2];
    for (int a = 0; a < K; ++a) {
      tap[a][0] = LoadI8(st->ax[a][1] + b) > -1;
      tap[a][1] = LoadI8(st->ax[a][0] + b) > -1;
    }
    for (int r = 0; r < ST::kPairRows; ++r) {
      const int j = r & 1, l = r >> 1;
      I8 m[2];
      for (int s = 0; s < 2; ++s) {
        m[s] = tap[0][s] & tap[1][j];
        if constexpr (K == 3) m[s] = m[s] & tap[2][l];
      }
      StorePairLayout(reinterpret_cast<float*>(st->pair_mask[r] + 2 * b), (F8)m[0], (F8)m[1]);
    }
  }
}

// The pair tables of the first `cnt` points of `grid`, but for the masks
// (FillPairMasks, only where a read needs them): FillPairAxes, then the
// weights. FillPairAxes derives the pair tables' inputs in the loop that
// computes the taps, so no per-axis tap tables are written and read back in
// a second pass.
template <int K, int kInterp>
void FillPairs(const float* __restrict grid, int cnt, const Geometry& g,
               SoaTaps<K, kInterp>* __restrict st) {
  FillPairAxes<K, false>(grid, cnt, g, st);
  FillPairWeights(cnt, g, st);
  st->pair_masks_ready = false;
  if (g.fill != nullptr) {
    // pair_aw holds each tap's weight and 0 for a float that is no tap, so the
    // sum of an axis's two is the weight of its taps inside: the same bits as
    // gs::SubtractOutsideWeight's 1 minus the weight outside, as a bilinear
    // axis's two weights sum to exactly 1, and a weight inside beside one
    // outside is exactly 1 minus it (docs/semantics.md, "The fill value").
    // Entries past cnt hold no tap: weight 1 - 0.
    const int padded = (cnt + 15) & ~15;
    for (int b = 0; b < padded; ++b) st->outside[b] = 1.f;
    for (int a = 0; a < K; ++a) {
      if (!gs::ReadsFill(g.axis_padding[a])) continue;
      for (int b = 0; b < padded; ++b) {
        st->outside[b] = st->outside[b] * (st->pair_aw[a][0][b] + st->pair_aw[a][1][b]);
      }
    }
    for (int b = 0; b < padded; ++b) st->outside[b] = 1.f - st->outside[b];
  }
}

// Bilinear pairs with a "wrap" axis: per group of 16 points of the block,
// whether it holds a seam point (group_seams; FillPairs marked them in
// seam_mask); the seam points, listed in seam_points; and their gather tables
// (off, w; FillSoaTaps on their coordinates alone), so that SeamSums gives
// each its gather path's sum: the same bits as every other strategy's. Their
// fill weights stay FillPairs's.
template <int K, int kInterp>
void FillSeamTaps(const float* __restrict grid, int cnt, const Geometry& g,
                  SoaTaps<K, kInterp>* __restrict st) {
  const int cnt16 = cnt & ~15;
  int m = 0;
  auto list_seams = [&](int b0, int b1) {
    for (int b = b0; b < b1; ++b) {
      st->seam_points[m] = b;
      m += st->seam_mask[b] & 1;
    }
  };
  for (int b = 0; b < cnt16; b += 16) {
    int32_t any = 0;
    for (int i = 0; i < 16; ++i) any |= st->seam_mask[b + i];
    st->group_seams[b / 16] = any;
    if (any != 0) list_seams(b, b + 16);
  }
  list_seams(cnt16, cnt);
  st->seam_count = m;
  if (m == 0) return;
  for (int j = 0; j < m; ++j) {
    for (int a = 0; a < K; ++a) st->seam_grid[j * K + a] = grid[st->seam_points[j] * K + a];
  }
  Geometry taps_only = g;
  taps_only.fill = nullptr;  // `outside` holds the block's weights
  FillSoaTaps<K, kInterp>(st->seam_grid, m, taps_only, st);
}

// The pair masks of the same points (their indices computed again).
template <int K, int kInterp>
void FillPairMasks(const float* __restrict grid, int cnt, const Geometry& g,
                   SoaTaps<K, kInterp>* __restrict st) {
  FillPairAxes<K, true>(grid, cnt, g, st);
  FillPairMaskTables(cnt, st);
  st->pair_masks_ready = true;
}

// Eight int32 offsets as four 8-byte loads (the sampling loops are bound by
// their loads): offset 2i in the low half of at[i], 2i + 1 in the high half
// (x86-64 and aarch64 Linux are little-endian).
GS_CPU_VECTOR_INLINE void LoadOffsetPairs(const int32_t* offsets, uint64_t (&at)[4]) {
  for (int i = 0; i < 4; ++i) std::memcpy(&at[i], offsets + 2 * i, sizeof at[i]);
}

// Bilinear, points b .. b + 7 of one plane, from the pair tables: per row of
// taps, eight 8-byte loads (plain loads: cheaper than gathers here) into two
// vectors, the pairs of points 0 1 4 5 and of 2 3 6 7. Floats that are no
// taps are zeroed with the tables' masks, unless kNoMask: their weight is 0,
// so they add exactly 0 as well when they are finite, and make the sum NaN
// when they are not (0 * inf), which RowGroups looks for. The first and the
// second floats of a pair accumulate in alternate lanes, fused
// multiply-adds row after row as in GatherDot's two accumulators, which are
// then added: the same bits. One offset per point (its rows a fixed step
// apart), the shuffles once after the sums, and no masks in the common case
// keep the loop to little more than its loads and multiply-adds.
template <bool kNoMask, int K, int kInterp>
GS_CPU_VECTOR_INLINE F8 PairDot(const float* const* rows, const SoaTaps<K, kInterp>* __restrict st,
                                int b) {
  typedef double D4 __attribute__((vector_size(32)));
  uint64_t at[4];
  LoadOffsetPairs(st->pair_off + b, at);
  F8 acc[2];
  for (int half = 0; half < 2; ++half) {  // points 0 1 4 5, then 2 3 6 7
    const uint64_t lo = at[half], hi = at[half + 2];
    const uint32_t o[4] = {static_cast<uint32_t>(lo), static_cast<uint32_t>(lo >> 32),
                           static_cast<uint32_t>(hi), static_cast<uint32_t>(hi >> 32)};
    acc[half] = F8{};
    for (int r = 0; r < SoaTaps<K, kInterp>::kPairRows; ++r) {
      double pair[4];  // the two floats at o[i], as 8 bytes
      for (int i = 0; i < 4; ++i) std::memcpy(&pair[i], rows[r] + o[i], sizeof pair[i]);
      F8 v = (F8)D4{pair[0], pair[1], pair[2], pair[3]};
      const int e = 2 * b + 8 * half;
      if constexpr (!kNoMask) v = (F8)((I8)v & LoadI8(st->pair_mask[r] + e));
      acc[half] = Fma(Load8(st->pair_w[r] + e), v, acc[half]);
    }
  }
  // First floats plus second floats, points 0 .. 7 in order.
  return __builtin_shufflevector(acc[0], acc[1], 0, 2, 8, 10, 4, 6, 12, 14) +
         __builtin_shufflevector(acc[0], acc[1], 1, 3, 9, 11, 5, 7, 13, 15);
}

// Sum over the taps of points b .. b + 7 of one plane: masked gathers (lanes
// of out-of-range taps read nothing and add exactly 0); two accumulators.
template <int K, int kInterp>
GS_CPU_VECTOR_INLINE F8 GatherDot(const float* src, const SoaTaps<K, kInterp>* __restrict st,
                                  int b) {
  constexpr int kTaps = SoaTaps<K, kInterp>::kTaps;
  F8 acc[2] = {F8{}, F8{}};
#pragma GCC unroll 64  // whole, so that the two accumulators stay in registers
  for (int t = 0; t < kTaps; ++t) {
    acc[t & 1] = Fma(Load8(st->w[t] + b), Gather8(src, st->off[t] + b), acc[t & 1]);
  }
  return kTaps == 1 ? acc[0] : acc[0] + acc[1];
}

// The sums of the seam points of one plane, to seam_val at their indices.
template <int K, int kInterp>
GS_CPU_VECTOR_INLINE void SeamSums(const float* src, SoaTaps<K, kInterp>* __restrict st) {
  for (int j = 0; j < st->seam_count; j += 8) {
    const F8 v = GatherDot(src, st, j);
    const int n = std::min(8, st->seam_count - j);
    for (int i = 0; i < n; ++i) st->seam_val[st->seam_points[j + i]] = v[i];
  }
}

// Lanes of the seam points of b .. b + 7 replaced with their SeamSums.
template <int K, int kInterp>
GS_CPU_VECTOR_INLINE F8 WithSeamSums(F8 v, const SoaTaps<K, kInterp>* __restrict st, int b) {
  const I8 seam = LoadI8(st->seam_mask + b);
  return (F8)(((I8)v & ~seam) | ((I8)Load8(st->seam_val + b) & seam));
}

// 2D bicubic, points b .. b + 7 of one plane: GatherDot's masked gathers,
// summed in the separable order of every 2D bicubic forward:
//   R_j = (wx0 v0j + wx1 v1j) + (wx2 v2j + wx3 v3j),
//   out = (wy0 R0 + wy1 R1) + (wy2 R2 + wy3 R3)
// (plain multiplies and adds), a tap out of range read as 0.
template <int K, int kInterp>
GS_CPU_VECTOR_INLINE F8 BicubicDot(const float* src, const SoaTaps<K, kInterp>* __restrict st,
                                   int b) {
  F8 q[4];
  for (int j = 0; j < 4; ++j) {
    F8 pv[4];
    for (int i = 0; i < 4; ++i)
      pv[i] = Load8(st->aw[0][i] + b) * Gather8(src, st->off[4 * j + i] + b);
    q[j] = Load8(st->aw[1][j] + b) * ((pv[0] + pv[1]) + (pv[2] + pv[3]));
  }
  return (q[0] + q[1]) + (q[2] + q[3]);
}

// Nearest, points b .. b + 7 of one plane: eight plain loads at the safe
// offsets (a masked gather is slow on some x86-64 cores), lanes out of range
// zeroed. A tap's weight is 1, so GatherDot's multiply-add with it is an add
// of 0, which gives the same bits; so no weight is loaded. The offsets come
// two per 8-byte load (the sampling loops are bound by their loads).
template <int K, int kInterp>
GS_CPU_VECTOR_INLINE F8 NearestDot(const float* src, const SoaTaps<K, kInterp>* __restrict st,
                                   int b) {
  uint64_t at[4];
  LoadOffsetPairs(st->off_safe + b, at);
  auto lo = [](uint64_t q) { return static_cast<uint32_t>(q); };
  auto hi = [](uint64_t q) { return static_cast<uint32_t>(q >> 32); };
  // + 0 turns -0.0 into +0.0, as 1 * v + 0 does (and the other kernels' sums).
  const F8 v = F8{src[lo(at[0])], src[hi(at[0])], src[lo(at[1])], src[hi(at[1])],
                  src[lo(at[2])], src[hi(at[2])], src[lo(at[3])], src[hi(at[3])]} +
               0.f;
  return (F8)((I8)v & (LoadI8(st->off[0] + b) > -1));
}

// Points b .. b + 7 of one plane, summed over their taps: NearestDot for
// nearest, PairDot when `pairs` (SamplesPairs; kNoMask: pairs read without
// masks, see ChannelRows), BicubicDot for 2D bicubic, else GatherDot.
template <bool kNoMask, int K, int kInterp>
GS_CPU_VECTOR_INLINE F8 Dot(bool pairs, const float* src, const float* const* rows,
                            const SoaTaps<K, kInterp>* __restrict st, int b) {
  if constexpr (kInterp == gs::kNearest) return NearestDot(src, st, b);
  if constexpr (kInterp == gs::kBilinear) {
    if (pairs) return PairDot<kNoMask>(rows, st, b);
  }
  if constexpr (K == 2 && kInterp == gs::kBicubic) return BicubicDot(src, st, b);
  return GatherDot(src, st, b);
}

// One group of 16 points, from b, of one channels-first output row `dst`
// (see RowGroups), with the lines of the next plane prefetched; kBlend: its
// seam points' sums are SeamSums's (WithSeamSums). Accumulates `bad`.
template <bool kStream, bool kNoMask, bool kBlend, int K, int kInterp>
GS_CPU_VECTOR_INLINE void RowGroup(const float* __restrict src, const float* const* rows,
                                   float* __restrict dst, int b, bool pairs, const char* next,
                                   int64_t next_bytes, int64_t lines, int64_t* pf,
                                   const float* outside, float fill,
                                   const SoaTaps<K, kInterp>* __restrict st, I8 (&bad)[2]) {
  constexpr bool kCheck = kNoMask && kInterp == gs::kBilinear;
  if (lines == 1) {  // the common case, without a loop's overhead
    __builtin_prefetch(next + std::min(*pf, next_bytes - 64));
    *pf += 64;
  } else {
    for (int64_t l = 0; l < lines; ++l, *pf += 64) {
      __builtin_prefetch(next + std::min(*pf, next_bytes - 64));
    }
  }
  // Two groups of 8 points: independent FMA chains.
  F8 a[2] = {Dot<kNoMask>(pairs, src, rows, st, b), Dot<kNoMask>(pairs, src, rows, st, b + 8)};
  for (int u = 0; u < 2; ++u) {
    if constexpr (kBlend) a[u] = WithSeamSums(a[u], st, b + 8 * u);
    if constexpr (kCheck) bad[u] |= (I8)(a[u] - a[u]);
    if (outside != nullptr) a[u] = a[u] + Broadcast8(fill) * Load8(outside + b + 8 * u);
    if constexpr (kStream) {
      StreamStore8(dst + b + 8 * u, a[u]);
    } else {
      Store8(dst + b + 8 * u, a[u]);
    }
  }
}

// The groups of 16 points (cnt16 of them) of one channels-first output row
// `dst`, with the lines of the next plane `next` (of `next_bytes`, at least
// 64) prefetched `lines` per group; kStream: dst is 32-byte aligned and
// streamed. The loop is bound by instruction issue, so kStream is decided
// once per row rather than at each store, and the common one-line prefetch
// takes no loop. kSeams: the groups that hold seam points (group_seams) get
// those points' sums blended in.
// Returns false when pairs read without masks gave a sum that is not finite.
// With a fill value (`outside`, not nullptr), each sum plus fill * outside[b].
template <bool kStream, bool kNoMask, bool kSeams, int K, int kInterp>
GS_CPU_VECTOR_INLINE bool RowGroups(const float* __restrict src, const float* const* rows,
                                    float* __restrict dst, int cnt16, bool pairs, const char* next,
                                    int64_t next_bytes, int64_t lines, const float* outside,
                                    float fill, const SoaTaps<K, kInterp>* __restrict st) {
  // Pairs without masks: a - a is +0 for a finite sum a, NaN for the others.
  constexpr bool kCheck = kNoMask && kInterp == gs::kBilinear;
  I8 bad[2] = {I8{}, I8{}};
  int64_t pf = 0;  // the next byte of `next` to prefetch
  for (int b = 0; b < cnt16; b += 16) {
    if (kSeams && st->group_seams[b / 16] != 0) {
      RowGroup<kStream, kNoMask, true>(src, rows, dst, b, pairs, next, next_bytes, lines, &pf,
                                       outside, fill, st, bad);
    } else {
      RowGroup<kStream, kNoMask, false>(src, rows, dst, b, pairs, next, next_bytes, lines, &pf,
                                        outside, fill, st, bad);
    }
  }
  if constexpr (!kCheck) return true;
  const I8 nonzero = (F8)(bad[0] | bad[1]) != 0.f;  // NaN is not equal to 0
  int any = 0;
  for (int i = 0; i < 8; ++i) any |= nonzero[i];
  return any == 0;
}

// One channel's output row `dst` of the points of a block (cnt of them) from
// its plane `src`: RowGroups, then the points left over (with masks). Returns
// false when pairs read without masks gave a sum that is not finite: it may
// come from a float that is no tap (0 * inf), so the row must be sampled
// again with masks. kSeams as in RowGroups.
template <bool kNoMask, bool kSeams, int K, int kInterp>
GS_CPU_VECTOR_INLINE bool ChannelRow(const float* __restrict src, float* __restrict dst, int cnt,
                                     bool pairs, bool stream, const char* next, int64_t next_bytes,
                                     int64_t lines, const float* outside, float fill,
                                     const SoaTaps<K, kInterp>* __restrict st) {
  const int cnt8 = cnt & ~7;
  const int cnt16 = cnt & ~15;
  // The rows of a pair read: src + pair_step[r] + offset.
  constexpr int kRows = SoaTaps<K, kInterp>::kPairRows;
  const float* rows[kRows];
  for (int r = 0; r < kRows; ++r) rows[r] = src + (pairs ? st->pair_step[r] : 0);
  bool finite;
  if (stream && (reinterpret_cast<uintptr_t>(dst) & 31) == 0) {
    finite = RowGroups<true, kNoMask, kSeams>(src, rows, dst, cnt16, pairs, next, next_bytes,
                                              lines, outside, fill, st);
  } else {
    finite = RowGroups<false, kNoMask, kSeams>(src, rows, dst, cnt16, pairs, next, next_bytes,
                                               lines, outside, fill, st);
  }
  auto tail = [&](int b) GS_CPU_VECTOR {
    F8 v = Dot<false>(pairs, src, rows, st, b);
    if constexpr (kSeams) v = WithSeamSums(v, st, b);
    return outside == nullptr ? v : v + Broadcast8(fill) * Load8(outside + b);
  };
  if (cnt16 < cnt8) StoreOutput(dst + cnt16, tail(cnt16), stream);
  if (cnt8 < cnt) {
    // Tail: the tables are padded to a multiple of 8; stored one by one.
    const F8 v = tail(cnt8);
    for (int b = cnt8; b < cnt; ++b) dst[b] = v[b - cnt8];
  }
  return finite;
}

// Channels-first output rows of the points p0 .. p0 + cnt - 1 (one block of
// `st`), channel after channel; kSeams: pairs with seam points
// (FillSeamTaps), whose sums come first.
template <bool kSeams, int K, int kInterp>
GS_CPU_VECTOR_INLINE void ChannelRows(const Geometry& g, const float* __restrict input,
                                      float* __restrict output, int64_t n, int64_t p0, int cnt,
                                      bool pairs, bool stream, const float* block_grid,
                                      SoaTaps<K, kInterp>* __restrict st) {
  const int64_t channels = g.c, points = g.points, plane = g.plane;
  // The next channel's plane (up to 64 KiB) is prefetched a few lines per
  // group of 16 points, so that its random reads find it in the cache when
  // the input is not there already (as on a first call after other work).
  // The last line is prefetched again by any groups left over.
  const int64_t plane_bytes = plane * int64_t{4};
  const int64_t groups = std::max(1, cnt / 16);
  const int64_t pf_lines = CeilDiv(plane_bytes, groups * 64);  // per group
  const bool prefetch = plane_bytes >= 64 && plane_bytes <= (int64_t{64} << 10);
  // Pairs read without masks until a row's sums are not all finite; then
  // that row again, and the rest of the block, with masks.
  bool no_mask = pairs;
  const float* fill = static_cast<const float*>(g.fill);
  const float* outside = fill != nullptr ? st->outside : nullptr;
  for (int64_t c = 0; c < channels; ++c) {
    const float* src = input + (n * channels + c) * plane;
    float* dst = output + (n * channels + c) * points + p0;
    const char* next = reinterpret_cast<const char*>(src + plane);
    const int64_t lines = prefetch && c + 1 < channels ? pf_lines : 0;
    const float fill_c = fill != nullptr ? fill[c] : 0.f;
    // A finite fill value is added as fill * outside, which is +-0 where
    // outside is 0: the sums are never -0 (they start from +0), so that gives
    // gs::FillTerm's results in fewer instructions. A NaN or infinite one is
    // added by gs::FillTerm in a pass of its own, after the row.
    const bool fill_after = outside != nullptr && !std::isfinite(fill_c);
    const float* row_outside = fill_after ? nullptr : outside;
    if constexpr (kSeams) SeamSums(src, st);
    if (no_mask) {
      no_mask = ChannelRow<true, kSeams>(src, dst, cnt, pairs, stream, next, plane_bytes, lines,
                                         row_outside, fill_c, st);
    }
    if (!no_mask) {
      if constexpr (kInterp == gs::kBilinear) {
        if (pairs && !st->pair_masks_ready) FillPairMasks(block_grid, cnt, g, st);
      }
      ChannelRow<false, kSeams>(src, dst, cnt, pairs, stream, next, plane_bytes, lines,
                                row_outside, fill_c, st);
    }
    if (fill_after) {
      for (int b = 0; b < cnt; ++b) dst[b] = dst[b] + gs::FillTerm(fill_c, outside[b]);
    }
  }
}

// Forward of points [p_begin, p_end) of batch element n, float32, channels
// first.
template <int K, int kInterp>
GS_CPU_VECTOR void ForwardGatherChunk(const Geometry& g, const float* __restrict input,
                                      const float* __restrict grid, float* __restrict output,
                                      int64_t n, int64_t p_begin, int64_t p_end,
                                      SoaTaps<K, kInterp>* st) {
  using ST = SoaTaps<K, kInterp>;
  const bool stream = StreamsOutput(g);
  const bool pairs = kInterp == gs::kBilinear && SamplesPairs(g, kInterp);
  // A "wrap" axis has seam points, which the pairs do not cover (FillSeamTaps).
  const bool wrap_pairs = pairs && gs_ffi::HasAxisPadding(g, gs::kWrap);
  for (int64_t p0 = p_begin; p0 < p_end; p0 += ST::kB) {
    const int cnt = static_cast<int>(std::min<int64_t>(ST::kB, p_end - p0));
    const float* block_grid = grid + (n * g.points + p0) * K;
    if constexpr (kInterp == gs::kBilinear) {
      if (pairs) {
        FillPairs<K, kInterp>(block_grid, cnt, g, st);
        // The points past the last group of 16 are read with masks.
        if (cnt % 16 != 0) FillPairMasks(block_grid, cnt, g, st);
        if (wrap_pairs) FillSeamTaps(block_grid, cnt, g, st);
      }
    }
    if (!pairs) FillSoaTaps<K, kInterp>(block_grid, cnt, g, st);
    if (wrap_pairs && st->seam_count > 0) {
      ChannelRows<true>(g, input, output, n, p0, cnt, pairs, stream, block_grid, st);
    } else {
      ChannelRows<false>(g, input, output, n, p0, cnt, pairs, stream, block_grid, st);
    }
  }
  FinishOutputStores(stream);
}

namespace {

template <int K, int kInterp>
void RunChunk(const Geometry& g, const float* input, const float* grid, float* output, int64_t n,
              int64_t p_begin, int64_t p_end) {
  auto st = NewObject<SoaTaps<K, kInterp>>("tap table");
  ForwardGatherChunk<K, kInterp>(g, input, grid, output, n, p_begin, p_end, st.get());
}

}  // namespace

void ForwardGatherF32(const Geometry& g, int64_t interpolation, const float* input,
                      const float* grid, float* output, int64_t n, int64_t p_begin, int64_t p_end) {
  DispatchKernel(g.k, interpolation, [&](auto k, auto interp) {
    RunChunk<decltype(k)::value, decltype(interp)::value>(g, input, grid, output, n, p_begin,
                                                          p_end);
  });
}

}  // namespace gs_cpu
