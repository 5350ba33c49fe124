// XLA FFI CPU handler: grid_sample backward (grad_input and/or grad_grid).
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
#include <type_traits>
#include <vector>

#include "../common/ffi_contract.h"
#include "backward_bands.h"
#include "bilinear_backward_avx2.h"
#include "channels_last_backward.h"
#include "grid_sample_cpu.h"
#include "half_precision.h"
#include "nearest_backward_avx2.h"
#include "parallel.h"
#include "tap_row.h"
#include "xla/ffi/api/ffi.h"

namespace gs_cpu {
namespace {

struct BackwardPlan {
  int64_t cblock = 1;   // channels per block
  int64_t nblocks = 1;  // channel blocks
  int64_t bands = 1;    // bands of the last spatial axis
};

constexpr int64_t kTargetTasks = 8;

// Shape-only plan: aim for ~8 tasks so that both small-N/large-output and
// large-N cases keep all threads busy. Bands come before channel blocks:
// every channel block recomputes the taps of all its points, while bands
// split the points (only those straddling two bands are done twice). Bands
// are at least one tap span (taps_per_axis) tall, so a point's taps fall in
// at most two of them. coord_bytes: the size of a point's coordinates.
inline BackwardPlan PlanBackward(const Geometry& g, int taps_per_axis, int64_t coord_bytes) {
  BackwardPlan p;
  const int64_t n = std::max<int64_t>(1, g.n);
  const int64_t max_bands =
      std::clamp<int64_t>(BandAxisSize(g) / taps_per_axis, 1, kMaxBands);
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
// (nearest_backward_avx2.h), from the generic plan `p`, or false where the
// generic block is kept. `ranges`: NearestStagingRanges(g). Their `bands`
// are those ranges: as few as let 8 channels fit the staging copy (each
// range's task reads all the points' grad_output, so more than 2 are left
// to the generic block), but 2 rather than a single task where the generic
// plan has bands (enough points). Channel blocks of a multiple of 8, up to
// kTargetTasks tasks. Channels last, one block of all the channels (a
// block's part of an element's row shares cache lines with the others').
inline bool PlanNearestRanges(const Geometry& g, int64_t ranges, BackwardPlan* p) {
  if (ranges < 1 || ranges > 2) return false;
  const int64_t groups = g.channels_last ? 1 : std::max<int64_t>(1, CeilDiv(g.c, 8));
  const int64_t n = std::max<int64_t>(1, g.n);
  if (n * groups * ranges == 1 && p->bands > 1) ranges = 2;
  const int64_t nblocks = std::clamp<int64_t>(CeilDiv(kTargetTasks, n * ranges), 1, groups);
  p->bands = ranges;
  p->cblock = g.channels_last ? std::max<int64_t>(1, g.c) : CeilDiv(groups, nblocks) * 8;
  p->nblocks = CeilDiv(g.c, p->cblock);
  return true;
}

template <typename Fmt, int K, int kInterp, bool kChannelsLast>
void BackwardKernel(ffi::ThreadPool& pool, const Geometry& g,
                    const typename Fmt::Storage* grad_out, const typename Fmt::Storage* input,
                    const typename Fmt::Storage* grid, typename Fmt::Storage* grad_input,
                    typename Fmt::Storage* grad_grid) {
  using S = typename Fmt::Storage;
  using T = typename Fmt::Compute;
  using TB = TapBlock<T, K, kInterp>;
  constexpr int kTaps = TB::kTaps;
  constexpr int64_t kBlock = TB::kBlock;
  constexpr bool kHasGridGrad = kInterp != gs::kNearest;
  constexpr int kT1 = TB::kT1;
  // The row form of full points (channels first, float32; float64 takes the
  // point form, one form less to compile).
  constexpr bool kRows = !kChannelsLast && std::is_same_v<S, float>;
  constexpr bool kBilinearBlock = kRows && K == 2 && kInterp == gs::kBilinear;
  static_assert(!kBilinearBlock || kBlock == kBilinearBackwardBlock);
  // Nearest float32: tasks that own ranges of plane elements, in
  // nearest_backward_avx2.h (there is no grid gradient).
  constexpr bool kNearestStaged = kInterp == gs::kNearest && std::is_same_v<S, float>;
  const int64_t n_batch = g.n, channels = g.c, points = g.points, plane = g.plane;
  const bool need_gi = grad_input != nullptr;
  const bool need_gg = grad_grid != nullptr && kHasGridGrad;
  const int64_t grid_size = n_batch * points * K;

  if (grad_grid != nullptr && !kHasGridGrad) {
    std::fill(grad_grid, grad_grid + grid_size, Fmt::Store(T(0)));
  }
  if (n_batch == 0) return;

  // Accumulates channels [c_begin, c_end) of `count` points j of batch
  // element n -- point list[j] with coordinates list_coords[j * K ..] if
  // `list` is given, else point p_begin + j -- using only the taps whose
  // last-axis index is in [band_lo, band_hi): scatter into gi_buf (if given)
  // and the grid-gradient sums of point j, axis a, stored at gg_out[j * K + a]
  // or, if given, gg_part[j * K + a] (compute type, for a later reduction).
  auto process = [&](int64_t n, int64_t c_begin, int64_t c_end, const int64_t* list,
                     const S* list_coords, int64_t p_begin, int64_t count, int64_t band_lo,
                     int64_t band_hi, T* gi_buf, S* gg_out, T* gg_part) {
    const bool grad = (gg_out != nullptr || gg_part != nullptr) && need_gg;
    auto write_grid = [&](int64_t j, int a, T v) {
      if (gg_part != nullptr) {
        gg_part[j * K + a] = v;
      } else {
        gg_out[j * K + a] = Fmt::Store(v);
      }
    };
    std::unique_ptr<int64_t[]> pidx(new int64_t[kBlock]);
    // 2D bilinear float32, channels first: the AVX2 block
    // (bilinear_backward_avx2.h), else the generic one below.
    std::unique_ptr<BilinearBackwardTables> bilinear;
    std::unique_ptr<float[]> bilinear_grid;
    if constexpr (kBilinearBlock) {
      if (BilinearBackwardBlockFits(g)) {
        bilinear.reset(new BilinearBackwardTables);
        if (grad) bilinear_grid.reset(new float[2 * kBlock]);
      }
    }
    const bool generic = bilinear == nullptr;
    auto tb = generic ? NewTapBlock<TB>() : nullptr;
    std::unique_ptr<T[]> gacc(generic && grad ? new T[kBlock * K] : nullptr);
    // Per-tap channel sums of the row form (see below).
    std::unique_ptr<T[]> acc(generic && kRows && grad ? new T[kBlock * kTaps] : nullptr);
    std::vector<T> gvec(kChannelsLast ? std::max<int64_t>(1, c_end - c_begin) : 1);
    const S* grid_n = grid + n * points * K;
    for (int64_t j0 = 0; j0 < count; j0 += kBlock) {
      const int64_t cnt = std::min(kBlock, count - j0);
      const S* block_grid;
      if (list != nullptr) {
        for (int64_t b = 0; b < cnt; ++b) pidx[b] = list[j0 + b];
        block_grid = list_coords + j0 * K;
      } else {
        for (int64_t b = 0; b < cnt; ++b) pidx[b] = p_begin + j0 + b;
        block_grid = grid_n + (p_begin + j0) * K;
      }
      if constexpr (kBilinearBlock) {
        if (bilinear != nullptr) {
          const BilinearBackwardBlock block{block_grid, pidx.get(), static_cast<int>(cnt), n,
                                            c_begin, c_end, band_lo, band_hi, grad_out, input,
                                            gi_buf, bilinear_grid.get()};
          BilinearBackwardBlockAvx2F32(g, block, bilinear.get());
          if (grad) {
            for (int64_t b = 0; b < cnt; ++b) {
              for (int a = 0; a < K; ++a) write_grid(j0 + b, a, bilinear_grid[b * K + a]);
            }
          }
          continue;
        }
      }
      FillTaps<Fmt, K, kInterp>(block_grid, cnt, g, grad, tb.get(), band_lo, band_hi);
      if (grad) std::fill(gacc.get(), gacc.get() + cnt * K, T(0));
      if (!kChannelsLast) {
        // One point's taps for one channel.
        auto point = [&](int b, int nt, T gv, const S* src, T* gi) {
          for (int t = 0; t < nt; ++t) {
            const int64_t off = tb->off[b][t];
            if (gi != nullptr) gi[off] += tb->w[b][t] * gv;
            if (grad) {
              const T prod = gv * Fmt::Load(src[off]);
              for (int a = 0; a < K; ++a) gacc[b * K + a] += prod * tb->gw[b][a][t];
            }
          }
        };
        // Points with every tap in range: channel-outer.
        if constexpr (kRows) {
          // Row form: each x-run of kT1 taps is read and updated as one
          // TapRow (bilinear: two rows as one TapRowPair). The grid gradient
          // is kept as per-tap sums over channels, A[t] = sum_c gv * input[t],
          // and folded with the weight derivatives once per point below.
          using Row = TapRow<T, kT1>;
          if (grad) std::fill(acc.get(), acc.get() + cnt * kTaps, T(0));
          // Channels c0 .. c0 + kG - 1 (kG = 1 to 4: the channels of a group
          // share the loads of the point's tables and of its sums; each
          // channel is added to the sums in channel order, whatever the
          // grouping); which of the two results this task computes, as
          // constants.
          auto rows = [&](auto with_gi, auto with_grad, auto group, int64_t c0) {
            constexpr int kG = decltype(group)::value;
            const S* go[kG];
            const S* src[kG];
            T* gi[kG];
            for (int k = 0; k < kG; ++k) {
              go[k] = grad_out + (n * channels + c0 + k) * points;
              src[k] = input + (n * channels + c0 + k) * plane;
              gi[k] = with_gi ? gi_buf + (n * channels + c0 + k) * plane : nullptr;
            }
            for (int i = 0; i < tb->n_full; ++i) {
              const int b = tb->full[i];
              T gv[kG];
              for (int k = 0; k < kG; ++k) gv[k] = go[k][pidx[b]];
              if constexpr (kT1 == 2) {
                using Pair = TapRowPair<T>;
                for (int r = 0; r < kTaps; r += 4) {
                  const int64_t off0 = tb->off[b][r], off1 = tb->off[b][r + 2];
                  if constexpr (decltype(with_gi)::value) {
                    const Pair w = Pair::Load(&tb->w[b][r]);
                    for (int k = 0; k < kG; ++k) {
                      Pair v = Pair::Load(gi[k] + off0, gi[k] + off1);
                      v.AddScaled(gv[k], w);
                      v.Store(gi[k] + off0, gi[k] + off1);
                    }
                  }
                  if constexpr (decltype(with_grad)::value) {
                    T* a = acc.get() + b * kTaps + r;
                    Pair sum = Pair::Load(a);
                    for (int k = 0; k < kG; ++k) {
                      sum.AddScaled(gv[k], Pair::Load(src[k] + off0, src[k] + off1));
                    }
                    sum.Store(a);
                  }
                }
              } else {
                for (int r = 0; r < kTaps; r += kT1) {
                  const int64_t off = tb->off[b][r];
                  if constexpr (decltype(with_gi)::value) {
                    const Row w = Row::Load(&tb->w[b][r]);
                    for (int k = 0; k < kG; ++k) {
                      Row v = Row::Load(gi[k] + off);
                      v.AddScaled(gv[k], w);
                      v.Store(gi[k] + off);
                    }
                  }
                  if constexpr (decltype(with_grad)::value) {
                    T* a = acc.get() + b * kTaps + r;
                    Row sum = Row::Load(a);
                    for (int k = 0; k < kG; ++k) sum.AddScaled(gv[k], Row::Load(src[k] + off));
                    sum.Store(a);
                  }
                }
              }
            }
          };
          auto all_channels = [&](auto with_gi, auto with_grad) {
            int64_t c = c_begin;
            for (; c + 4 <= c_end; c += 4) {
              rows(with_gi, with_grad, std::integral_constant<int, 4>{}, c);
            }
            switch (c_end - c) {
              case 3: return rows(with_gi, with_grad, std::integral_constant<int, 3>{}, c);
              case 2: return rows(with_gi, with_grad, std::integral_constant<int, 2>{}, c);
              case 1: return rows(with_gi, with_grad, std::integral_constant<int, 1>{}, c);
              default: return;
            }
          };
          if (gi_buf != nullptr && grad) {
            all_channels(std::true_type{}, std::true_type{});
          } else if (gi_buf != nullptr) {
            all_channels(std::true_type{}, std::false_type{});
          } else if (grad) {
            all_channels(std::false_type{}, std::true_type{});
          }
          if (grad) {
            for (int i = 0; i < tb->n_full; ++i) {
              const int b = tb->full[i];
              const T* a = acc.get() + b * kTaps;
              for (int ax = 0; ax < K; ++ax) {
                T sum = T(0);
                for (int t = 0; t < kTaps; ++t) sum += tb->gw[b][ax][t] * a[t];
                gacc[b * K + ax] += sum;
              }
            }
          }
        } else {
          for (int64_t c = c_begin; c < c_end; ++c) {
            const S* go = grad_out + (n * channels + c) * points;
            const S* src = input + (n * channels + c) * plane;
            T* gi = gi_buf != nullptr ? gi_buf + (n * channels + c) * plane : nullptr;
            for (int i = 0; i < tb->n_full; ++i) {
              const int b = tb->full[i];
              point(b, kTaps, Fmt::Load(go[pidx[b]]), src, gi);
            }
          }
        }
        // The others, channel-outer too, by tap count (the same trip count
        // for consecutive points of the tap loop).
        for (int64_t c = c_begin; c < c_end; ++c) {
          const S* go = grad_out + (n * channels + c) * points;
          const S* src = input + (n * channels + c) * plane;
          T* gi = gi_buf != nullptr ? gi_buf + (n * channels + c) * plane : nullptr;
          for (int nt = 1; nt <= kTaps; ++nt) {
            for (int i = tb->part_begin[nt]; i < tb->part_begin[nt + 1]; ++i) {
              const int b = tb->part[i];
              point(b, nt, Fmt::Load(go[pidx[b]]), src, gi);
            }
          }
        }
      } else {
        const ChannelsLastBlock<Fmt> cl{grad_out + n * points * channels,
                                        input + n * plane * channels,
                                        gi_buf != nullptr ? gi_buf + n * plane * channels : nullptr,
                                        channels, c_begin, c_end};
        T* sums = grad ? gacc.get() : nullptr;
        bool done = false;
        if constexpr (std::is_same_v<S, float>) {
          if (HasAvx2Fma()) {
            ChannelsLastPointsAvx2F32<K, kInterp>(cl, *tb, static_cast<int>(cnt), pidx.get(),
                                                  sums);
            done = true;
          }
        }
        if (!done) {
          ChannelsLastPoints<PortableChannelRun<Fmt>>(cl, *tb, static_cast<int>(cnt),
                                                      pidx.get(), gvec.data(), sums);
        }
      }
      if (grad) {
        for (int64_t b = 0; b < cnt; ++b)
          for (int a = 0; a < K; ++a) {
            write_grid(j0 + b, a, gacc[b * K + a] * tb->adm[a][b]);
          }
      }
    }
  };

  const int64_t band_axis = BandAxisSize(g);
  if (!need_gi) {
    if (!need_gg) return;
    // Grid gradient only: chunks of points, all channels.
    const int64_t pts = PointsPerChunk(points, channels, kTaps, kBlock);
    const int64_t chunks_per_n = points == 0 ? 0 : CeilDiv(points, pts);
    ParallelFor(pool, n_batch * chunks_per_n, [&](int64_t chunk) {
      const int64_t n = chunk / chunks_per_n;
      const int64_t p_begin = (chunk % chunks_per_n) * pts;
      const int64_t p_end = std::min(points, p_begin + pts);
      process(n, 0, channels, nullptr, nullptr, p_begin, p_end - p_begin, 0, band_axis, nullptr,
              grad_grid + (n * points + p_begin) * K, nullptr);
    });
    return;
  }

  BackwardPlan plan = PlanBackward(g, kT1, K * sizeof(S));
  bool nearest_ranges = false;
  if constexpr (kNearestStaged) {
    nearest_ranges = PlanNearestRanges(g, NearestStagingRanges(g), &plan);
  }
  const int64_t bands = plan.bands;
  BandLists<S> lists;
  if (bands > 1 && !nearest_ranges) BuildBandLists<Fmt, K, kInterp>(pool, g, grid, bands, &lists);
  // Nearest ranges: with several tasks per batch element, the points' tap
  // offsets are computed once, for all of them.
  std::unique_ptr<int32_t[]> nearest_offsets;
  if constexpr (kNearestStaged) {
    if (nearest_ranges && bands * plan.nblocks > 1) {
      nearest_offsets.reset(new int32_t[std::max<int64_t>(1, n_batch * points)]);
      constexpr int64_t kOffsetChunk = int64_t{1} << 14;
      const int64_t chunks_per_n = CeilDiv(points, kOffsetChunk);
      ParallelFor(pool, n_batch * chunks_per_n, [&](int64_t chunk) {
        const int64_t n = chunk / chunks_per_n;
        const int64_t p_begin = (chunk % chunks_per_n) * kOffsetChunk;
        NearestTapOffsetsAvx2F32<K>(g, grid, n, p_begin,
                                    std::min(points, p_begin + kOffsetChunk),
                                    nearest_offsets.get());
      });
    }
  }

  // grad_input is accumulated in place (S is T: the half types run the
  // float32 kernel, half_precision.h).
  static_assert(std::is_same_v<S, T>, "the CPU kernels store what they compute");
  // Grid-gradient partials per (channel block, entry) unless there is one
  // block and one band. Entries: those of the band lists, else the points.
  const int64_t entries = bands > 1 ? static_cast<int64_t>(lists.points.size())
                                    : n_batch * points;
  const bool split_grid = need_gg && (plan.nblocks > 1 || bands > 1);
  std::unique_ptr<T[]> gpart(
      split_grid ? new T[plan.nblocks * std::max<int64_t>(1, entries * K)] : nullptr);

  const int64_t spatial_per_band_row = K == 2 ? g.w : g.h * g.w;
  ParallelFor(pool, n_batch * plan.nblocks * bands, [&](int64_t task) {
    const int64_t band = task % bands;
    const int64_t blk = (task / bands) % plan.nblocks;
    const int64_t n = task / (bands * plan.nblocks);
    const int64_t c_begin = blk * plan.cblock;
    const int64_t c_end = std::min(channels, c_begin + plan.cblock);
    const int64_t band_lo = BandStart(band, bands, band_axis);
    const int64_t band_hi = BandStart(band + 1, bands, band_axis);
    if (nearest_ranges) {
      if constexpr (kNearestStaged) {
        const NearestBackwardTask t{n, c_begin, c_end, NearestRangeStart(band, bands, plane),
                                    NearestRangeStart(band + 1, bands, plane), grid,
                                    nearest_offsets.get(), grad_out, grad_input};
        if constexpr (kChannelsLast) {
          NearestBackwardChannelsLastTaskAvx2F32<K>(g, t);
        } else {
          NearestBackwardTaskAvx2F32<K>(g, t);
        }
      }
      return;
    }
    // Zero the owned region.
    const int64_t s_begin = band_lo * spatial_per_band_row;
    const int64_t s_end = band_hi * spatial_per_band_row;
    if (!kChannelsLast) {
      for (int64_t c = c_begin; c < c_end; ++c) {
        T* row = grad_input + (n * channels + c) * plane;
        std::fill(row + s_begin, row + s_end, T(0));
      }
    } else {
      for (int64_t s = s_begin; s < s_end; ++s) {
        T* row = grad_input + (n * plane + s) * channels;
        std::fill(row + c_begin, row + c_end, T(0));
      }
    }
    const int64_t* list = nullptr;
    const S* list_coords = nullptr;
    int64_t count = points, first_entry = n * points;
    if (bands > 1) {
      first_entry = lists.begin[n * bands + band];
      list = lists.points.data() + first_entry;
      list_coords = lists.coords.data() + first_entry * K;
      count = lists.begin[n * bands + band + 1] - first_entry;
    }
    // Without split_grid there is one band (no list: entry j is point j)
    // and one channel block.
    S* gg_out = need_gg && !split_grid ? grad_grid + n * points * K : nullptr;
    T* gg_part = split_grid ? gpart.get() + (blk * entries + first_entry) * K : nullptr;
    process(n, c_begin, c_end, list, list_coords, 0, count, band_lo, band_hi, grad_input, gg_out,
            gg_part);
  });

  // Fixed-order finishing passes, split into element ranges.
  constexpr int64_t kReduceChunk = 1 << 16;
  if (split_grid && bands == 1) {
    // Entries are points: add the blocks' partials in block order.
    ParallelFor(pool, CeilDiv(grid_size, kReduceChunk), [&](int64_t chunk) {
      const int64_t i0 = chunk * kReduceChunk;
      const int64_t i1 = std::min(grid_size, i0 + kReduceChunk);
      for (int64_t i = i0; i < i1; ++i) {
        T sum = gpart[i];
        for (int64_t b = 1; b < plan.nblocks; ++b) sum = sum + gpart[b * grid_size + i];
        grad_grid[i] = Fmt::Store(sum);
      }
    });
  } else if (split_grid) {
    // Per point, in point order: its entry in its first band plus, if it
    // straddles, its entry in the next band, per block, added in block
    // order.
    const int64_t nblocks = plan.nblocks, block_stride = entries * K;
    const T* parts = gpart.get();
    ParallelFor(pool, n_batch * CeilDiv(points, kBandChunk), [&](int64_t chunk) {
      ForEachEntry(lists, points, bands, chunk, [&](int64_t q, int64_t, int64_t e0, int64_t e1) {
        const T* p0 = parts + e0 * K;
        const T* p1 = e1 >= 0 ? parts + e1 * K : nullptr;
        for (int a = 0; a < K; ++a) {
          T sum = p1 != nullptr ? p0[a] + p1[a] : p0[a];
          for (int64_t b = 1; b < nblocks; ++b) {
            const T* b0 = p0 + b * block_stride;
            sum = sum + (p1 != nullptr ? b0[a] + p1[b * block_stride + a] : b0[a]);
          }
          grad_grid[q * K + a] = Fmt::Store(sum);
        }
      });
    });
  }
}

// The float32 or float64 kernel (dt) on the buffers; grad_input, grad_grid
// may be null (not wanted).
ffi::Error BackwardTyped(ffi::ThreadPool& pool, const Geometry& g, ffi::DataType dt,
                         int64_t interpolation, const void* grad_output, const void* input,
                         const void* grid, void* grad_input, void* grad_grid) {
  return Dispatch(dt, g.k, interpolation, g.channels_last,
                  [&](auto fmt, auto k, auto interp, auto cl) -> ffi::Error {
                    using S = typename decltype(fmt)::Storage;
                    BackwardKernel<decltype(fmt), decltype(k)::value, decltype(interp)::value,
                                   decltype(cl)::value>(
                        pool, g, static_cast<const S*>(grad_output), static_cast<const S*>(input),
                        static_cast<const S*>(grid), static_cast<S*>(grad_input),
                        static_cast<S*>(grad_grid));
                    return ffi::Error::Success();
                  });
}

// Half precision (format H): the float32 kernel on widened copies.
template <typename H>
ffi::Error BackwardHalf(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                        ffi::AnyBuffer grad_output, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                        void* grad_input, void* grad_grid) {
  const int64_t input_size = input.element_count(), grid_size = grid.element_count();
  std::unique_ptr<float[]> wide_grad_output =
      Widen<H>(pool, grad_output.untyped_data(), grad_output.element_count());
  std::unique_ptr<float[]> wide_input = Widen<H>(pool, input.untyped_data(), input_size);
  std::unique_ptr<float[]> wide_grid = Widen<H>(pool, grid.untyped_data(), grid_size);
  std::unique_ptr<float[]> wide_gi(grad_input != nullptr ? FloatBuffer(input_size) : nullptr);
  std::unique_ptr<float[]> wide_gg(grad_grid != nullptr ? FloatBuffer(grid_size) : nullptr);
  if (ffi::Error err = BackwardTyped(pool, g, ffi::DataType::F32, interpolation,
                                     wide_grad_output.get(), wide_input.get(), wide_grid.get(),
                                     wide_gi.get(), wide_gg.get());
      !err.success()) {
    return err;
  }
  if (grad_input != nullptr) Narrow<H>(pool, wide_gi.get(), grad_input, input_size);
  if (grad_grid != nullptr) Narrow<H>(pool, wide_gg.get(), grad_grid, grid_size);
  return ffi::Error::Success();
}

// float16 and bfloat16 run the float32 kernel (half_precision.h).
ffi::Error BackwardImpl(ffi::ThreadPool pool, ffi::AnyBuffer grad_output, ffi::AnyBuffer input,
                        ffi::AnyBuffer grid, ffi::RemainingRets results, int64_t interpolation,
                        int64_t padding, bool align_corners, bool channels_last, bool input_mask,
                        bool grid_mask) {
  Geometry g;
  if (ffi::Error err = MakeGeometry(input, grid, interpolation, padding, align_corners,
                                    channels_last, &g);
      !err.success()) {
    return err;
  }
  const ffi::DataType dt = input.element_type();
  int64_t dims[5];
  const size_t rank = gs_ffi::OutputDims(grid, g, dims);
  if (ffi::Error err = CheckShape("grad_output", grad_output, dt, dims, rank); !err.success()) {
    return err;
  }
  void* gi_ptr = nullptr;
  void* gg_ptr = nullptr;
  if (ffi::Error err = gs_ffi::DecodeBackwardResults(kPlatform, results, input, grid, input_mask,
                                                     grid_mask, &gi_ptr, &gg_ptr);
      !err.success()) {
    return err;
  }
  switch (dt) {
    case ffi::DataType::F16:
      return BackwardHalf<gs::F16Format>(pool, g, interpolation, grad_output, input, grid, gi_ptr,
                                         gg_ptr);
    case ffi::DataType::BF16:
      return BackwardHalf<gs::BF16Format>(pool, g, interpolation, grad_output, input, grid,
                                          gi_ptr, gg_ptr);
    default:
      return BackwardTyped(pool, g, dt, interpolation, grad_output.untyped_data(),
                           input.untyped_data(), grid.untyped_data(), gi_ptr, gg_ptr);
  }
}

}  // namespace
}  // namespace gs_cpu

XLA_FFI_DEFINE_HANDLER_SYMBOL(GridSampleBackwardCpu, gs_cpu::BackwardImpl,
                              gs_ffi::BindBackward(
                                  xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
