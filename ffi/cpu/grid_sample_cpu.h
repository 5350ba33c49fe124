// Pieces shared by the CPU forward and backward handlers: argument
// validation, the problem geometry, per-block tap tables and the single
// dtype / rank / mode / layout dispatch point.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_GRID_SAMPLE_CPU_H_
#define JAX_GRIDSAMPLE_FFI_CPU_GRID_SAMPLE_CPU_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "../common/grid_sample_dtypes.h"
#include "../common/grid_sample_math.h"
#include "../common/grid_sample_validate.h"
#include "xla/ffi/api/ffi.h"

namespace gs_cpu {

namespace ffi = xla::ffi;

static_assert(std::is_same_v<ffi::NativeType<ffi::DataType::F16>, gs::F16Format::Storage>);
static_assert(std::is_same_v<ffi::NativeType<ffi::DataType::BF16>, gs::BF16Format::Storage>);
static_assert(std::is_same_v<ffi::NativeType<ffi::DataType::F32>, gs::F32Format::Storage>);
static_assert(std::is_same_v<ffi::NativeType<ffi::DataType::F64>, gs::F64Format::Storage>);

// Validation and geometry are shared with the other platforms' handlers
// (ffi/common/grid_sample_validate.h); errors start with "grid_sample (cpu): ".
inline constexpr const char* kPlatform = "cpu";
using gs_ffi::DimsToString;
using gs_ffi::DTypeName;
using gs_ffi::Geometry;

inline ffi::Error InvalidArgument(const std::string& msg) {
  return gs_ffi::InvalidArgument(kPlatform, msg);
}

// Validates input / grid / attributes and fills the geometry.
inline ffi::Error MakeGeometry(const ffi::AnyBuffer& input, const ffi::AnyBuffer& grid,
                               int64_t interpolation, int64_t padding, bool align_corners,
                               bool channels_last, Geometry* g) {
  return gs_ffi::MakeGeometry(kPlatform, input, grid, interpolation, padding, align_corners,
                              channels_last, g);
}

// Checks that `buf` has the dtype and dims of the output (or of `like`).
inline ffi::Error CheckShape(const char* name, const ffi::AnyBuffer& buf, ffi::DataType dt,
                             const int64_t* dims, size_t rank) {
  return gs_ffi::CheckShape(kPlatform, name, buf, dt, dims, rank);
}

// Expected output dims for input/grid of a geometry; returns the rank.
inline size_t OutputDims(const ffi::AnyBuffer& input, const ffi::AnyBuffer& grid,
                         const Geometry& g, int64_t* dims) {
  (void)input;
  return gs_ffi::OutputDims(grid, g, dims);
}

// Taps of a block of output points: the in-range taps of each point (tensor
// product of the axes' taps, out-of-range ones left out, order kept) as
// offsets into one input plane, their weights, and for the grid gradient the
// per-axis weight derivatives and the per-axis coordinate chain factor.
// Points whose taps are all in range are listed in `full`, the others in
// `part`, so that the channel loops need no per-tap branch.
template <typename T, int K, int kInterp>
struct TapBlock {
  static constexpr int kT1 = gs::TapsPerAxis(kInterp);
  static constexpr int kTaps = K == 2 ? kT1 * kT1 : kT1 * kT1 * kT1;
  static constexpr int kBlock = std::max(16, 2048 / kTaps);
  int64_t off[kBlock][kTaps];
  T w[kBlock][kTaps];
  T gw[kBlock][K][kTaps];  // d(weight)/d(padded coordinate of axis a)
  T dmult[kBlock][K];      // d(padded coordinate)/d(normalized coordinate)
  int ntaps[kBlock];       // in-range taps of each point
  int full[kBlock];        // points with all kTaps taps in range
  int part[kBlock];        // the other points
  int n_full, n_part;
};

template <typename TB>
std::unique_ptr<TB> NewTapBlock() {
  return std::unique_ptr<TB>(new TB);  // default-initialized: no zeroing
}

// Fills `tb` for `count` points whose coordinates start at `grid` (k values
// per point, x first).
template <typename Fmt, int K, int kInterp>
inline void FillTaps(const typename Fmt::Storage* grid, int64_t count, const Geometry& g,
                     bool need_grad, TapBlock<typename Fmt::Compute, K, kInterp>* tb) {
  using T = typename Fmt::Compute;
  using TB = TapBlock<T, K, kInterp>;
  constexpr int kT1 = TB::kT1;
  constexpr int kTaps = TB::kTaps;
  using Axis = gs::AxisTaps<T, kT1>;
  int n_full = 0, n_part = 0;
  for (int64_t b = 0; b < count; ++b) {
    const typename Fmt::Storage* pt = grid + b * K;
    Axis ax, ay, az;
    gs::ComputeAxisTaps<kInterp, T>(Fmt::Load(pt[0]), g.w, g.padding, g.align_corners, &ax);
    gs::ComputeAxisTaps<kInterp, T>(Fmt::Load(pt[1]), g.h, g.padding, g.align_corners, &ay);
    if (K == 3) {
      gs::ComputeAxisTaps<kInterp, T>(Fmt::Load(pt[2]), g.d, g.padding, g.align_corners, &az);
    } else {
      az.idx[0] = 0;
      az.w[0] = T(1);
      az.dw[0] = T(0);
      az.dmult = T(0);
    }
    constexpr int kTz = K == 3 ? kT1 : 1;
    int n = 0;  // compacted position: written unconditionally, advanced if valid
    for (int l = 0; l < kTz; ++l) {
      for (int j = 0; j < kT1; ++j) {
        for (int i = 0; i < kT1; ++i) {
          const bool valid = (ax.idx[i] >= 0) & (ay.idx[j] >= 0) & (az.idx[l] >= 0);
          const int slot = n;  // < kTaps: at most the taps before this one were valid
          tb->off[b][slot] = (az.idx[l] * g.h + ay.idx[j]) * g.w + ax.idx[i];
          if (K == 3) {
            tb->w[b][slot] = ax.w[i] * ay.w[j] * az.w[l];
          } else {
            tb->w[b][slot] = ax.w[i] * ay.w[j];
          }
          if (need_grad) {
            if (K == 3) {
              tb->gw[b][0][slot] = ax.dw[i] * ay.w[j] * az.w[l];
              tb->gw[b][1][slot] = ax.w[i] * ay.dw[j] * az.w[l];
              tb->gw[b][K - 1][slot] = ax.w[i] * ay.w[j] * az.dw[l];
            } else {
              tb->gw[b][0][slot] = ax.dw[i] * ay.w[j];
              tb->gw[b][1][slot] = ax.w[i] * ay.dw[j];
            }
          }
          n += valid ? 1 : 0;
        }
      }
    }
    tb->ntaps[b] = n;
    if (n == kTaps) {
      tb->full[n_full++] = static_cast<int>(b);
    } else {
      tb->part[n_part++] = static_cast<int>(b);
    }
    if (need_grad) {
      tb->dmult[b][0] = ax.dmult;
      tb->dmult[b][1] = ay.dmult;
      if (K == 3) tb->dmult[b][K - 1] = az.dmult;
    }
  }
  tb->n_full = n_full;
  tb->n_part = n_part;
}

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Points per parallel chunk: about `target` units of work (taps x channels)
// per chunk, a multiple of the block size. Depends on shapes only.
inline int64_t PointsPerChunk(int64_t points, int64_t channels, int taps, int block,
                              int64_t target = 65536) {
  const int64_t per_point = std::max<int64_t>(1, channels) * taps;
  int64_t pts = CeilDiv(std::max<int64_t>(1, target / per_point), block) * block;
  const int64_t all = CeilDiv(std::max<int64_t>(points, 1), block) * block;
  return std::min(pts, all);
}

// The one dispatch point: dtype x spatial rank x interpolation x layout.
// `f` is called as f(Fmt{}, integral_constant<int, K>, integral_constant<int,
// Interp>, integral_constant<bool, ChannelsLast>) and returns ffi::Error.
template <typename Fmt, int K, typename F>
ffi::Error DispatchModes(int64_t interpolation, bool channels_last, F&& f) {
  auto with_layout = [&](auto interp) -> ffi::Error {
    if (channels_last) return f(Fmt{}, std::integral_constant<int, K>{}, interp,
                                std::true_type{});
    return f(Fmt{}, std::integral_constant<int, K>{}, interp, std::false_type{});
  };
  switch (interpolation) {
    case gs::kBilinear: return with_layout(std::integral_constant<int, gs::kBilinear>{});
    case gs::kNearest: return with_layout(std::integral_constant<int, gs::kNearest>{});
    case gs::kBicubic: return with_layout(std::integral_constant<int, gs::kBicubic>{});
    default: return InvalidArgument("attribute interpolation out of range");
  }
}

template <typename Fmt, typename F>
ffi::Error DispatchRank(int k, int64_t interpolation, bool channels_last, F&& f) {
  if (k == 2) return DispatchModes<Fmt, 2>(interpolation, channels_last, f);
  if (k == 3) return DispatchModes<Fmt, 3>(interpolation, channels_last, f);
  return InvalidArgument("spatial rank must be 2 or 3");
}

template <typename F>
ffi::Error Dispatch(ffi::DataType dt, int k, int64_t interpolation, bool channels_last, F&& f) {
  switch (dt) {
    case ffi::DataType::F16: return DispatchRank<gs::F16Format>(k, interpolation, channels_last, f);
    case ffi::DataType::BF16:
      return DispatchRank<gs::BF16Format>(k, interpolation, channels_last, f);
    case ffi::DataType::F32: return DispatchRank<gs::F32Format>(k, interpolation, channels_last, f);
    case ffi::DataType::F64: return DispatchRank<gs::F64Format>(k, interpolation, channels_last, f);
    default: return InvalidArgument("unsupported dtype");
  }
}

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_GRID_SAMPLE_CPU_H_
