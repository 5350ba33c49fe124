// XLA FFI CPU handler: grid_sample forward, by the strategy strategies.h
// chooses (or the test target forces).
//
// Work is split over (batch element, chunk of output points); each chunk
// computes the taps of a block of points once and then loops over channels.
// Every output element is written by exactly one task.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

#include "../common/ffi_contract.h"
#include "grid_sample_avx2.h"
#include "grid_sample_cpu.h"
#include "half_precision.h"
#include "parallel.h"
#include "strategies.h"
#include "xla/ffi/api/ffi.h"

namespace gs_cpu {
namespace {

// A batch element per task where the pairs or the tile sampler read whole
// planes at random and that keeps the threads busy (each core's cache then
// holds its own element's pixels), else chunks of points.
int64_t Avx2PointsPerTask(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                          ForwardStrategy strategy) {
  const bool whole = (strategy == ForwardStrategy::kTiles || SamplesPairs(g, interpolation)) &&
                     ElementsKeepThreadsBusy(pool.num_threads(), g);
  const int taps = gs::TapsPerPoint(g.k, static_cast<int>(interpolation));
  return whole ? g.points : PointsPerChunk(g.points, g.c, taps, BlockPoints(taps));
}

// The float32 AVX2 strategies (grid_sample_avx2.h).
void ForwardAvx2(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                 ForwardStrategy strategy, const float* input, const float* grid, float* output) {
  if (strategy == ForwardStrategy::kTilesViaCopy) {
    // One task per batch element copies it into a buffer of its own, which
    // stays in the core's cache, and samples all of its points from there.
    const int64_t floats = ViaChannelsLastBufferFloats(g);
    ParallelFor(pool, g.n, [&](int64_t n) {
      std::unique_ptr<float[]> buffer(new (std::nothrow) float[floats]);
      if (buffer != nullptr) {
        ForwardViaChannelsLastAvx2F32(g, interpolation, input, grid, output, n, buffer.get());
      } else {  // no memory for the copy: the gather strategy (the same results)
        ForwardChunkAvx2F32(g, interpolation, input, grid, output, n, 0, g.points);
      }
    });
    return;
  }
  const int64_t per_task = Avx2PointsPerTask(pool, g, interpolation, strategy);
  const int64_t tasks_per_n = CeilDiv(g.points, per_task);
  ParallelFor(pool, g.n * tasks_per_n, [&](int64_t task) {
    const int64_t n = task / tasks_per_n;
    const int64_t p_begin = (task % tasks_per_n) * per_task;
    const int64_t p_end = std::min(g.points, p_begin + per_task);
    if (strategy == ForwardStrategy::kTiles) {
      ForwardChannelsLastChunkAvx2F32(g, interpolation, input, grid, output, n, p_begin, p_end);
    } else {
      ForwardChunkAvx2F32(g, interpolation, input, grid, output, n, p_begin, p_end);
    }
  });
}

// The portable strategy: any dtype, any CPU.
template <typename T, int K, int kInterp, bool kChannelsLast>
void ForwardPortable(ffi::ThreadPool& pool, const Geometry& g, const T* input, const T* grid,
                     T* output) {
  using TB = TapBlock<T, K, kInterp>;
  constexpr int kTaps = TB::kTaps;
  constexpr int64_t kBlock = TB::kBlock;
  const int64_t n_batch = g.n, channels = g.c, points = g.points, plane = g.plane;
  if (n_batch == 0 || channels == 0 || points == 0) return;

  const int64_t pts_per_chunk = PointsPerChunk(points, channels, kTaps, kBlock);
  const int64_t chunks_per_n = CeilDiv(points, pts_per_chunk);

  ParallelFor(pool, n_batch * chunks_per_n, [&](int64_t chunk) {
    const int64_t n = chunk / chunks_per_n;
    const int64_t p_begin = (chunk % chunks_per_n) * pts_per_chunk;
    const int64_t p_end = std::min(points, p_begin + pts_per_chunk);
    auto tb = NewTapBlock<TB>();
    constexpr int64_t kCBlock = 128;
    T acc[kCBlock];
    for (int64_t p0 = p_begin; p0 < p_end; p0 += kBlock) {
      const int64_t cnt = std::min(kBlock, p_end - p0);
      FillTaps<T, K, kInterp>(grid + (n * points + p0) * K, cnt, g, false, tb.get());
      if (!kChannelsLast) {
        // Points with every tap in range: channel-outer, contiguous output rows.
        for (int64_t c = 0; c < channels; ++c) {
          const T* src = input + (n * channels + c) * plane;
          T* dst = output + (n * channels + c) * points + p0;
          for (int i = 0; i < tb->n_full; ++i) {
            const int b = tb->full[i];
            T sum = T(0);
            for (int t = 0; t < kTaps; ++t) sum += tb->w[b][t] * src[tb->off[b][t]];
            dst[b] = sum;
          }
        }
        // The others, channel-outer too, by tap count (the same trip count
        // for consecutive points of the tap loop).
        for (int64_t c = 0; c < channels; ++c) {
          const T* src = input + (n * channels + c) * plane;
          T* dst = output + (n * channels + c) * points + p0;
          for (int nt = 0; nt <= kTaps; ++nt) {
            for (int i = tb->part_begin[nt]; i < tb->part_begin[nt + 1]; ++i) {
              const int b = tb->part[i];
              T sum = T(0);
              for (int t = 0; t < nt; ++t) sum += tb->w[b][t] * src[tb->off[b][t]];
              dst[b] = sum;
            }
          }
        }
      } else {
        const T* src_n = input + n * plane * channels;
        for (int64_t b = 0; b < cnt; ++b) {
          T* dst = output + (n * points + p0 + b) * channels;
          for (int64_t c0 = 0; c0 < channels; c0 += kCBlock) {
            const int64_t cn = std::min(kCBlock, channels - c0);
            for (int64_t c = 0; c < cn; ++c) acc[c] = T(0);
            const int nt = tb->ntaps[b];
            for (int t = 0; t < nt; ++t) {
              const int64_t off = tb->off[b][t];
              const T wt = tb->w[b][t];
              const T* row = src_n + off * channels + c0;
              for (int64_t c = 0; c < cn; ++c) acc[c] += wt * row[c];
            }
            for (int64_t c = 0; c < cn; ++c) dst[c0 + c] = acc[c];
          }
        }
      }
    }
  });
}

// The float32 or float64 kernel (dt) of `strategy` on the buffers.
ffi::Error ForwardTyped(ffi::ThreadPool& pool, const Geometry& g, ffi::DataType dt,
                        int64_t interpolation, ForwardStrategy strategy, const void* input,
                        const void* grid, void* output) {
  if (g.n == 0 || g.c == 0 || g.points == 0) return ffi::Error::Success();
  if (strategy != ForwardStrategy::kPortable) {
    ForwardAvx2(pool, g, interpolation, strategy, static_cast<const float*>(input),
                static_cast<const float*>(grid), static_cast<float*>(output));
    return ffi::Error::Success();
  }
  return Dispatch(dt, g.k, interpolation, g.channels_last,
                  [&](auto fmt, auto k, auto interp, auto cl) -> ffi::Error {
                    using T = decltype(fmt);
                    ForwardPortable<decltype(fmt), decltype(k)::value, decltype(interp)::value,
                                    decltype(cl)::value>(pool, g, static_cast<const T*>(input),
                                                         static_cast<const T*>(grid),
                                                         static_cast<T*>(output));
                    return ffi::Error::Success();
                  });
}

// Half precision (format H): the float32 kernel on widened copies.
template <typename H>
ffi::Error ForwardHalf(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                       ForwardStrategy strategy, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                       ffi::AnyBuffer output) {
  std::unique_ptr<float[]> wide_input = Widen<H>(pool, input.untyped_data(), input.element_count());
  std::unique_ptr<float[]> wide_grid = Widen<H>(pool, grid.untyped_data(), grid.element_count());
  std::unique_ptr<float[]> wide_output = FloatBuffer(output.element_count());
  if (ffi::Error err = ForwardTyped(pool, g, ffi::DataType::F32, interpolation, strategy,
                                    wide_input.get(), wide_grid.get(), wide_output.get());
      !err.success()) {
    return err;
  }
  Narrow<H>(pool, wide_output.get(), output.untyped_data(), output.element_count());
  return ffi::Error::Success();
}

// `strategy`: ForwardStrategy::kAuto (the production target) or one to force
// (the test target), which must be able to take the call.
ffi::Error ForwardImpl(ffi::ThreadPool pool, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                       ffi::Result<ffi::AnyBuffer> output, int64_t interpolation, int64_t padding,
                       bool align_corners, bool channels_last, int64_t strategy) {
  Geometry g;
  if (ffi::Error err =
          MakeGeometry(input, grid, interpolation, padding, align_corners, channels_last, &g);
      !err.success()) {
    return err;
  }
  int64_t dims[5];
  const size_t rank = gs_ffi::OutputDims(grid, g, dims);
  if (ffi::Error err = CheckShape("output", *output, input.element_type(), dims, rank);
      !err.success()) {
    return err;
  }
  const ffi::DataType dt = input.element_type();
  ForwardStrategy chosen;
  if (ffi::Error err = ResolveForwardStrategy(strategy, g, KernelDType(dt), interpolation,
                                              pool.num_threads(), &chosen);
      !err.success()) {
    return err;
  }
  switch (dt) {
    case ffi::DataType::F16:
      return ForwardHalf<gs::F16Format>(pool, g, interpolation, chosen, input, grid, *output);
    case ffi::DataType::BF16:
      return ForwardHalf<gs::BF16Format>(pool, g, interpolation, chosen, input, grid, *output);
    default:
      return ForwardTyped(pool, g, dt, interpolation, chosen, input.untyped_data(),
                          grid.untyped_data(), output->untyped_data());
  }
}

ffi::Error ForwardAuto(ffi::ThreadPool pool, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                       ffi::Result<ffi::AnyBuffer> output, int64_t interpolation, int64_t padding,
                       bool align_corners, bool channels_last) {
  return ForwardImpl(pool, input, grid, output, interpolation, padding, align_corners,
                     channels_last, static_cast<int64_t>(ForwardStrategy::kAuto));
}

}  // namespace
}  // namespace gs_cpu

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleForwardCpu, gs_cpu::ForwardAuto,
    gs_ffi::BindForward(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
// The same forward with the strategy forced (attribute "strategy"): for tests.
XLA_FFI_DEFINE_HANDLER_SYMBOL(GridSampleForwardCpuWithStrategy, gs_cpu::ForwardImpl,
                              gs_ffi::BindForward(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>())
                                  .Attr<int64_t>("strategy"));
