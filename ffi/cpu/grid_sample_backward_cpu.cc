// XLA FFI CPU handlers: grid_sample backward (grad_input and/or grad_grid,
// and with version 3 the fill value's gradient, fill_gradients.h), by the
// strategy strategies.h chooses (or the test target forces).
//
// Deterministic regardless of the number of threads: no atomics on floats,
// and a work split that depends on shapes only. A task is (batch element n,
// channel block, band), where a band is a range of the last spatial axis (y
// in 2D, z in 3D). The task owns that region of grad_input for its channels
// and visits, in point order, the points with a tap in it, applying only the
// taps inside. So each grad_input element is accumulated by one task, in
// point order, with no extra buffers or reductions. A point whose taps
// straddle two bands gets one grid-gradient partial from each, added in band
// order; the partials of channel blocks are added in block order.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "../common/ffi_contract.h"
#include "../common/handler_exceptions.h"
#include "backward_bands.h"
#include "channels_last_backward.h"
#include "fill_gradients.h"
#include "grid_sample_cpu.h"
#include "half_precision.h"
#include "nearest_ranges_backward.h"
#include "parallel.h"
#include "strategies.h"
#include "tap_row.h"
#include "xla/ffi/api/ffi.h"

namespace gs_cpu {
namespace {

// How a call's grad_input work splits into tasks: (batch element, channel
// block, band), where a band is a range of the last spatial axis (generic
// tasks) or of plane elements (nearest ranges).
struct BackwardPlan {
  int64_t cblock = 1;   // channels per block
  int64_t nblocks = 1;  // channel blocks
  int64_t bands = 1;    // bands
  bool nearest_ranges = false;
};

constexpr int64_t kTargetTasks = 8;

// Shape-only plan: aim for ~8 tasks so that both small-N/large-output and
// large-N cases keep all threads busy. Bands come before channel blocks:
// every channel block recomputes the taps of all its points, while bands
// split the points (only those straddling two bands are done twice). Bands
// are at least one tap span (taps_per_axis) tall, so a point's taps fall in
// at most two of them. coord_bytes: the size of a point's coordinates.
BackwardPlan PlanBands(const Geometry& g, int taps_per_axis, int64_t coord_bytes) {
  BackwardPlan p;
  const int64_t n = std::max<int64_t>(1, g.n);
  const int64_t max_bands = std::clamp<int64_t>(BandAxisSize(g) / taps_per_axis, 1, kMaxBands);
  p.bands = std::clamp<int64_t>(CeilDiv(kTargetTasks, n), 1, max_bands);
  p.bands = std::min<int64_t>(p.bands, std::max<int64_t>(1, g.points / 1024));
  // The band lists take about 10 bytes a point plus its coordinates: keep
  // them under 1 GiB.
  if (g.n * g.points > (int64_t{1} << 30) / (10 + coord_bytes)) p.bands = 1;
  const int64_t max_blocks = std::max<int64_t>(1, CeilDiv(g.c, 8));  // >= 8 channels a block
  p.nblocks = std::clamp<int64_t>(CeilDiv(kTargetTasks, n * p.bands), 1, max_blocks);
  p.cblock = std::max<int64_t>(1, CeilDiv(g.c, p.nblocks));
  p.nblocks = std::max<int64_t>(1, CeilDiv(g.c, p.cblock));
  return p;
}

// The plan of the nearest tasks that own ranges of plane elements
// (nearest_ranges_backward.h), from the band plan `p`: NearestStagingRanges(g)
// ranges, but 2 rather than a single task where the band plan has bands
// (enough points). Channel blocks of a multiple of 8, up to kTargetTasks
// tasks.
void PlanNearestRanges(const Geometry& g, BackwardPlan* p) {
  int64_t ranges = NearestStagingRanges(g);
  const int64_t groups = std::max<int64_t>(1, CeilDiv(g.c, 8));
  const int64_t n = std::max<int64_t>(1, g.n);
  if (n * groups * ranges == 1 && p->bands > 1) ranges = 2;
  const int64_t nblocks = std::clamp<int64_t>(CeilDiv(kTargetTasks, n * ranges), 1, groups);
  p->bands = ranges;
  p->cblock = CeilDiv(groups, nblocks) * 8;
  p->nblocks = CeilDiv(g.c, p->cblock);
  p->nearest_ranges = true;
}

// The arrays of a call; grad_input and grad_grid null when not wanted.
// With a fill value (fill_call: the call's geometry, with its "constant" axes
// and fill value), the kernel may run the fill term's gradients itself
// (FuseFill): its grid part added to grad_grid, its sums per (batch element,
// chunk) to the rows of fill_partials (null: not wanted).
template <typename T>
struct BackwardArrays {
  const T* grad_out;
  const T* input;
  const T* grid;
  T* grad_input;
  T* grad_grid;
  const Geometry* fill_call = nullptr;
  T* fill_partials = nullptr;
};

// One task's share: batch element n, channels [c_begin, c_end), taps whose
// last-axis index is in [band_lo, band_hi); its points are list[j] (indices
// within n) when `list` is given, else p_begin + j, for j < count, with
// coordinates coords[j * K ..]. grad_input accumulates into `gi` (null: not
// wanted); point j's grid-gradient sums go to grid_out[j * K + a] (null: not
// wanted).
template <typename T>
struct BackwardTask {
  int64_t n, c_begin, c_end, band_lo, band_hi;
  const int64_t* list;
  const T* coords;
  int64_t p_begin, count;
  T* gi;
  T* grid_out;
};

// The generic block of points: taps from FillTaps, then channel loops.
// Channels first, points with every tap in range first (float32: the row
// form, each x-run of taps as one TapRow; float64: tap by tap), then the
// others by tap count; channels last, point by point over the channel runs
// (channels_last_backward.h, AVX2 where the strategy says so).
template <typename T, int K, int kInterp, bool kChannelsLast>
class GenericBlock {
 public:
  using TB = TapBlock<T, K, kInterp>;
  static constexpr int kTaps = TB::kTaps;
  static constexpr int kT1 = TB::kT1;
  static constexpr int64_t kBlock = TB::kBlock;
  // The row form of full points (channels first, float32; float64 takes the
  // point form, one form less to compile).
  static constexpr bool kRows = !kChannelsLast;

