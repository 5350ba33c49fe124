// Pieces shared by the CUDA forward and backward handlers: error plumbing,
// kernel parameters, the per-point tap computation (on top of the shared
// per-axis math in ffi/common/grid_sample_math.h) and the dispatch.
//
// Index type I (int32_t or int64_t) is a template parameter of every kernel:
// the handlers pick int32_t when every linear index of the call (elements of
// each tensor, threads, backward tap records) fits, int64_t otherwise.
#ifndef JAX_GRIDSAMPLE_FFI_CUDA_GRID_SAMPLE_CUDA_CUH_
#define JAX_GRIDSAMPLE_FFI_CUDA_GRID_SAMPLE_CUDA_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "../common/grid_sample_dtypes.h"
#include "../common/grid_sample_math.h"
#include "../common/grid_sample_validate.h"
#include "xla/ffi/api/ffi.h"

namespace gs_cuda {

namespace ffi = xla::ffi;

inline constexpr const char* kPlatform = "cuda";

static_assert(std::is_same_v<ffi::NativeType<ffi::DataType::F16>, gs::F16Format::Storage>);
static_assert(std::is_same_v<ffi::NativeType<ffi::DataType::BF16>, gs::BF16Format::Storage>);
static_assert(std::is_same_v<ffi::NativeType<ffi::DataType::F32>, gs::F32Format::Storage>);
static_assert(std::is_same_v<ffi::NativeType<ffi::DataType::F64>, gs::F64Format::Storage>);

inline ffi::Error InvalidArgument(const std::string& msg) {
  return gs_ffi::InvalidArgument(kPlatform, msg);
}

// The error of the last launch (or of an earlier asynchronous failure), as an
// FFI error; Success when there is none. Never synchronises.
inline ffi::Error LastCudaError(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return ffi::Error::Success();
  return ffi::Error(ffi::ErrorCode::kInternal, std::string("grid_sample (cuda): ") + what +
                                                   " failed: " + cudaGetErrorName(err) + ": " +
                                                   cudaGetErrorString(err));
}

inline ffi::Error CudaCall(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return ffi::Error::Success();
  return ffi::Error(ffi::ErrorCode::kInternal, std::string("grid_sample (cuda): ") + what +
                                                   " failed: " + cudaGetErrorName(err) + ": " +
                                                   cudaGetErrorString(err));
}

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over `total` items (total > 0).
inline unsigned int NumBlocks(int64_t total) {
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(std::min<int64_t>(blocks, int64_t{1} << 20));
}

inline bool FitsInt32(int64_t v) { return v <= int64_t{std::numeric_limits<int32_t>::max()}; }

// Sizes and strides of a call, in the kernels' index type. Strides are in
// elements; the layout only changes strides.
template <typename I>
struct Params {
  I n, c, d, h, w, plane, points;
  // input / grad_input: element (n, c, spatial offset s) at n*in_sn + c*in_sc + s*in_ss
  I in_sn, in_sc, in_ss;
  // output / grad_output: element (n, c, point p) at n*out_sn + c*out_sc + p*out_sp
  I out_sn, out_sc, out_sp;
  I cchunk, cgroups;  // channels per thread and channel groups per point (forward)
  int64_t padding[3];  // per axis: x, y, z
  bool align_corners;
};

template <typename I>
Params<I> MakeParams(const gs_ffi::Geometry& g) {
  Params<I> p;
  p.n = static_cast<I>(g.n);
  p.c = static_cast<I>(g.c);
  p.d = static_cast<I>(g.d);
  p.h = static_cast<I>(g.h);
  p.w = static_cast<I>(g.w);
  p.plane = static_cast<I>(g.plane);
  p.points = static_cast<I>(g.points);
  if (g.channels_last) {
    p.in_sn = static_cast<I>(g.plane * g.c);
    p.in_sc = 1;
    p.in_ss = static_cast<I>(g.c);
    p.out_sn = static_cast<I>(g.points * g.c);
    p.out_sc = 1;
    p.out_sp = static_cast<I>(g.c);
  } else {
    p.in_sn = static_cast<I>(g.c * g.plane);
    p.in_sc = static_cast<I>(g.plane);
    p.in_ss = 1;
    p.out_sn = static_cast<I>(g.c * g.points);
    p.out_sc = static_cast<I>(g.points);
    p.out_sp = 1;
  }
  p.cchunk = static_cast<I>(std::max<int64_t>(1, g.c));
  p.cgroups = 1;
  for (int a = 0; a < 3; ++a) p.padding[a] = g.axis_padding[a];
  p.align_corners = g.align_corners;
  return p;
}

// Taps of one output point: per-axis taps (x: W, y: H, z: D; z is a single
// unit tap in 2D). The tensor-product taps are enumerated by ForEachTap.
template <typename T, int K, int kInterp, typename I>
struct PointTaps {
  static constexpr int kT1 = gs::TapsPerAxis(kInterp);
  static constexpr int kTz = K == 3 ? kT1 : 1;
  static constexpr int kTaps = kT1 * kT1 * kTz;
  gs::AxisTaps<T, kT1, I> x, y;
  gs::AxisTaps<T, kTz, I> z;

