// XLA FFI CPU handler: grid_sample forward.
//
// Work is split over (batch element, chunk of output points); each chunk
// computes the taps of a block of points once and then loops over channels:
// contiguous output rows per channel (NCHW) or contiguous channel vectors per
// tap (channels last). Every output element is written by exactly one chunk.
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
#include "xla/ffi/api/ffi.h"

namespace gs_cpu {
namespace {

// Channels-first float32 through channels-last copies of the input (see
// grid_sample_avx2.h): one task per batch element copies it into a buffer of
// its own, which stays in the core's cache (up to kMaxCopyBytes), and then
// samples all of its points from there (rather than copying the next
// element while sampling one, which costs more). Returns false, having
// written nothing, when the copy would be larger, or the batch too small to
// keep the threads busy.
bool ForwardViaChannelsLast(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                            const float* input, const float* grid, float* output) {
  constexpr int64_t kMaxCopyBytes = int64_t{4} << 20;
  const int64_t floats = ViaChannelsLastBufferFloats(g);
  if (!ElementsKeepThreadsBusy(pool.num_threads(), g) || floats * 4 > kMaxCopyBytes) return false;
  ParallelFor(pool, g.n, [&](int64_t n) {
    std::unique_ptr<float[]> buffer(new (std::nothrow) float[floats]);
    if (buffer != nullptr) {
      ForwardViaChannelsLastAvx2F32(g, interpolation, input, grid, output, n, buffer.get());
    } else {  // no memory for the copy: the gather path (the same results)
      ForwardChunkAvx2F32(g, interpolation, input, grid, output, n, 0, g.points);
    }
  });
  return true;
}

template <typename Fmt, int K, int kInterp, bool kChannelsLast>
void ForwardKernel(ffi::ThreadPool& pool, const Geometry& g,
                   const typename Fmt::Storage* input, const typename Fmt::Storage* grid,
                   typename Fmt::Storage* output) {
  using S = typename Fmt::Storage;
  using T = typename Fmt::Compute;
  using TB = TapBlock<T, K, kInterp>;
  constexpr int kTaps = TB::kTaps;
  constexpr int64_t kBlock = TB::kBlock;
  const int64_t n_batch = g.n, channels = g.c, points = g.points, plane = g.plane;
  if (n_batch == 0 || channels == 0 || points == 0) return;

  const int64_t pts_per_chunk = PointsPerChunk(points, channels, kTaps, kBlock);
  const int64_t chunks_per_n = CeilDiv(points, pts_per_chunk);

  if constexpr (std::is_same_v<S, float> && std::is_same_v<T, float>) {
    if (HasAvx2Fma() && Avx2PathFits(g)) {
      if (ViaChannelsLastPays(g, kInterp) &&
          ForwardViaChannelsLast(pool, g, kInterp, input, grid, output)) {
        return;
      }
      // Channels-last input sampled in place, and bilinear pairs: a whole
      // batch element per task where that keeps the threads busy, so that
      // each core's cache holds the pixels of its own element (split into
      // chunks, both cores read the same element at once; and each chunk of
      // pairs reads every plane of the element again).
      const bool whole =
          (SamplesChannelsLastInPlace(g, kInterp) || SamplesPairs(g, kInterp)) &&
          ElementsKeepThreadsBusy(pool.num_threads(), g);
      const int64_t avx2_pts = whole ? points : pts_per_chunk;
      const int64_t avx2_chunks = CeilDiv(points, avx2_pts);
      // Pairs from planes that overflow a core's L2: each thread takes a
      // share of the planes (PairPartsPerElement), so that the planes it
      // reads stay in its L2 (in chunks of points, every thread would read
      // all the planes).
      const int64_t parts = whole ? 1 : PairPartsPerElement(g, kInterp, pool.num_threads());
      if (parts > 1) {
        ParallelFor(pool, n_batch * parts, [&](int64_t task) {
          ForwardPartAvx2F32(g, kInterp, input, grid, output, task / parts, task % parts, parts);
        });
        return;
      }
      ParallelFor(pool, n_batch * avx2_chunks, [&](int64_t chunk) {
        const int64_t n = chunk / avx2_chunks;
        const int64_t p_begin = (chunk % avx2_chunks) * avx2_pts;
        const int64_t p_end = std::min(points, p_begin + avx2_pts);
        ForwardChunkAvx2F32(g, kInterp, input, grid, output, n, p_begin, p_end);
      });
      return;
    }
  }

  ParallelFor(pool, n_batch * chunks_per_n, [&](int64_t chunk) {
    const int64_t n = chunk / chunks_per_n;
    const int64_t p_begin = (chunk % chunks_per_n) * pts_per_chunk;
    const int64_t p_end = std::min(points, p_begin + pts_per_chunk);
    auto tb = NewTapBlock<TB>();
    constexpr int64_t kCBlock = 128;
    T acc[kCBlock];
    for (int64_t p0 = p_begin; p0 < p_end; p0 += kBlock) {
      const int64_t cnt = std::min(kBlock, p_end - p0);
      FillTaps<Fmt, K, kInterp>(grid + (n * points + p0) * K, cnt, g, false, tb.get());
      if (!kChannelsLast) {
        // Points with every tap in range: channel-outer, contiguous output rows.
        for (int64_t c = 0; c < channels; ++c) {
          const S* src = input + (n * channels + c) * plane;
          S* dst = output + (n * channels + c) * points + p0;
          for (int i = 0; i < tb->n_full; ++i) {
            const int b = tb->full[i];
            T sum = T(0);
            for (int t = 0; t < kTaps; ++t) sum += tb->w[b][t] * Fmt::Load(src[tb->off[b][t]]);
            dst[b] = Fmt::Store(sum);
          }
        }
        // The others, channel-outer too, by tap count (the same trip count
        // for consecutive points of the tap loop).
        for (int64_t c = 0; c < channels; ++c) {
          const S* src = input + (n * channels + c) * plane;
          S* dst = output + (n * channels + c) * points + p0;
          for (int nt = 0; nt <= kTaps; ++nt) {
            for (int i = tb->part_begin[nt]; i < tb->part_begin[nt + 1]; ++i) {
              const int b = tb->part[i];
              T sum = T(0);
              for (int t = 0; t < nt; ++t) sum += tb->w[b][t] * Fmt::Load(src[tb->off[b][t]]);
              dst[b] = Fmt::Store(sum);
            }
          }
        }
      } else {
        const S* src_n = input + n * plane * channels;
        for (int64_t b = 0; b < cnt; ++b) {
          S* dst = output + (n * points + p0 + b) * channels;
          for (int64_t c0 = 0; c0 < channels; c0 += kCBlock) {
            const int64_t cn = std::min(kCBlock, channels - c0);
            for (int64_t c = 0; c < cn; ++c) acc[c] = T(0);
            const int nt = tb->ntaps[b];
            for (int t = 0; t < nt; ++t) {
              const int64_t off = tb->off[b][t];
              const T wt = tb->w[b][t];
              const S* row = src_n + off * channels + c0;
              for (int64_t c = 0; c < cn; ++c) acc[c] += wt * Fmt::Load(row[c]);
            }
            for (int64_t c = 0; c < cn; ++c) dst[c0 + c] = Fmt::Store(acc[c]);
          }
        }
      }
    }
  });
}

// The float32 or float64 kernel (dt) on the buffers.
ffi::Error ForwardTyped(ffi::ThreadPool& pool, const Geometry& g, ffi::DataType dt,
                        int64_t interpolation, const void* input, const void* grid,
                        void* output) {
  return Dispatch(dt, g.k, interpolation, g.channels_last,
                  [&](auto fmt, auto k, auto interp, auto cl) -> ffi::Error {
                    using S = typename decltype(fmt)::Storage;
                    ForwardKernel<decltype(fmt), decltype(k)::value, decltype(interp)::value,
                                  decltype(cl)::value>(pool, g, static_cast<const S*>(input),
                                                       static_cast<const S*>(grid),
                                                       static_cast<S*>(output));
                    return ffi::Error::Success();
                  });
}

// Half precision (format H): the float32 kernel on widened copies.
template <typename H>
ffi::Error ForwardHalf(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                       ffi::AnyBuffer input, ffi::AnyBuffer grid, ffi::AnyBuffer output) {
  std::unique_ptr<float[]> wide_input = Widen<H>(pool, input.untyped_data(), input.element_count());
  std::unique_ptr<float[]> wide_grid = Widen<H>(pool, grid.untyped_data(), grid.element_count());
  std::unique_ptr<float[]> wide_output = FloatBuffer(output.element_count());
  if (ffi::Error err = ForwardTyped(pool, g, ffi::DataType::F32, interpolation, wide_input.get(),
                                    wide_grid.get(), wide_output.get());
      !err.success()) {
    return err;
  }
  Narrow<H>(pool, wide_output.get(), output.untyped_data(), output.element_count());
  return ffi::Error::Success();
}

ffi::Error ForwardImpl(ffi::ThreadPool pool, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                       ffi::Result<ffi::AnyBuffer> output, int64_t interpolation, int64_t padding,
                       bool align_corners, bool channels_last) {
  Geometry g;
  if (ffi::Error err = MakeGeometry(input, grid, interpolation, padding, align_corners,
                                    channels_last, &g);
      !err.success()) {
    return err;
  }
  int64_t dims[5];
  const size_t rank = gs_ffi::OutputDims(grid, g, dims);
  if (ffi::Error err = CheckShape("output", *output, input.element_type(), dims, rank);
      !err.success()) {
    return err;
  }
  switch (input.element_type()) {
    case ffi::DataType::F16:
      return ForwardHalf<gs::F16Format>(pool, g, interpolation, input, grid, *output);
    case ffi::DataType::BF16:
      return ForwardHalf<gs::BF16Format>(pool, g, interpolation, input, grid, *output);
    default:
      return ForwardTyped(pool, g, input.element_type(), interpolation, input.untyped_data(),
                          grid.untyped_data(), output->untyped_data());
  }
}

}  // namespace
}  // namespace gs_cpu

XLA_FFI_DEFINE_HANDLER_SYMBOL(GridSampleForwardCpu, gs_cpu::ForwardImpl,
                              gs_ffi::BindForward(
                                  xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
