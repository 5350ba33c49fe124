// XLA FFI CPU handler: grid_sample backward (grad_input and/or grad_grid).
//
// Deterministic regardless of the number of threads: no atomics on floats.
// The work is split into tasks (batch element n, channel block, point range g)
// whose number depends on shapes only. A task owns the grad_input region
// (n, channel block) of accumulation buffer g and scans its points in order;
// the buffers of the point ranges are then summed in the fixed order g = 0, 1,
// ... The grid gradient of a point is a sum over the channels of a block, in
// channel order; block partials are summed in block order.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "grid_sample_cpu.h"
#include "parallel.h"
#include "xla/ffi/api/ffi.h"

namespace gs_cpu {
namespace {

struct BackwardPlan {
  int64_t cblock = 1;   // channels per block
  int64_t nblocks = 1;  // channel blocks
  int64_t ranges = 1;   // point ranges (accumulation buffers)
};

// Shape-only plan: aim for ~8 tasks so both small-N/large-output and
// large-N cases keep all threads busy, without many extra buffers.
inline BackwardPlan PlanBackward(const Geometry& g, size_t compute_bytes, bool direct) {
  constexpr int64_t kTargetTasks = 8;
  BackwardPlan p;
  const int64_t n = std::max<int64_t>(1, g.n);
  const int64_t max_blocks = std::max<int64_t>(1, CeilDiv(g.c, 8));  // >= 8 channels a block
  p.nblocks = std::clamp<int64_t>(CeilDiv(kTargetTasks, n), 1, max_blocks);
  p.cblock = std::max<int64_t>(1, CeilDiv(g.c, p.nblocks));
  p.nblocks = std::max<int64_t>(1, CeilDiv(g.c, p.cblock));
  p.ranges = std::clamp<int64_t>(CeilDiv(kTargetTasks, n * p.nblocks), 1, 4);
  p.ranges = std::min<int64_t>(p.ranges, std::max<int64_t>(1, g.points / 1024));
  // Bound the extra accumulation memory to 2 GiB.
  const int64_t buf_bytes = g.n * g.c * g.plane * static_cast<int64_t>(compute_bytes);
  while (p.ranges > 1 && (p.ranges - (direct ? 1 : 0)) * buf_bytes > (int64_t{1} << 31)) {
    --p.ranges;
  }
  return p;
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
  const int64_t n_batch = g.n, channels = g.c, points = g.points, plane = g.plane;
  const bool need_gi = grad_input != nullptr;
  const bool need_gg = grad_grid != nullptr && kHasGridGrad;
  const int64_t grid_size = n_batch * points * K;

  if (grad_grid != nullptr && !kHasGridGrad) {
    std::fill(grad_grid, grad_grid + grid_size, Fmt::Store(T(0)));
  }
  if (n_batch == 0) return;

  // Accumulates channels [c_begin, c_end) of points [p_begin, p_end) of batch
  // element n: scatter into gi_buf (if given) and grid-gradient sums into
  // gg_dst (if given; stride K per point, already offset to point p_begin).
  auto process = [&](int64_t n, int64_t c_begin, int64_t c_end, int64_t p_begin,
                     int64_t p_end, T* gi_buf, bool want_grid, auto&& write_grid) {
    auto tb = NewTapBlock<TB>();
    const bool grad = want_grid && need_gg;
    T gacc[kBlock][K];
    std::vector<T> gvec(kChannelsLast ? std::max<int64_t>(1, c_end - c_begin) : 1);
    for (int64_t p0 = p_begin; p0 < p_end; p0 += kBlock) {
      const int64_t cnt = std::min(kBlock, p_end - p0);
      FillTaps<Fmt, K, kInterp>(grid + (n * points + p0) * K, cnt, g, grad, tb.get());
      if (grad) {
        for (int64_t b = 0; b < cnt; ++b)
          for (int a = 0; a < K; ++a) gacc[b][a] = T(0);
      }
      if (!kChannelsLast) {
        // One point's taps for one channel.
        auto point = [&](int b, int nt, T gv, const S* src, T* gi) {
          for (int t = 0; t < nt; ++t) {
            const int64_t off = tb->off[b][t];
            if (gi != nullptr) gi[off] += tb->w[b][t] * gv;
            if (grad) {
              const T prod = gv * Fmt::Load(src[off]);
              for (int a = 0; a < K; ++a) gacc[b][a] += prod * tb->gw[b][a][t];
            }
          }
        };
        // Points with every tap in range: channel-outer.
        for (int64_t c = c_begin; c < c_end; ++c) {
          const S* go = grad_out + (n * channels + c) * points + p0;
          const S* src = input + (n * channels + c) * plane;
          T* gi = gi_buf != nullptr ? gi_buf + (n * channels + c) * plane : nullptr;
          for (int i = 0; i < tb->n_full; ++i) {
            const int b = tb->full[i];
            point(b, kTaps, Fmt::Load(go[b]), src, gi);
          }
        }
        // The others: point-outer, so the tap count is fixed over the channel loop.
        for (int i = 0; i < tb->n_part; ++i) {
          const int b = tb->part[i];
          const int nt = tb->ntaps[b];
          if (nt == 0) continue;
          for (int64_t c = c_begin; c < c_end; ++c) {
            const T gv = Fmt::Load(grad_out[(n * channels + c) * points + p0 + b]);
            const S* src = input + (n * channels + c) * plane;
            T* gi = gi_buf != nullptr ? gi_buf + (n * channels + c) * plane : nullptr;
            point(b, nt, gv, src, gi);
          }
        }
      } else {
        const int64_t cn = c_end - c_begin;
        for (int64_t b = 0; b < cnt; ++b) {
          const S* go = grad_out + (n * points + p0 + b) * channels + c_begin;
          T* gvals = gvec.data();
          for (int64_t c = 0; c < cn; ++c) gvals[c] = Fmt::Load(go[c]);
          const int nt = tb->ntaps[b];
          for (int t = 0; t < nt; ++t) {
            const int64_t off = tb->off[b][t];
            if (gi_buf != nullptr) {
              T* gi = gi_buf + (n * plane + off) * channels + c_begin;
              const T wt = tb->w[b][t];
              for (int64_t c = 0; c < cn; ++c) gi[c] += wt * gvals[c];
            }
            if (grad) {
              const S* src = input + (n * plane + off) * channels + c_begin;
              T dot = T(0);
              for (int64_t c = 0; c < cn; ++c) dot += gvals[c] * Fmt::Load(src[c]);
              for (int a = 0; a < K; ++a) gacc[b][a] += dot * tb->gw[b][a][t];
            }
          }
        }
      }
      if (grad) {
        for (int64_t b = 0; b < cnt; ++b)
          for (int a = 0; a < K; ++a) write_grid(p0 + b, a, gacc[b][a] * tb->dmult[b][a]);
      }
    }
  };

  if (!need_gi) {
    if (!need_gg) return;
    // Grid gradient only: chunks of points, all channels.
    const int64_t pts = PointsPerChunk(points, channels, kTaps, kBlock);
    const int64_t chunks_per_n = points == 0 ? 0 : CeilDiv(points, pts);
    ParallelFor(pool, n_batch * chunks_per_n, [&](int64_t chunk) {
      const int64_t n = chunk / chunks_per_n;
      const int64_t p_begin = (chunk % chunks_per_n) * pts;
      const int64_t p_end = std::min(points, p_begin + pts);
      auto write = [&](int64_t p, int a, T v) {
        grad_grid[(n * points + p) * K + a] = Fmt::Store(v);
      };
      process(n, 0, channels, p_begin, p_end, nullptr, true, write);
    });
    return;
  }

  constexpr bool kDirect = std::is_same_v<S, T>;  // accumulate into grad_input itself
  const BackwardPlan plan = PlanBackward(g, sizeof(T), kDirect);
  const int64_t gi_size = n_batch * channels * plane;
  const int64_t ranges = plan.ranges;
  const int64_t pts_per_range = CeilDiv(points, ranges);
  // Accumulation buffers, one per point range.
  std::vector<std::unique_ptr<T[]>> owned;
  std::vector<T*> bufs(ranges);
  for (int64_t r = 0; r < ranges; ++r) {
    if (r == 0 && kDirect) {
      bufs[r] = reinterpret_cast<T*>(grad_input);
    } else {
      owned.emplace_back(new T[std::max<int64_t>(1, gi_size)]);
      bufs[r] = owned.back().get();
    }
  }
  // Grid gradient partials per channel block (unless there is one block).
  std::unique_ptr<T[]> gpart;
  if (need_gg && plan.nblocks > 1) gpart.reset(new T[plan.nblocks * std::max<int64_t>(1, grid_size)]);

  const int64_t tasks = n_batch * plan.nblocks * ranges;
  ParallelFor(pool, tasks, [&](int64_t task) {
    const int64_t r = task % ranges;
    const int64_t blk = (task / ranges) % plan.nblocks;
    const int64_t n = task / (ranges * plan.nblocks);
    const int64_t c_begin = blk * plan.cblock;
    const int64_t c_end = std::min(channels, c_begin + plan.cblock);
    T* buf = bufs[r];
    // Zero the owned region of this buffer.
    if (!kChannelsLast) {
      std::fill(buf + (n * channels + c_begin) * plane, buf + (n * channels + c_end) * plane,
                T(0));
    } else {
      for (int64_t s = 0; s < plane; ++s) {
        T* row = buf + (n * plane + s) * channels;
        std::fill(row + c_begin, row + c_end, T(0));
      }
    }
    const int64_t p_begin = std::min(points, r * pts_per_range);
    const int64_t p_end = std::min(points, p_begin + pts_per_range);
    if (!need_gg) {
      process(n, c_begin, c_end, p_begin, p_end, buf, false, [](int64_t, int, T) {});
    } else if (plan.nblocks == 1) {
      auto write = [&](int64_t p, int a, T v) {
        grad_grid[(n * points + p) * K + a] = Fmt::Store(v);
      };
      process(n, c_begin, c_end, p_begin, p_end, buf, true, write);
    } else {
      T* part = gpart.get() + blk * grid_size;
      auto write = [&](int64_t p, int a, T v) { part[(n * points + p) * K + a] = v; };
      process(n, c_begin, c_end, p_begin, p_end, buf, true, write);
    }
  });

  // Fixed-order reductions, split into element ranges.
  constexpr int64_t kReduceChunk = 1 << 16;
  if (!kDirect || ranges > 1) {
    ParallelFor(pool, CeilDiv(gi_size, kReduceChunk), [&](int64_t chunk) {
      const int64_t i0 = chunk * kReduceChunk;
      const int64_t i1 = std::min(gi_size, i0 + kReduceChunk);
      for (int64_t i = i0; i < i1; ++i) {
        T sum = bufs[0][i];
        for (int64_t r = 1; r < ranges; ++r) sum += bufs[r][i];
        grad_input[i] = Fmt::Store(sum);
      }
    });
  }
  if (gpart) {
    ParallelFor(pool, CeilDiv(grid_size, kReduceChunk), [&](int64_t chunk) {
      const int64_t i0 = chunk * kReduceChunk;
      const int64_t i1 = std::min(grid_size, i0 + kReduceChunk);
      for (int64_t i = i0; i < i1; ++i) {
        T sum = gpart[i];
        for (int64_t b = 1; b < plan.nblocks; ++b) sum += gpart[b * grid_size + i];
        grad_grid[i] = Fmt::Store(sum);
      }
    });
  }
}

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
  const size_t rank = OutputDims(input, grid, g, dims);
  if (ffi::Error err = CheckShape("grad_output", grad_output, dt, dims, rank); !err.success()) {
    return err;
  }
  const size_t expected = (input_mask ? 1 : 0) + (grid_mask ? 1 : 0);
  if (results.size() != expected) {
    return InvalidArgument("expected " + std::to_string(expected) +
                           " result(s) for input_mask=" + (input_mask ? "true" : "false") +
                           " and grid_mask=" + (grid_mask ? "true" : "false") + ", got " +
                           std::to_string(results.size()));
  }
  void* gi_ptr = nullptr;
  void* gg_ptr = nullptr;
  size_t next = 0;
  if (input_mask) {
    auto r = results.get<ffi::AnyBuffer>(next++);
    if (r.has_error()) return InvalidArgument("grad_input result could not be decoded");
    ffi::AnyBuffer buf = **r;
    const auto idims = input.dimensions();
    if (ffi::Error err = CheckShape("grad_input", buf, dt, idims.begin(), idims.size());
        !err.success()) {
      return err;
    }
    gi_ptr = buf.untyped_data();
  }
  if (grid_mask) {
    auto r = results.get<ffi::AnyBuffer>(next++);
    if (r.has_error()) return InvalidArgument("grad_grid result could not be decoded");
    ffi::AnyBuffer buf = **r;
    const auto gdims = grid.dimensions();
    if (ffi::Error err = CheckShape("grad_grid", buf, dt, gdims.begin(), gdims.size());
        !err.success()) {
      return err;
    }
    gg_ptr = buf.untyped_data();
  }
  return Dispatch(dt, g.k, interpolation, channels_last,
                  [&](auto fmt, auto k, auto interp, auto cl) -> ffi::Error {
                    using Fmt = decltype(fmt);
                    using S = typename Fmt::Storage;
                    BackwardKernel<Fmt, decltype(k)::value, decltype(interp)::value,
                                   decltype(cl)::value>(
                        pool, g, reinterpret_cast<const S*>(grad_output.untyped_data()),
                        reinterpret_cast<const S*>(input.untyped_data()),
                        reinterpret_cast<const S*>(grid.untyped_data()),
                        reinterpret_cast<S*>(gi_ptr), reinterpret_cast<S*>(gg_ptr));
                    return ffi::Error::Success();
                  });
}

}  // namespace
}  // namespace gs_cpu

XLA_FFI_DEFINE_HANDLER_SYMBOL(GridSampleBackwardCpu, gs_cpu::BackwardImpl,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::ThreadPool>()
                                  .Arg<xla::ffi::AnyBuffer>()  // grad_output
                                  .Arg<xla::ffi::AnyBuffer>()  // input
                                  .Arg<xla::ffi::AnyBuffer>()  // grid
                                  .RemainingRets()             // grad_input?, grad_grid?
                                  .Attr<int64_t>("interpolation")
                                  .Attr<int64_t>("padding")
                                  .Attr<bool>("align_corners")
                                  .Attr<bool>("channels_last")
                                  .Attr<bool>("input_mask")
                                  .Attr<bool>("grid_mask"));
