// XLA FFI CUDA handler: grid_sample forward.
//
// One thread per (batch element, output point, channel group): it computes the
// point's taps once (shared per-axis math) and then, for each channel of its
// group, the weighted sum of the in-range taps. Channels first (NCHW): one
// group of all channels, so a warp writes 32 consecutive output points of a
// channel. Channels last (NHWC): groups of a few channels, consecutive groups
// in consecutive threads, so a warp reads contiguous channel vectors per tap
// and writes contiguous output rows. Every output element is written once.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "../common/ffi_contract.h"
#include "../common/handler_exceptions.h"
#include "grid_sample_cuda.cuh"
#include "xla/ffi/api/ffi.h"

namespace gs_cuda {
namespace {

// `fill`: with a "constant" axis, the fill value of each channel (added with
// the weight of the taps outside); nullptr otherwise.
template <typename Fmt, int K, int kInterp, typename I>
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(Params<I> p, const typename Fmt::Storage* __restrict__ input,
                  const typename Fmt::Storage* __restrict__ grid,
                  const typename Fmt::Storage* __restrict__ fill,
                  typename Fmt::Storage* __restrict__ output) {
  using T = typename Fmt::Compute;
  const I total = p.n * p.points * p.cgroups;
  for (I idx = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<I>(gridDim.x) * blockDim.x) {
    // Channels last: groups of a point in consecutive threads (contiguous
    // channel vectors). Channels first: points in consecutive threads
    // (contiguous output rows), one channel group after the other.
    I cg, pt;  // channel group, n * points + point
    if (p.in_sc == 1) {
      cg = idx % p.cgroups;
      pt = idx / p.cgroups;
    } else {
      const I npts = p.n * p.points;
      pt = idx % npts;
      cg = idx / npts;
    }
    const I n = pt / p.points;
    const I pnt = pt - n * p.points;
    T coords[K];
    LoadCoords<Fmt, K>(grid, pt, coords);
    PointTaps<T, K, kInterp, I> taps;
    taps.Compute(coords, p);
    const I c_begin = cg * p.cchunk;
    const I c_end = c_begin + p.cchunk < p.c ? c_begin + p.cchunk : p.c;
    const typename Fmt::Storage* src = input + n * p.in_sn;
    typename Fmt::Storage* dst = output + n * p.out_sn + pnt * p.out_sp;
    const T outside = fill != nullptr ? taps.Outside(p) : T(0);
    // A few channels in flight per thread (independent gathers) where the
    // unrolled body stays small.
#pragma unroll(PointTaps<T, K, kInterp, I>::kTaps <= 16 ? 4 : 1)
    for (I c = c_begin; c < c_end; ++c) {
      const typename Fmt::Storage* src_c = src + c * p.in_sc;
      T sum = T(0);
      taps.ForEachTap(p, [&](int, bool valid, I off, T w, int, int, int) {
        if (valid) sum += w * Fmt::Load(src_c[off * p.in_ss]);
      });
      if (fill != nullptr) sum = sum + gs::FillTerm(Fmt::Load(fill[c]), outside);
      dst[c * p.out_sc] = Fmt::Store(sum);
    }
  }
}

// `padding`: one code for every axis (version 1) or one per axis (version 2);
// `fill`: version 2's fill operand (nullptr for version 1).
ffi::Error ForwardRun(cudaStream_t stream, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                      const ffi::AnyBuffer* fill, ffi::Result<ffi::AnyBuffer> output,
                      int64_t interpolation, ffi::Span<const int64_t> padding,
                      bool align_corners, bool channels_last) {
  gs_ffi::Geometry g;
  if (ffi::Error err = gs_ffi::MakeGeometry(kPlatform, input, grid, "output", *output,
                                            interpolation, padding, align_corners, channels_last,
                                            &g, fill);
      !err.success()) {
    return err;
  }
  if (g.n == 0 || g.c == 0 || g.points == 0) return ffi::Error::Success();

  // Channel groups: channels last splits channels into groups of 4 (a warp
  // then covers 8 points x 32 channels); channels first keeps all channels in
  // one thread unless there are too few points to fill the device.
  const int64_t pts = g.n * g.points;
  int64_t cchunk = g.c;
  if (channels_last) {
    cchunk = std::min<int64_t>(g.c, 4);
  } else if (pts < (int64_t{1} << 17)) {
    const int64_t want_groups = ((int64_t{1} << 17) + pts - 1) / pts;
    cchunk = std::max<int64_t>(1, (g.c + want_groups - 1) / want_groups);
  }
  const int64_t cgroups = (g.c + cchunk - 1) / cchunk;
  const int64_t threads = pts * cgroups;
  const bool use64 = !FitsInt32(g.n * g.c * g.plane) || !FitsInt32(g.n * g.c * g.points) ||
                     !FitsInt32(pts * g.k) || !FitsInt32(threads + int64_t{kThreads} * (1 << 20));

  return Dispatch(input.element_type(), g.k, interpolation, use64,
                  [&](auto fmt, auto k, auto interp, auto index) -> ffi::Error {
                    using Fmt = decltype(fmt);
                    using I = decltype(index);
                    using S = typename Fmt::Storage;
                    Params<I> p = MakeParams<I>(g);
                    p.cchunk = static_cast<I>(cchunk);
                    p.cgroups = static_cast<I>(cgroups);
                    ForwardKernel<Fmt, decltype(k)::value, decltype(interp)::value, I>
                        <<<NumBlocks(threads), kThreads, 0, stream>>>(
                            p, reinterpret_cast<const S*>(input.untyped_data()),
                            reinterpret_cast<const S*>(grid.untyped_data()),
                            reinterpret_cast<const S*>(g.fill),
                            reinterpret_cast<S*>(output->untyped_data()));
                    return LastCudaError("forward kernel launch");
                  });
}

ffi::Error ForwardImpl(cudaStream_t stream, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                       ffi::AnyBuffer fill, ffi::Result<ffi::AnyBuffer> output,
                       int64_t interpolation, ffi::Span<const int64_t> padding,
                       bool align_corners, bool channels_last) {
  return ForwardRun(stream, input, grid, &fill, output, interpolation, padding, align_corners,
                    channels_last);
}

// Version 1: one padding code for every axis, no fill.
ffi::Error ForwardImplV1(cudaStream_t stream, ffi::AnyBuffer input, ffi::AnyBuffer grid,
                         ffi::Result<ffi::AnyBuffer> output, int64_t interpolation,
                         int64_t padding, bool align_corners, bool channels_last) {
  return ForwardRun(stream, input, grid, nullptr, output, interpolation, {&padding, 1},
                    align_corners, channels_last);
}

}  // namespace
}  // namespace gs_cuda

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleForwardCuda,
    (gs_ffi::NoExceptions<gs_cuda::kPlatform, gs_cuda::ForwardImpl>::Call),
    gs_ffi::BindForward<gs_ffi::PaddingV2>(
        xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<cudaStream_t>>()),
    {xla::ffi::Traits::kCmdBufferCompatible});
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleForwardCudaV1,
    (gs_ffi::NoExceptions<gs_cuda::kPlatform, gs_cuda::ForwardImplV1>::Call),
    gs_ffi::BindForward<gs_ffi::PaddingV1>(
        xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<cudaStream_t>>()),
    {xla::ffi::Traits::kCmdBufferCompatible});