  GenericBlock(const Geometry& g, const BackwardArrays<T>& arrays, bool avx2, bool grad)
      : g_(g),
        a_(arrays),
        avx2_(avx2),
        grad_(grad),
        tb_(NewObject<TB>("tap table")),
        gacc_(grad ? NewArray<T>("grid-gradient sums", kBlock * K) : nullptr),
        acc_(kRows && grad ? NewArray<T>("per-tap sums", kBlock * kTaps) : nullptr) {}

  // Points pidx[b] (within batch element t.n), coordinates block_grid, b <
  // cnt; grid-gradient sums to grid_out[b * K + a].
  void Run(const BackwardTask<T>& t, const int64_t* pidx, const T* block_grid, int cnt,
           T* grid_out) {
    FillTaps<T, K, kInterp>(block_grid, cnt, g_, grad_, tb_.get(), t.band_lo, t.band_hi);
    if (grad_) std::fill(gacc_.get(), gacc_.get() + cnt * K, T(0));
    ChannelLoops(t, pidx, cnt);
    if (grad_) {
      for (int b = 0; b < cnt; ++b) {
        for (int a = 0; a < K; ++a) grid_out[b * K + a] = gacc_[b * K + a] * tb_->adm[a][b];
      }
    }
  }

 private:
  // The channel loops of a block: channels first or last, the AVX2 build
  // where the strategy says so.
  void ChannelLoops(const BackwardTask<T>& t, const int64_t* pidx, int cnt) {
#if GS_CPU_HAVE_AVX2_PATH
    if constexpr (std::is_same_v<T, float>) {
      if (avx2_) return LoopsAvx2(t, pidx, cnt);
    }
#endif
    Loops(t, pidx, cnt);
  }

  GS_CPU_INLINE void Loops(const BackwardTask<T>& t, const int64_t* pidx, int cnt) {
    if constexpr (kChannelsLast) {
      ChannelsLast(t, pidx, cnt);
    } else {
      Rows(t, pidx, cnt);
    }
  }

#if GS_CPU_HAVE_AVX2_PATH
  // The same loops compiled for AVX2 + FMA (kChannelsLastAvx2, float32; run only
  // where HasAvx2Fma()). Contraction is off, so the same bits. The loops are
  // GS_CPU_INLINE: clang's flatten inlines only the calls written here.
  __attribute__((target("avx2,fma"), flatten)) void LoopsAvx2(const BackwardTask<T>& t,
                                                              const int64_t* pidx, int cnt) {
    Loops(t, pidx, cnt);
  }
#endif

