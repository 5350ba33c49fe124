// The CPU backward's block for 2D bilinear float32, channels first; see
// bilinear_backward_block.h. Its sums repeat, operation by operation, those
// of the generic block in grid_sample_backward_cpu.cc.
#include "bilinear_backward_block.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "../common/grid_sample_math.h"
#include "grid_sample_cpu.h"
#include "soa_taps.h"
#include "tap_row.h"
#include "vec8.h"

namespace gs_cpu {

namespace {

using Tables = BilinearBackwardTables;
using Rows = TapRowPair<float>;

// The per-axis taps, y restricted to the band.
GS_CPU_VECTOR void FillAxes(const Geometry& g, const BilinearBackwardBlock& blk,
                            Tables* __restrict t) {
  const int cnt = blk.cnt;
  DispatchPadding(g, [&](auto pad, auto align) {
    constexpr int kPad = static_cast<int>(decltype(pad)::value);
    constexpr bool kAlign = decltype(align)::value;
    AxisSoa<2, gs::kBilinear, kPad, kAlign, Tables::kB, true>(blk.coords, cnt, g.w, t->idx[0],
                                                              t->w[0], t->dm[0]);
    AxisSoa<2, gs::kBilinear, kPad, kAlign, Tables::kB, true>(blk.coords + 1, cnt, g.h, t->idx[1],
                                                              t->w[1], t->dm[1]);
  });
  // Bands lie within [0, h], and h fits in int32 (FitsInt32Offsets).
  const int32_t lo = static_cast<int32_t>(std::clamp<int64_t>(blk.band_lo, 0, g.h));
  const int32_t hi = static_cast<int32_t>(std::clamp<int64_t>(blk.band_hi, 0, g.h));
  for (int j = 0; j < 2; ++j) {
    int32_t* __restrict y = t->idx[1][j];
    for (int b = 0; b < cnt; ++b) y[b] = (y[b] >= lo) & (y[b] < hi) ? y[b] : -1;
  }
  // Past the last point, up to the group of 8: no taps (lanes never listed).
  for (int a = 0; a < 2; ++a) {
    for (int i = 0; i < 2; ++i) {
      for (int b = cnt; b < ((cnt + 7) & ~7); ++b) {
        t->idx[a][i][b] = -1;
        t->w[a][i][b] = 0.f;
      }
    }
  }
}

// The points sorted into `full` and `part` as FillTaps sorts them, eight at
// a time: which have all taps in range (x1 = x0 + 1, as FillTaps requires;
// only huge widths can break it), their row offsets and tap weights (wx *
// wy, stored per point), and the tap counts of the others.
GS_CPU_VECTOR void SortPoints(const Geometry& g, int cnt, Tables* __restrict t) {
  const int32_t width = static_cast<int32_t>(g.w);
  int n_full = 0, n_part = 0;
  int unsorted[Tables::kB];
  uint8_t taps[Tables::kB];
  for (int b = 0; b < cnt; b += 8) {
    const I8 x0 = LoadI8(t->idx[0][0] + b), x1 = LoadI8(t->idx[0][1] + b);
    const I8 y0 = LoadI8(t->idx[1][0] + b), y1 = LoadI8(t->idx[1][1] + b);
    // -1 where in range, else 0.
    const I8 x0_in = x0 >= 0, x1_in = x1 >= 0, y0_in = y0 >= 0, y1_in = y1 >= 0;
    const I8 full = x0_in & (x1 == x0 + 1) & y0_in & y1_in;
    // Offsets of full points: < plane <= INT32_MAX (the others' are unused;
    // indices lie in [-1, size), so none overflows).
    StoreI8(t->row_off[0] + b, y0 * width + x0);
    StoreI8(t->row_off[1] + b, y1 * width + x0);
    const F8 wx0 = Load8(t->w[0][0] + b), wx1 = Load8(t->w[0][1] + b);
    const F8 wy0 = Load8(t->w[1][0] + b), wy1 = Load8(t->w[1][1] + b);
    // Weights of taps (y0, x0), (y0, x1), (y1, x0), (y1, x1), then per point:
    // u0 holds points 0 and 4, u1 points 1 and 5, u2 2 and 6, u3 3 and 7.
    const F8 w00 = wx0 * wy0, w01 = wx1 * wy0, w10 = wx0 * wy1, w11 = wx1 * wy1;
    const F8 t0 = __builtin_shufflevector(w00, w01, 0, 8, 1, 9, 4, 12, 5, 13);
    const F8 t1 = __builtin_shufflevector(w00, w01, 2, 10, 3, 11, 6, 14, 7, 15);
    const F8 t2 = __builtin_shufflevector(w10, w11, 0, 8, 1, 9, 4, 12, 5, 13);
    const F8 t3 = __builtin_shufflevector(w10, w11, 2, 10, 3, 11, 6, 14, 7, 15);
    const F8 u0 = __builtin_shufflevector(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13);
    const F8 u1 = __builtin_shufflevector(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
    const F8 u2 = __builtin_shufflevector(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);
    const F8 u3 = __builtin_shufflevector(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
    Store8(t->tap_w[b], __builtin_shufflevector(u0, u1, 0, 1, 2, 3, 8, 9, 10, 11));
    Store8(t->tap_w[b + 2], __builtin_shufflevector(u2, u3, 0, 1, 2, 3, 8, 9, 10, 11));
    Store8(t->tap_w[b + 4], __builtin_shufflevector(u0, u1, 4, 5, 6, 7, 12, 13, 14, 15));
    Store8(t->tap_w[b + 6], __builtin_shufflevector(u2, u3, 4, 5, 6, 7, 12, 13, 14, 15));
    // Taps in range: (x0 in + x1 in) * (y0 in + y1 in).
    const I8 count = (x0_in + x1_in) * (y0_in + y1_in);
    const int lanes = std::min(8, cnt - b);
    for (int i = 0; i < lanes; ++i) {
      if (full[i] != 0) {
        t->full[n_full++] = b + i;
      } else {
        taps[n_part] = static_cast<uint8_t>(count[i]);
        unsorted[n_part++] = b + i;
      }
    }
  }
  t->n_full = n_full;
  // Stable counting sort by tap count.
  int start[6] = {};
  for (int i = 0; i < n_part; ++i) ++start[taps[i] + 1];
  for (int k = 0; k < 5; ++k) start[k + 1] += start[k];
  std::copy(start, start + 6, t->part_begin);
  for (int i = 0; i < n_part; ++i) t->part[start[taps[i]]++] = unsorted[i];
}

// The planes of channels [c0, c0 + kG) of batch element n: grad_output,
// input and grad_input (null without it).
template <int kG>
struct Planes {
  const float* go[kG];
  const float* src[kG];
  float* gi[kG];
  Planes(const Geometry& g, const BilinearBackwardBlock& blk, int64_t c0) {
    for (int k = 0; k < kG; ++k) {
      const int64_t nc = blk.n * g.c + c0 + k;
      go[k] = blk.grad_out + nc * g.points;
      src[k] = blk.input + nc * g.plane;
      gi[k] = blk.gi != nullptr ? blk.gi + nc * g.plane : nullptr;
    }
  }
};

// Points with all taps in range, channels of `planes`: the scatter into
// grad_input (kGi) and the per-tap channel sums (kGrad), two rows of two
// taps at a time.
template <int kG, bool kGi, bool kGrad>
GS_CPU_VECTOR void FullPoints(const Planes<kG>& planes, const BilinearBackwardBlock& blk,
                              Tables* __restrict t) {
  for (int i = 0; i < t->n_full; ++i) {
    const int b = t->full[i];
    const int64_t p = blk.pidx[b];
    const int64_t off0 = t->row_off[0][b], off1 = t->row_off[1][b];
    float gv[kG];
    for (int k = 0; k < kG; ++k) gv[k] = planes.go[k][p];
    if constexpr (kGi) {
      const Rows w = Rows::Load(t->tap_w[b]);
      for (int k = 0; k < kG; ++k) {
        Rows v = Rows::Load(planes.gi[k] + off0, planes.gi[k] + off1);
        v.AddScaled(gv[k], w);
        v.Store(planes.gi[k] + off0, planes.gi[k] + off1);
      }
    }
    if constexpr (kGrad) {
      Rows sum = Rows::Load(t->tap_sum[b]);
      for (int k = 0; k < kG; ++k) {
        sum.AddScaled(gv[k], Rows::Load(planes.src[k] + off0, planes.src[k] + off1));
      }
      sum.Store(t->tap_sum[b]);
    }
  }
}

// The other points: their in-range taps, in tap order, in part_off and (the
// weights) tap_w.
GS_CPU_VECTOR void PartTaps(const Geometry& g, Tables* __restrict t) {
  const int32_t w32 = static_cast<int32_t>(g.w);
  for (int i = t->part_begin[0]; i < t->part_begin[5]; ++i) {
    const int b = t->part[i];
    int u = 0;
    for (int j = 0; j < 2; ++j) {
      for (int k = 0; k < 2; ++k) {
        const int32_t x = t->idx[0][k][b], y = t->idx[1][j][b];
        if (x < 0 || y < 0) continue;
        t->part_off[b][u] = y * w32 + x;  // < plane <= INT32_MAX
        t->tap_w[b][u++] = t->w[0][k][b] * t->w[1][j][b];
      }
    }
  }
}

// The other points, channels of `planes`: as FullPoints, tap by tap.
template <int kG, bool kGi, bool kGrad>
GS_CPU_VECTOR void PartPoints(const Planes<kG>& planes, const BilinearBackwardBlock& blk,
                              Tables* __restrict t) {
  for (int nt = 1; nt <= 4; ++nt) {
    for (int i = t->part_begin[nt]; i < t->part_begin[nt + 1]; ++i) {
      const int b = t->part[i];
      const int64_t p = blk.pidx[b];
      float gv[kG];
      for (int k = 0; k < kG; ++k) gv[k] = planes.go[k][p];
      for (int u = 0; u < nt; ++u) {
        const int64_t off = t->part_off[b][u];
        if constexpr (kGi) {
          const float wt = t->tap_w[b][u];
          for (int k = 0; k < kG; ++k) planes.gi[k][off] += gv[k] * wt;
        }
        if constexpr (kGrad) {
          float sum = t->tap_sum[b][u];
          for (int k = 0; k < kG; ++k) sum += gv[k] * planes.src[k][off];
          t->tap_sum[b][u] = sum;
        }
      }
    }
  }
}

// All points, channel groups of up to 4 (any grouping gives the same sums).
template <bool kGi, bool kGrad>
GS_CPU_VECTOR void AllPoints(const Geometry& g, const BilinearBackwardBlock& blk,
                             Tables* __restrict t) {
  auto group = [&](auto size, int64_t c) {
    constexpr int kG = decltype(size)::value;
    const Planes<kG> planes(g, blk, c);
    FullPoints<kG, kGi, kGrad>(planes, blk, t);
    PartPoints<kG, kGi, kGrad>(planes, blk, t);
  };
  int64_t c = blk.c_begin;
  for (; c + 4 <= blk.c_end; c += 4) group(std::integral_constant<int, 4>{}, c);
  switch (blk.c_end - c) {
    case 3: return group(std::integral_constant<int, 3>{}, c);
    case 2: return group(std::integral_constant<int, 2>{}, c);
    case 1: return group(std::integral_constant<int, 1>{}, c);
    default: return;
  }
}

// The grid gradient of each point from its per-tap sums A (of its taps in
// range, in tap order): sum over taps of d(weight)/d(coordinate) * A, the
// derivatives of bilinear's weights being -1 and +1 times the other axis'
// weight; then times the chain factor.
GS_CPU_VECTOR void FoldGrid(const BilinearBackwardBlock& blk, const Tables* __restrict t) {
  for (int b = 0; b < blk.cnt; ++b) {
    const float* a = t->tap_sum[b];
    float sx = 0.f, sy = 0.f;
    int u = 0;
    for (int j = 0; j < 2; ++j) {
      for (int k = 0; k < 2; ++k) {
        if (t->idx[0][k][b] < 0 || t->idx[1][j][b] < 0) continue;
        const float wx = t->w[0][k][b], wy = t->w[1][j][b];
        sx += ((k == 0 ? -1.f : 1.f) * wy) * a[u];
        sy += (wx * (j == 0 ? -1.f : 1.f)) * a[u];
        ++u;
      }
    }
    blk.grid_grad[2 * b] = sx * t->dm[0][b];
    blk.grid_grad[2 * b + 1] = sy * t->dm[1][b];
  }
}

}  // namespace

void BilinearBackwardBlockF32(const Geometry& g, const BilinearBackwardBlock& blk,
                              BilinearBackwardTables* tables) {
  FillAxes(g, blk, tables);
  SortPoints(g, blk.cnt, tables);
  PartTaps(g, tables);
  const bool gi = blk.gi != nullptr, grad = blk.grid_grad != nullptr;
  if (grad) std::fill(&tables->tap_sum[0][0], &tables->tap_sum[0][0] + 4 * blk.cnt, 0.f);
  if (gi && grad) {
    AllPoints<true, true>(g, blk, tables);
  } else if (gi) {
    AllPoints<true, false>(g, blk, tables);
  } else if (grad) {
    AllPoints<false, true>(g, blk, tables);
  }
  if (grad) FoldGrid(blk, tables);
}

}  // namespace gs_cpu
