// XLA FFI CPU handler: grid_sample forward, by the strategy strategies.h
// chooses (or the test target forces).
//
// Work is split over (batch element, chunk of output points); each chunk
// computes the taps of a block of points once and then loops over channels.
// Every output element is written by exactly one task.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>

#include "../common/ffi_contract.h"
#include "../common/handler_exceptions.h"
#include "gather_sampler.h"
#include "grid_sample_cpu.h"
#include "half_precision.h"
#include "parallel.h"
#include "strategies.h"
#include "tile_sampler.h"
#include "xla/ffi/api/ffi.h"

namespace gs_cpu {
namespace {

// The value of one output element from the input at its taps, value(t)
// (asked for taps in range only), in the forward's one summation order,
// which every strategy keeps to the bit: 2D bicubic, the separable sum
// sum_j wy_j ((wx_0 v_0j + wx_1 v_1j) + (wx_2 v_2j + wx_3 v_3j)), added
// pairwise, a tap out of range read as 0; the others, the even and the odd
// taps in two running sums of fused multiply-adds, then added.
template <typename T, int K, int kInterp, typename Value>
GS_CPU_INLINE T TapSum(const TapBlock<T, K, kInterp>& tb, int64_t b, Value value) {
  constexpr int kTaps = TapBlock<T, K, kInterp>::kTaps;
  if constexpr (K == 2 && kInterp == gs::kBicubic) {
    T q[4];
    for (int j = 0; j < 4; ++j) {
      T pv[4];
      for (int i = 0; i < 4; ++i) {
        pv[i] = tb.aw[0][i][b] * (tb.off[b][4 * j + i] >= 0 ? value(4 * j + i) : T(0));
      }
      q[j] = tb.aw[1][j][b] * ((pv[0] + pv[1]) + (pv[2] + pv[3]));
    }
    return (q[0] + q[1]) + (q[2] + q[3]);
  } else {
    T acc[2] = {T(0), T(0)};
    for (int t = 0; t < kTaps; ++t) {
      if (tb.off[b][t] >= 0) acc[t & 1] = std::fma(tb.w[b][t], value(t), acc[t & 1]);
    }
    return kTaps == 1 ? acc[0] : acc[0] + acc[1];
  }
}

// The portable strategy for points [p_begin, p_end) of batch element n: tap
// tables per block of points, then contiguous output rows per channel
// (channels first) or each point's channels (channels last); with a fill
// value, each output plus fill[c] times the point's outside weight.
template <typename T, int K, int kInterp, bool kChannelsLast>
GS_CPU_INLINE void PortableChunk(const Geometry& g, const T* input, const T* grid, T* output,
                                 int64_t n, int64_t p_begin, int64_t p_end) {
  using TB = TapBlock<T, K, kInterp>;
  const int64_t channels = g.c, points = g.points, plane = g.plane;
  auto tb = NewObject<TB>("tap table");
  for (int64_t p0 = p_begin; p0 < p_end; p0 += TB::kBlock) {
    const int64_t cnt = std::min<int64_t>(TB::kBlock, p_end - p0);
    FillTapTable<T, K, kInterp>(grid + (n * points + p0) * K, cnt, g, tb.get());
    const T* fill = static_cast<const T*>(g.fill);
    if constexpr (!kChannelsLast) {
      for (int64_t c = 0; c < channels; ++c) {
        const T* src = input + (n * channels + c) * plane;
        T* dst = output + (n * channels + c) * points + p0;
        for (int64_t b = 0; b < cnt; ++b) {
          dst[b] = TapSum(*tb, b, [&](int t) { return src[tb->off[b][t]]; });
        }
        if (fill != nullptr) {
          for (int64_t b = 0; b < cnt; ++b) {
            dst[b] = dst[b] + gs::FillTerm(fill[c], tb->outside[b]);
          }
        }
      }
    } else {
      const T* src_n = input + n * plane * channels;
      for (int64_t b = 0; b < cnt; ++b) {
        T* dst = output + (n * points + p0 + b) * channels;
        for (int64_t c = 0; c < channels; ++c) {
          dst[c] = TapSum(*tb, b, [&](int t) { return src_n[tb->off[b][t] * channels + c]; });
        }
        if (fill != nullptr) {
          for (int64_t c = 0; c < channels; ++c) {
            dst[c] = dst[c] + gs::FillTerm(fill[c], tb->outside[b]);
          }
        }
      }
    }
  }
}

#if GS_CPU_HAVE_AVX2_PATH
// The same source compiled for AVX2 + FMA: what the portable strategy runs
// where the CPU has them (its fused multiply-adds inline).
template <typename T, int K, int kInterp, bool kChannelsLast>
__attribute__((target("avx2,fma"))) void PortableChunkAvx2(const Geometry& g, const T* input,
                                                           const T* grid, T* output, int64_t n,
                                                           int64_t p_begin, int64_t p_end) {
  PortableChunk<T, K, kInterp, kChannelsLast>(g, input, grid, output, n, p_begin, p_end);
}
#endif

// The portable strategy on points [p_begin, p_end) of batch element n.
template <typename T, int K, int kInterp, bool kChannelsLast>
void RunPortableChunk(const Geometry& g, const T* input, const T* grid, T* output, int64_t n,
                      int64_t p_begin, int64_t p_end) {
#if GS_CPU_HAVE_AVX2_PATH
  if (HasAvx2Fma()) {
    return PortableChunkAvx2<T, K, kInterp, kChannelsLast>(g, input, grid, output, n, p_begin,
                                                           p_end);
  }
#endif
  PortableChunk<T, K, kInterp, kChannelsLast>(g, input, grid, output, n, p_begin, p_end);
}

template <typename T, int K, int kInterp, bool kChannelsLast>
void ForwardPortable(ffi::ThreadPool& pool, const Geometry& g, const T* input, const T* grid,
                     T* output) {
  using TB = TapBlock<T, K, kInterp>;
  const int64_t per_chunk = PointsPerChunk(g.points, g.c, TB::kTaps, TB::kBlock);
  ParallelForPoints(pool, g, per_chunk, [&](int64_t n, int64_t p_begin, int64_t p_end) {
    RunPortableChunk<T, K, kInterp, kChannelsLast>(g, input, grid, output, n, p_begin, p_end);
  });
}

// A batch element per task where the pairs or the tile sampler read whole
// planes at random and that keeps the threads busy (each core's cache then
// holds its own element's pixels), else chunks of points. Through the copy,
// always a batch element: each task copies it into a buffer of its own,
// which stays in the core's cache, and samples all of its points from there.
int64_t VectorPointsPerTask(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                            ForwardStrategy strategy) {
  if (strategy == ForwardStrategy::kTilesViaCopy) return g.points;
  const bool whole = (strategy == ForwardStrategy::kTiles || SamplesPairs(g, interpolation)) &&
                     ElementsKeepThreadsBusy(pool.num_threads(), g);
  const int taps = gs::TapsPerPoint(g.k, static_cast<int>(interpolation));
  return whole ? g.points : PointsPerChunk(g.points, g.c, taps, BlockPoints(taps));
}

// The float32 vector strategies (tile_sampler.h, gather_sampler.h).
void ForwardVector(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                   ForwardStrategy strategy, const float* input, const float* grid, float* output) {
  const int64_t per_task = VectorPointsPerTask(pool, g, interpolation, strategy);
  ParallelForPoints(pool, g, per_task, [&](int64_t n, int64_t p_begin, int64_t p_end) {
    if (strategy == ForwardStrategy::kGather) {
      ForwardGatherF32(g, interpolation, input, grid, output, n, p_begin, p_end);
    } else {
      ForwardTilesF32(g, interpolation, input, grid, output, n, p_begin, p_end);
    }
  });
}

// The float32 or float64 kernel (dt) of `strategy` on the buffers.
ffi::Error ForwardTyped(ffi::ThreadPool& pool, const Geometry& g, ffi::DataType dt,
                        int64_t interpolation, ForwardStrategy strategy, const void* input,
                        const void* grid, void* output) {
  if (g.n == 0 || g.c == 0 || g.points == 0) return ffi::Error::Success();
  if (strategy != ForwardStrategy::kPortable) {
    ForwardVector(pool, g, interpolation, strategy, static_cast<const float*>(input),
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
ffi::Error ForwardHalf(ffi::ThreadPool& pool, Geometry g, int64_t interpolation,
                       ForwardStrategy strategy, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                       ffi::AnyBuffer output) {
  auto wide_input = Widen<H>(pool, "float32 input", input.untyped_data(), input.element_count());
  auto wide_grid = Widen<H>(pool, "float32 grid", grid.untyped_data(), grid.element_count());
  std::unique_ptr<float[]> wide_fill;
  if (g.fill != nullptr) {
    wide_fill = Widen<H>(pool, "float32 fill", g.fill, g.c);
    g.fill = wide_fill.get();
  }
  const int64_t wide_size = output.element_count();
  auto wide_output = NewArray<float>("float32 output", wide_size);
  ffi::Error err = ForwardTyped(pool, g, ffi::DataType::F32, interpolation, strategy,
                                wide_input.get(), wide_grid.get(), wide_output.get());
  if (err.success()) Narrow<H>(pool, wide_output.get(), output.untyped_data(), wide_size);
  return err;
}

// `strategy`: ForwardStrategy::kAuto (the production target) or one to force
// (the test target), which must be able to take the call.
// `padding`: one code for every axis (version 1) or one per axis (version 2);
// `fill`: version 2's fill operand (nullptr for version 1).
ffi::Error ForwardRun(ffi::ThreadPool pool, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                      const ffi::AnyBuffer* fill, ffi::Result<ffi::AnyBuffer> output,
                      int64_t interpolation, ffi::Span<const int64_t> padding,
                      bool align_corners, bool channels_last, int64_t strategy) {
  Geometry g;
  if (ffi::Error err = gs_ffi::MakeGeometry(kPlatform, input, grid, "output", *output,
                                            interpolation, padding, align_corners,
                                            channels_last, &g, fill);
      !err.success()) {
    return err;
  }
  const ffi::DataType dt = input.element_type();
  ForwardStrategy chosen;
  if (ffi::Error err =
          ResolveForwardStrategy(strategy, g, dt, interpolation, pool.num_threads(), &chosen);
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

// Version 2, the strategy forced (the test target).
ffi::Error ForwardImpl(ffi::ThreadPool pool, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                       ffi::AnyBuffer fill, ffi::Result<ffi::AnyBuffer> output,
                       int64_t interpolation, ffi::Span<const int64_t> padding,
                       bool align_corners, bool channels_last, int64_t strategy) {
  return ForwardRun(pool, input, grid, &fill, output, interpolation, padding, align_corners,
                    channels_last, strategy);
}

ffi::Error ForwardAuto(ffi::ThreadPool pool, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                       ffi::AnyBuffer fill, ffi::Result<ffi::AnyBuffer> output,
                       int64_t interpolation, ffi::Span<const int64_t> padding,
                       bool align_corners, bool channels_last) {
  return ForwardRun(pool, input, grid, &fill, output, interpolation, padding, align_corners,
                    channels_last, static_cast<int64_t>(ForwardStrategy::kAuto));
}

// Version 1: one padding code for every axis, no fill.
ffi::Error ForwardAutoV1(ffi::ThreadPool pool, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                         ffi::Result<ffi::AnyBuffer> output, int64_t interpolation,
                         int64_t padding, bool align_corners, bool channels_last) {
  return ForwardRun(pool, input, grid, nullptr, output, interpolation, {&padding, 1},
                    align_corners, channels_last, static_cast<int64_t>(ForwardStrategy::kAuto));
}

}  // namespace
}  // namespace gs_cpu

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleForwardCpu,
    (gs_ffi::NoExceptions<gs_cpu::kPlatform, gs_cpu::ForwardAuto>::Call),
    gs_ffi::BindForward<gs_ffi::PaddingV2>(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleForwardCpuV1,
    (gs_ffi::NoExceptions<gs_cpu::kPlatform, gs_cpu::ForwardAutoV1>::Call),
    gs_ffi::BindForward<gs_ffi::PaddingV1>(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
// The same forward (version 2) with the strategy forced (attribute
// "strategy"): for tests.
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleForwardCpuWithStrategy,
    (gs_ffi::NoExceptions<gs_cpu::kPlatform, gs_cpu::ForwardImpl>::Call),
    gs_ffi::BindForward<gs_ffi::PaddingV2>(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>())
        .Attr<int64_t>("strategy"));