  __device__ __forceinline__ void Compute(const T* coords, const Params<I>& p) {
    gs::ComputeAxisTaps<kInterp, T, I>(coords[0], p.w, p.padding[0], p.align_corners, &x);
    gs::ComputeAxisTaps<kInterp, T, I>(coords[1], p.h, p.padding[1], p.align_corners, &y);
    if constexpr (K == 3) {
      gs::ComputeAxisTaps<kInterp, T, I>(coords[2], p.d, p.padding[2], p.align_corners, &z);
    } else {
      z.idx[0] = 0;
      z.w[0] = T(1);
      z.dw[0] = T(0);
      z.dmult = T(0);
    }
  }

  // "constant" padding: the fill value's weight 1 - W (gs::SubtractOutsideWeight's
  // order: W the product over the fill axes, x first).
  __device__ __forceinline__ T Outside(const Params<I>& p) const {
    T inside = T(1);
    auto axis = [&](const auto& t, int a) {
      if (!gs::ReadsFill(p.padding[a])) return;
      T s = T(1);
#pragma unroll
      for (int i = 0; i < static_cast<int>(sizeof(t.w) / sizeof(T)); ++i) {
        s = gs::SubtractOutsideWeight(s, t.idx[i], t.w[i]);
      }
      inside = inside * s;
    };
    axis(x, 0);
    axis(y, 1);
    if constexpr (K == 3) axis(z, 2);
    return T(1) - inside;
  }

  // f(t, valid, offset, weight, i, j, l) for every tap t in the fixed order
  // z-major, then y, then x (offset is meaningful only when valid).
  template <typename F>
  __device__ __forceinline__ void ForEachTap(const Params<I>& p, F&& f) const {
    // Tricubic (64 taps): keep the z loop rolled, the register count in check.
#pragma unroll(kTz > 2 ? 1 : kTz)
    for (int l = 0; l < kTz; ++l) {
#pragma unroll
      for (int j = 0; j < kT1; ++j) {
        const T wzy = z.w[l] * y.w[j];
        const bool vzy = (z.idx[l] >= 0) & (y.idx[j] >= 0);
        const I row = (z.idx[l] * p.h + y.idx[j]) * p.w;
#pragma unroll
        for (int i = 0; i < kT1; ++i) {
          const bool valid = vzy & (x.idx[i] >= 0);
          f((l * kT1 + j) * kT1 + i, valid, row + x.idx[i], wzy * x.w[i], i, j, l);
        }
      }
    }
  }
};

// Loads the K coordinates of point `pt` (global point index n*points + p).
template <typename Fmt, int K, typename I>
__device__ __forceinline__ void LoadCoords(const typename Fmt::Storage* grid, I pt,
                                           typename Fmt::Compute* c) {
#pragma unroll
  for (int a = 0; a < K; ++a) c[a] = Fmt::Load(grid[pt * K + a]);
}

// The one dispatch point: dtype x spatial rank x interpolation x index type.
// `f` is called as f(Fmt{}, integral_constant<int, K>, integral_constant<int,
// Interp>, I{}) and returns ffi::Error. The layout is a run-time stride.
template <typename Fmt, int K, typename F>
ffi::Error DispatchModes(int64_t interpolation, bool use64, F&& f) {
  auto with_index = [&](auto interp) -> ffi::Error {
    if (use64) return f(Fmt{}, std::integral_constant<int, K>{}, interp, int64_t{});
    return f(Fmt{}, std::integral_constant<int, K>{}, interp, int32_t{});
  };
  switch (interpolation) {
    case gs::kBilinear: return with_index(std::integral_constant<int, gs::kBilinear>{});
    case gs::kNearest: return with_index(std::integral_constant<int, gs::kNearest>{});
    case gs::kBicubic: return with_index(std::integral_constant<int, gs::kBicubic>{});
    default: return InvalidArgument("attribute interpolation out of range");
  }
}

template <typename F>
ffi::Error Dispatch(ffi::DataType dt, int k, int64_t interpolation, bool use64, F&& f) {
  auto rank = [&](auto fmt) -> ffi::Error {
    using Fmt = decltype(fmt);
    if (k == 2) return DispatchModes<Fmt, 2>(interpolation, use64, f);
    if (k == 3) return DispatchModes<Fmt, 3>(interpolation, use64, f);
    return InvalidArgument("spatial rank must be 2 or 3");
  };
  switch (dt) {
    case ffi::DataType::F16: return rank(gs::F16Format{});
    case ffi::DataType::BF16: return rank(gs::BF16Format{});
    case ffi::DataType::F32: return rank(gs::F32Format{});
    case ffi::DataType::F64: return rank(gs::F64Format{});
    default: return InvalidArgument("unsupported dtype");
  }
}

}  // namespace gs_cuda

#endif  // JAX_GRIDSAMPLE_FFI_CUDA_GRID_SAMPLE_CUDA_CUH_