  // Channels first. The grid gradient is kept as per-tap sums over channels,
  // A[t] = sum_c gv * input[t] (channels added in channel order), folded with
  // the weight derivatives once per point: sum_t dw[t] * A[t], taps in order.
  // The one order of every channels-first strategy.
  GS_CPU_INLINE void Rows(const BackwardTask<T>& t, const int64_t* pidx, int cnt) {
    if (grad_) std::fill(acc_.get(), acc_.get() + cnt * kTaps, T(0));
    if (t.gi != nullptr && grad_) {
      RowChannels<true, true>(t, pidx);
    } else if (t.gi != nullptr) {
      RowChannels<true, false>(t, pidx);
    } else if (grad_) {
      RowChannels<false, true>(t, pidx);
    }
    if (!grad_) return;
    for (int b = 0; b < cnt; ++b) {
      const T* a = acc_.get() + b * kTaps;
      for (int ax = 0; ax < K; ++ax) {
        T sum = T(0);
        for (int k = 0; k < tb_->ntaps[b]; ++k) sum += tb_->gw[b][ax][k] * a[k];
        gacc_[b * K + ax] += sum;
      }
    }
  }

  // Groups of 4 channels, then the rest one at a time: a group shares the
  // loads of the point's tables and sums; each channel is added in channel
  // order, whatever the grouping.
  template <bool kGi, bool kGrad>
  GS_CPU_INLINE void RowChannels(const BackwardTask<T>& t, const int64_t* pidx) {
    int64_t c = t.c_begin;
    for (; c + 4 <= t.c_end; c += 4) RowGroup<kGi, kGrad, 4>(t, c, pidx);
    for (; c < t.c_end; ++c) RowGroup<kGi, kGrad, 1>(t, c, pidx);
  }

  // Channels c0 .. c0 + kG - 1: the full points, each x-run of kT1 taps read
  // and updated as one TapRow (bilinear: two rows as one TapRowPair), then
  // the others (in-range taps first, by tap count) tap by tap.
  template <bool kGi, bool kGrad, int kG>
  GS_CPU_INLINE void RowGroup(const BackwardTask<T>& t, int64_t c0, const int64_t* pidx) {
    using Row = std::conditional_t<kT1 == 2, TapRowPair<T>, TapRow<T, kT1>>;
    constexpr int kStep = kT1 == 2 ? 4 : kT1;  // taps per Row
    const T* go[kG];
    const T* src[kG];
    T* gi[kG];
    for (int k = 0; k < kG; ++k) {
      const int64_t nc = t.n * g_.c + c0 + k;
      go[k] = a_.grad_out + nc * g_.points;
      src[k] = a_.input + nc * g_.plane;
      gi[k] = kGi ? t.gi + nc * g_.plane : nullptr;
    }
    auto load = [](const T* p, int64_t off0, int64_t off1) {
      if constexpr (kT1 == 2)
        return Row::Load(p + off0, p + off1);
      else
        return Row::Load(p + off0);
    };
    for (int i = 0; i < tb_->n_full; ++i) {
      const int b = tb_->full[i];
      T gv[kG];
      for (int k = 0; k < kG; ++k) gv[k] = go[k][pidx[b]];
      for (int r = 0; r < kTaps; r += kStep) {
        // Bilinear: the point's two rows (taps r, r + 1 and r + 2, r + 3).
        const int64_t off0 = tb_->off[b][r], off1 = kT1 == 2 ? tb_->off[b][r + 2] : 0;
        if constexpr (kGi) {
          const Row w = Row::Load(&tb_->w[b][r]);
          for (int k = 0; k < kG; ++k) {
            Row v = load(gi[k], off0, off1);
            v.AddScaled(gv[k], w);
            if constexpr (kT1 == 2)
              v.Store(gi[k] + off0, gi[k] + off1);
            else
              v.Store(gi[k] + off0);
          }
        }
        if constexpr (kGrad) {
          T* a = acc_.get() + b * kTaps + r;
          Row sum = Row::Load(a);
          for (int k = 0; k < kG; ++k) sum.AddScaled(gv[k], load(src[k], off0, off1));
          sum.Store(a);
        }
      }
    }
    for (int i = tb_->part_begin[1]; i < tb_->part_begin[kTaps + 1]; ++i) {
      const int b = tb_->part[i];
      T gv[kG];
      for (int k = 0; k < kG; ++k) gv[k] = go[k][pidx[b]];
      for (int u = 0; u < tb_->ntaps[b]; ++u) {
        const int64_t off = tb_->off[b][u];
        if constexpr (kGi) {
          for (int k = 0; k < kG; ++k) gi[k][off] += tb_->w[b][u] * gv[k];
        }
        if constexpr (kGrad) {
          T sum = acc_[b * kTaps + u];
          for (int k = 0; k < kG; ++k) sum += gv[k] * src[k][off];
          acc_[b * kTaps + u] = sum;
        }
      }
    }
  }

  // Channels last: each point's taps over the task's channels.
  GS_CPU_INLINE void ChannelsLast(const BackwardTask<T>& t, const int64_t* pidx, int cnt) {
    const int64_t cstride = g_.c;
    const ChannelsLastBlock<T> cl{a_.grad_out + t.n * g_.points * cstride,
                                  a_.input + t.n * g_.plane * cstride,
                                  t.gi != nullptr ? t.gi + t.n * g_.plane * cstride : nullptr,
                                  cstride,
                                  t.c_begin,
                                  t.c_end};
    ChannelsLastPoints(cl, *tb_, cnt, pidx, grad_ ? gacc_.get() : nullptr);
  }

  const Geometry& g_;
  const BackwardArrays<T>& a_;
  const bool avx2_, grad_;
  std::unique_ptr<TB> tb_;
  std::unique_ptr<T[]> gacc_, acc_;
};

// Task t's points, in blocks of the generic block's size; with `fill` (the
// task holds every channel and point of its batch element, FuseFill), each
// block's fill term gradients right after it, while its grad_output is in
// the cache.
template <typename T, int K, int kInterp, bool kChannelsLast>
void RunTask(const Geometry& g, const BackwardArrays<T>& arrays, BackwardStrategy strategy,
             const BackwardTask<T>& t, bool fill) {
  using Block = GenericBlock<T, K, kInterp, kChannelsLast>;
  Block block(g, arrays, strategy == BackwardStrategy::kChannelsLastAvx2, t.grid_out != nullptr);
  std::unique_ptr<int64_t[]> pidx = NewArray<int64_t>("point indices", Block::kBlock);
  for (int64_t j0 = 0; j0 < t.count; j0 += Block::kBlock) {
    const int cnt = static_cast<int>(std::min(Block::kBlock, t.count - j0));
    for (int b = 0; b < cnt; ++b) pidx[b] = t.list != nullptr ? t.list[j0 + b] : t.p_begin + j0 + b;
    T* grid_out = t.grid_out != nullptr ? t.grid_out + j0 * K : nullptr;
    block.Run(t, pidx.get(), t.coords + j0 * K, cnt, grid_out);
    if (!fill) continue;
    T* partial = nullptr;
    if (arrays.fill_partials != nullptr) {
      partial = arrays.fill_partials + (t.n * CeilDiv(g.points, kFillChunk) + j0 / kFillChunk) * g.c;
      if (j0 % kFillChunk == 0) std::fill(partial, partial + g.c, T(0));
    }
    FillGradientsOfPoints<T>(*arrays.fill_call, kInterp, arrays.grad_out, arrays.grid,
                             static_cast<const T*>(arrays.fill_call->fill), t.n, j0, j0 + cnt,
                             arrays.grad_grid, /*add_to_grid=*/true, partial);
  }
}

// Whether the tasks of `plan` run the fill term's gradients (RunTask): where
// each holds every channel and point of a batch element (one band, one
// channel block), in blocks that are runs of the pass's sub-blocks within
// its chunks, so that the sums are the separate pass's, bit for bit.
template <int kBlock>
bool FuseFill(const BackwardPlan& plan) {
  return plan.bands == 1 && plan.nblocks == 1 && !plan.nearest_ranges &&
         kBlock % kFillBlock == 0 && kFillChunk % kBlock == 0;
}

// Zeroes the part of grad_input task t owns: its channels x its band.
template <typename T>
void ZeroOwnedRegion(const Geometry& g, const BackwardTask<T>& t) {
  const int64_t per_band_row = g.k == 2 ? g.w : g.h * g.w;
  const int64_t s_begin = t.band_lo * per_band_row, s_end = t.band_hi * per_band_row;
  if (!g.channels_last) {
    for (int64_t c = t.c_begin; c < t.c_end; ++c) {
      T* row = t.gi + (t.n * g.c + c) * g.plane;
      std::fill(row + s_begin, row + s_end, T(0));
    }
  } else {
    for (int64_t s = s_begin; s < s_end; ++s) {
      T* row = t.gi + (t.n * g.plane + s) * g.c;
      std::fill(row + t.c_begin, row + t.c_end, T(0));
    }
  }
}

// The grid gradient from the tasks' partial sums, in a fixed order: per
// point and axis, its entry in its first band plus, if it straddles, its
// entry in the next band, per channel block, the blocks added in block
// order. Without bands an entry is a point.
template <typename T>
void ReduceGridPartials(ffi::ThreadPool& pool, const Geometry& g, const BackwardPlan& plan,
                        const BandLists<T>& lists, int64_t entries, const T* parts, T* grad_grid) {
  const int K = g.k;
  const int64_t nblocks = plan.nblocks, stride = entries * K;
  if (plan.bands == 1) {
    constexpr int64_t kReduceChunk = 1 << 16;
    const int64_t size = g.n * g.points * K;
    ParallelFor(pool, CeilDiv(size, kReduceChunk), [&](int64_t chunk) {
      const int64_t i0 = chunk * kReduceChunk, i1 = std::min(size, i0 + kReduceChunk);
      for (int64_t i = i0; i < i1; ++i) {
        T sum = parts[i];
        for (int64_t b = 1; b < nblocks; ++b) sum = sum + parts[b * stride + i];
        grad_grid[i] = sum;
      }
    });
    return;
  }
  ParallelFor(pool, g.n * CeilDiv(g.points, kBandChunk), [&](int64_t chunk) {
    ForEachEntry(lists, g.points, plan.bands, chunk,
                 [&](int64_t q, int64_t, int64_t e0, int64_t e1) {
                   const T* p0 = parts + e0 * K;
                   const T* p1 = e1 >= 0 ? parts + e1 * K : nullptr;
                   for (int a = 0; a < K; ++a) {
                     T sum = p1 != nullptr ? p0[a] + p1[a] : p0[a];
                     for (int64_t b = 1; b < nblocks; ++b) {
                       const T* b0 = p0 + b * stride;
                       sum = sum + (p1 != nullptr ? b0[a] + p1[b * stride + a] : b0[a]);
                     }
                     grad_grid[q * K + a] = sum;
                   }
                 });
  });
}

// Nearest float32 by ranges of plane elements (nearest_ranges_backward.h):
// grad_input only (nearest has no grid gradient).
template <int K>
void NearestRangesBackward(ffi::ThreadPool& pool, const Geometry& g, const BackwardPlan& plan,
                           const BackwardArrays<float>& a) {
  const int64_t bands = plan.bands;
  // With several tasks per batch element, the points' tap offsets are
  // computed once, for all of them.
  std::unique_ptr<int32_t[]> offsets;
  if (bands * plan.nblocks > 1) {
    offsets = NewArray<int32_t>("nearest tap offsets", g.n * g.points);
    ParallelForPoints(pool, g, int64_t{1} << 14, [&](int64_t n, int64_t p_begin, int64_t p_end) {
      NearestTapOffsetsF32<K>(g, a.grid, n, p_begin, p_end, offsets.get());
    });
  }
  ParallelFor(pool, g.n * plan.nblocks * bands, [&](int64_t task) {
    const int64_t band = task % bands, blk = (task / bands) % plan.nblocks;
    const int64_t n = task / (bands * plan.nblocks);
    const int64_t c_begin = blk * plan.cblock, c_end = std::min(g.c, c_begin + plan.cblock);
    const NearestBackwardTask t{n,
                                c_begin,
                                c_end,
                                NearestRangeStart(band, bands, g.plane),
                                NearestRangeStart(band + 1, bands, g.plane),
                                a.grid,
                                offsets.get(),
                                a.grad_out,
                                a.grad_input};
    NearestRangesTaskF32<K>(g, t);
  });
}

// Returns whether the tasks ran the fill term's gradients too (FuseFill).
template <typename T, int K, int kInterp, bool kChannelsLast>
bool BackwardKernel(ffi::ThreadPool& pool, const Geometry& g, BackwardStrategy strategy,
                    const BackwardArrays<T>& a) {
  constexpr int kT1 = gs::TapsPerAxis(kInterp);
  constexpr int kTaps = TapBlock<T, K, kInterp>::kTaps;
  constexpr int64_t kBlock = TapBlock<T, K, kInterp>::kBlock;
  const int64_t points = g.points, grid_size = g.n * points * K;
  const bool need_gg = a.grad_grid != nullptr && kInterp != gs::kNearest;
  // Without channels grad_input is empty and grad_grid a sum of nothing: no tasks.
  if (a.grad_grid != nullptr && (!need_gg || g.c == 0)) {
    std::fill(a.grad_grid, a.grad_grid + grid_size, T(0));
  }
  if (g.n == 0 || g.c == 0) return false;
  auto run = [&](const BackwardTask<T>& t, bool fill) {
    RunTask<T, K, kInterp, kChannelsLast>(g, a, strategy, t, fill);
  };
  const int64_t band_axis = BandAxisSize(g);
  if (a.grad_input == nullptr) {
    if (!need_gg) return false;
    // Grid gradient only: chunks of points, all channels.
    const int64_t pts = PointsPerChunk(points, g.c, kTaps, kBlock);
    ParallelForPoints(pool, g, pts, [&](int64_t n, int64_t p_begin, int64_t p_end) {
      const int64_t q = n * points + p_begin;
      run({n, 0, g.c, 0, band_axis, nullptr, a.grid + q * K, p_begin, p_end - p_begin, nullptr,
           a.grad_grid + q * K}, false);
    });
    return false;
  }
  BackwardPlan plan = PlanBands(g, kT1, K * sizeof(T));
  if constexpr (kInterp == gs::kNearest && std::is_same_v<T, float>) {
    if (strategy == BackwardStrategy::kNearestRanges) {
      PlanNearestRanges(g, &plan);
      NearestRangesBackward<K>(pool, g, plan, a);
      return false;
    }
  }
  const int64_t bands = plan.bands;
  const bool fill = a.fill_call != nullptr && FuseFill<TapBlock<T, K, kInterp>::kBlock>(plan);
  BandLists<T> lists;
  if (bands > 1) BuildBandLists<T, K, kInterp>(pool, g, a.grid, bands, &lists);
  // Grid-gradient partials per (channel block, entry) unless there is one
  // block and one band. Entries: those of the band lists, else the points.
  const int64_t entries = bands > 1 ? lists.entries : g.n * points;
  const bool split_grid = need_gg && (plan.nblocks > 1 || bands > 1);
  std::unique_ptr<T[]> parts(
      split_grid ? NewArray<T>("grid-gradient partials", plan.nblocks * entries * K) : nullptr);
  ParallelFor(pool, g.n * plan.nblocks * bands, [&](int64_t task) {
    const int64_t band = task % bands, blk = (task / bands) % plan.nblocks;
    const int64_t n = task / (bands * plan.nblocks);
    const int64_t c_begin = blk * plan.cblock;
    BackwardTask<T> t{n,
                      c_begin,
                      std::min(g.c, c_begin + plan.cblock),
                      BandStart(band, bands, band_axis),
                      BandStart(band + 1, bands, band_axis),
                      nullptr,
                      a.grid + n * points * K,
                      0,
                      points,
                      a.grad_input,
                      nullptr};
    ZeroOwnedRegion(g, t);
    int64_t first_entry = n * points;
    if (bands > 1) {
      first_entry = lists.begin[n * bands + band];
      t.list = lists.points.get() + first_entry;
      t.coords = lists.coords.get() + first_entry * K;
      t.count = lists.begin[n * bands + band + 1] - first_entry;
    }
    if (split_grid) {
      t.grid_out = parts.get() + (blk * entries + first_entry) * K;
    } else if (need_gg) {
      t.grid_out = a.grad_grid + n * points * K;
    }
    run(t, fill);
  });
  if (split_grid) ReduceGridPartials(pool, g, plan, lists, entries, parts.get(), a.grad_grid);
  return fill;
}

// The float32 or float64 kernel (dt) of `strategy` on the buffers;
// grad_input, grad_grid, grad_fill may be null (not wanted). With a fill
// value (g.fill: the call has a "constant" axis), the kernels compute the
// "zeros" gradients, and the fill term's (FillGradients) follow: its part of
// the grid gradient added to theirs, and the fill value's.
ffi::Error BackwardTyped(ffi::ThreadPool& pool, const Geometry& g, ffi::DataType dt,
                         int64_t interpolation, BackwardStrategy strategy, const void* grad_output,
                         const void* input, const void* grid, void* grad_input, void* grad_grid,
                         void* grad_fill) {
  Geometry zeros = g;
  zeros.fill = nullptr;  // the kernels' taps of a "constant" axis are those of "zeros"
  const bool fill = g.fill != nullptr && (grad_grid != nullptr || grad_fill != nullptr);
  return Dispatch(dt, g.k, interpolation, g.channels_last,
                  [&](auto fmt, auto k, auto interp, auto cl) -> ffi::Error {
                    using T = decltype(fmt);
                    BackwardArrays<T> arrays{
                        static_cast<const T*>(grad_output), static_cast<const T*>(input),
                        static_cast<const T*>(grid), static_cast<T*>(grad_input),
                        static_cast<T*>(grad_grid)};
                    std::unique_ptr<T[]> partials;
                    if (fill) {
                      arrays.fill_call = &g;
                      if (grad_fill != nullptr && g.n * g.points > 0) {
                        const int64_t rows = g.n * CeilDiv(g.points, kFillChunk);
                        partials = NewArray<T>("fill-gradient partial sums", rows * g.c);
                        arrays.fill_partials = partials.get();
                      }
                    }
                    const bool fused = BackwardKernel<T, decltype(k)::value,
                                                      decltype(interp)::value,
                                                      decltype(cl)::value>(pool, zeros, strategy,
                                                                           arrays);
                    if (fused && grad_fill != nullptr) {
                      AddFillPartials<T>(g, partials.get(), static_cast<T*>(grad_fill));
                    } else if (fill && !fused) {
                      FillGradients<T>(pool, g, interpolation, arrays.grad_out, arrays.grid,
                                       static_cast<const T*>(g.fill), arrays.grad_grid,
                                       /*add_to_grid=*/true, static_cast<T*>(grad_fill));
                    }
                    return ffi::Error::Success();
                  });
}

// Half precision (format H): the float32 kernel on widened copies.
template <typename H>
ffi::Error BackwardHalf(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                        BackwardStrategy strategy, ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                        ffi::AnyBuffer grid, void* grad_input, void* grad_grid, void* grad_fill) {
  const int64_t input_size = input.element_count(), grid_size = grid.element_count();
  auto wide_grad_output = Widen<H>(pool, "float32 grad_output", grad_output.untyped_data(),
                                   grad_output.element_count());
  auto wide_input = Widen<H>(pool, "float32 input", input.untyped_data(), input_size);
  auto wide_grid = Widen<H>(pool, "float32 grid", grid.untyped_data(), grid_size);
  auto wide_gi = grad_input != nullptr ? NewArray<float>("float32 grad_input", input_size)
                                      : nullptr;
  auto wide_gg = grad_grid != nullptr ? NewArray<float>("float32 grad_grid", grid_size) : nullptr;
  Geometry wide = g;
  std::unique_ptr<float[]> wide_fill, wide_gf;
  if (g.fill != nullptr) {
    wide_fill = Widen<H>(pool, "float32 fill", g.fill, g.c);
    wide.fill = wide_fill.get();
  }
  if (grad_fill != nullptr) wide_gf = NewArray<float>("float32 grad_fill", g.c);
  ffi::Error err = BackwardTyped(pool, wide, ffi::DataType::F32, interpolation, strategy,
                                 wide_grad_output.get(), wide_input.get(), wide_grid.get(),
                                 wide_gi.get(), wide_gg.get(), wide_gf.get());
  if (err.success() && wide_gi) Narrow<H>(pool, wide_gi.get(), grad_input, input_size);
  if (err.success() && wide_gg) Narrow<H>(pool, wide_gg.get(), grad_grid, grid_size);
  if (err.success() && wide_gf) Narrow<H>(pool, wide_gf.get(), grad_fill, g.c);
  return err;
}

// float16 and bfloat16 run the float32 kernel (half_precision.h).
// `strategy`: BackwardStrategy::kAuto (the production targets) or one to
// force (the test target), which must be able to take the call.
// `padding`: one code for every axis (version 1) or one per axis (versions 2
// and 3). `fill`: version 3's fill operand (nullptr: versions 1 and 2), whose
// gradient is a third result where fill_mask asks.
ffi::Error BackwardCall(ffi::ThreadPool& pool, ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                        ffi::AnyBuffer grid, const ffi::AnyBuffer* fill,
                        ffi::RemainingRets& results, int64_t interpolation,
                        ffi::Span<const int64_t> padding, bool align_corners, bool channels_last,
                        bool input_mask, bool grid_mask, bool fill_mask, int64_t strategy) {
  Geometry g;
  if (ffi::Error err = gs_ffi::MakeGeometry(kPlatform, input, grid, "grad_output", grad_output,
                                            interpolation, padding, align_corners,
                                            channels_last, &g, fill);
      !err.success()) {
    return err;
  }
  if (fill_mask && g.fill == nullptr) {
    return InvalidArgument("attribute fill_mask asks for the fill value's gradient, but "
                           "attribute padding has no 3 (constant)");
  }
  const size_t expected = (input_mask ? 1 : 0) + (grid_mask ? 1 : 0) + (fill_mask ? 1 : 0);
  if (results.size() != expected) {
    return InvalidArgument("expected " + std::to_string(expected) + " result(s) for input_mask=" +
                           (input_mask ? "true" : "false") + ", grid_mask=" +
                           (grid_mask ? "true" : "false") + " and fill_mask=" +
                           (fill_mask ? "true" : "false") + ", got " +
                           std::to_string(results.size()));
  }
  const ffi::DataType dt = input.element_type();
  void* gi_ptr = nullptr;
  void* gg_ptr = nullptr;
  void* gf_ptr = nullptr;
  if (ffi::Error err = gs_ffi::DecodeBackwardResults(kPlatform, results, input, grid, input_mask,
                                                     grid_mask, &gi_ptr, &gg_ptr,
                                                     /*extra_results=*/fill_mask ? 1 : 0);
      !err.success()) {
    return err;
  }
  if (fill_mask) {
    auto r = results.get<ffi::AnyBuffer>(expected - 1);
    if (r.has_error()) return InvalidArgument("grad_fill result could not be decoded");
    ffi::AnyBuffer buf = **r;
    if (ffi::Error err = gs_ffi::CheckShape(kPlatform, "grad_fill", buf, dt, &g.c, 1);
        !err.success()) {
      return err;
    }
    gf_ptr = buf.untyped_data();
  }
  BackwardStrategy chosen;
  if (ffi::Error err = ResolveBackwardStrategy(strategy, g, dt, interpolation, &chosen);
      !err.success()) {
    return err;
  }
  switch (dt) {
    case ffi::DataType::F16:
      return BackwardHalf<gs::F16Format>(pool, g, interpolation, chosen, grad_output, input,
                                         grid, gi_ptr, gg_ptr, gf_ptr);
    case ffi::DataType::BF16:
      return BackwardHalf<gs::BF16Format>(pool, g, interpolation, chosen, grad_output, input,
                                          grid, gi_ptr, gg_ptr, gf_ptr);
    default:
      return BackwardTyped(pool, g, dt, interpolation, chosen, grad_output.untyped_data(),
                           input.untyped_data(), grid.untyped_data(), gi_ptr, gg_ptr, gf_ptr);
  }
}

// Version 3 (the lowerings' target), with the strategy forced (the test
// target) or chosen.
ffi::Error BackwardV3WithStrategy(ffi::ThreadPool pool, ffi::AnyBuffer grad_output,
                                  ffi::AnyBuffer input, ffi::AnyBuffer grid, ffi::AnyBuffer fill,
                                  ffi::RemainingRets results, int64_t interpolation,
                                  ffi::Span<const int64_t> padding, bool align_corners,
                                  bool channels_last, bool input_mask, bool grid_mask,
                                  bool fill_mask, int64_t strategy) {
  return BackwardCall(pool, grad_output, input, grid, &fill, results, interpolation, padding,
                      align_corners, channels_last, input_mask, grid_mask, fill_mask, strategy);
}

ffi::Error BackwardV3(ffi::ThreadPool pool, ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                      ffi::AnyBuffer grid, ffi::AnyBuffer fill, ffi::RemainingRets results,
                      int64_t interpolation, ffi::Span<const int64_t> padding,
                      bool align_corners, bool channels_last, bool input_mask, bool grid_mask,
                      bool fill_mask) {
  return BackwardV3WithStrategy(pool, grad_output, input, grid, fill, results, interpolation,
                                padding, align_corners, channels_last, input_mask, grid_mask,
                                fill_mask, static_cast<int64_t>(BackwardStrategy::kAuto));
}

// Version 2: no fill value ("constant" is refused; its lowering took "zeros").
ffi::Error BackwardV2(ffi::ThreadPool pool, ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                      ffi::AnyBuffer grid, ffi::RemainingRets results, int64_t interpolation,
                      ffi::Span<const int64_t> padding, bool align_corners, bool channels_last,
                      bool input_mask, bool grid_mask) {
  return BackwardCall(pool, grad_output, input, grid, nullptr, results, interpolation, padding,
                      align_corners, channels_last, input_mask, grid_mask, false,
                      static_cast<int64_t>(BackwardStrategy::kAuto));
}

// Version 1: one padding code for every axis.
ffi::Error BackwardV1(ffi::ThreadPool pool, ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                      ffi::AnyBuffer grid, ffi::RemainingRets results, int64_t interpolation,
                      int64_t padding, bool align_corners, bool channels_last, bool input_mask,
                      bool grid_mask) {
  return BackwardV2(pool, grad_output, input, grid, results, interpolation, {&padding, 1},
                    align_corners, channels_last, input_mask, grid_mask);
}

}  // namespace
}  // namespace gs_cpu

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleBackwardCpuV3, (gs_ffi::NoExceptions<gs_cpu::kPlatform, gs_cpu::BackwardV3>::Call),
    gs_ffi::BindBackwardV3(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleBackwardCpu, (gs_ffi::NoExceptions<gs_cpu::kPlatform, gs_cpu::BackwardV2>::Call),
    gs_ffi::BindBackward<gs_ffi::PaddingV2>(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleBackwardCpuV1, (gs_ffi::NoExceptions<gs_cpu::kPlatform, gs_cpu::BackwardV1>::Call),
    gs_ffi::BindBackward<gs_ffi::PaddingV1>(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
// Version 3 with the strategy forced (attribute "strategy"): for tests.
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleBackwardCpuWithStrategy,
    (gs_ffi::NoExceptions<gs_cpu::kPlatform, gs_cpu::BackwardV3WithStrategy>::Call),
    gs_ffi::BindBackwardV3(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>())
        .Attr<int64_t>("strategy"));
