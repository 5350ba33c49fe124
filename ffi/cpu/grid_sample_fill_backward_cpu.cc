// XLA FFI CPU handler: the gradients of "constant" padding's fill term
// (docs/semantics.md, "The fill value"; jax_gridsample/_fill.py), in one pass
// over grad_output: per point, the fill value's weight 1 - W and W's
// derivatives from the shared per-axis math, then
//   fill_grad[c]   = sum over the batch and the points of grad_output[c] (1 - W),
//   grid_grad[.a]  = -(sum_c fill[c] grad_output[c]) dW/dc_a.
// The "zeros" gradients are the backward target's; XLA adds grid_grad to its.
//
// Work is split over (batch element, chunk of points); each task writes its
// points' grid gradients and a row of per-channel partial sums, which are
// added in task order afterwards: the same bits on any number of threads.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "../common/ffi_contract.h"
#include "../common/handler_exceptions.h"
#include "grid_sample_cpu.h"
#include "half_precision.h"
#include "parallel.h"
#include "xla/ffi/api/ffi.h"

namespace gs_cpu {
namespace {

// Points per task: a multiple of the block, a fixed function of the shapes.
constexpr int64_t kFillChunk = 4096;
constexpr int64_t kFillBlock = 256;

// One fill axis of `cnt` points (coordinate stride K): the sum of its inside
// taps' weights, and of their derivatives times the chain factor. Its taps
// are those of "zeros" (padding and align_corners constants here, so that the
// loop vectorizes across points; I as in TapIndex).
template <typename T, int K, int kInterp, bool kAlign, typename I>
GS_CPU_INLINE void AxisSums(const T* coord, int64_t cnt, int64_t size, T* sum, T* dsum) {
  constexpr int kT1 = gs::TapsPerAxis(kInterp);
  for (int64_t b = 0; b < cnt; ++b) {
    gs::AxisTaps<T, kT1, I> t;
    gs::ComputeAxisTaps<kInterp, T, I>(coord[b * K], size, gs::kZeros, kAlign, &t);
    T s = T(0), ds = T(0);
    for (int i = 0; i < kT1; ++i) {
      s = gs::AddInsideWeight(s, t.idx[i], t.w[i]);
      ds = gs::AddInsideWeight(ds, t.idx[i], t.dw[i]);
    }
    sum[b] = s;
    dsum[b] = ds * t.dmult;
  }
}

// Task (n, chunk) of the pass for one block of points at a time.
template <typename T, int K, int kInterp>
GS_CPU_INLINE void FillTask(const Geometry& g, const T* grad_output, const T* grid,
                            const T* fill, int64_t n, int64_t p_begin, int64_t p_end,
                            T* grid_grad, T* partial) {
  const int64_t sizes[3] = {g.w, g.h, g.d};
  T outside[kFillBlock], weighted[kFillBlock], dw[K][kFillBlock];
  T sum[K][kFillBlock], dsum[K][kFillBlock];
  if (partial != nullptr) std::fill(partial, partial + g.c, T(0));
  for (int64_t p0 = p_begin; p0 < p_end; p0 += kFillBlock) {
    const int64_t cnt = std::min(kFillBlock, p_end - p0);
    const T* coords = grid + (n * g.points + p0) * K;
    // W and its derivatives, x first: a fill axis contributes its sums, another 1 and 0.
    for (int a = 0; a < K; ++a) {
      if (!gs::ReadsFill(g.axis_padding[a])) {
        std::fill(sum[a], sum[a] + cnt, T(1));
        std::fill(dsum[a], dsum[a] + cnt, T(0));
      } else if (sizes[a] <= std::numeric_limits<int32_t>::max()) {
        if (g.align_corners) {
          AxisSums<T, K, kInterp, true, int32_t>(coords + a, cnt, sizes[a], sum[a], dsum[a]);
        } else {
          AxisSums<T, K, kInterp, false, int32_t>(coords + a, cnt, sizes[a], sum[a], dsum[a]);
        }
      } else if (g.align_corners) {
        AxisSums<T, K, kInterp, true, int64_t>(coords + a, cnt, sizes[a], sum[a], dsum[a]);
      } else {
        AxisSums<T, K, kInterp, false, int64_t>(coords + a, cnt, sizes[a], sum[a], dsum[a]);
      }
    }
    for (int64_t b = 0; b < cnt; ++b) {
      T inside = T(1);
      for (int a = 0; a < K; ++a) inside = inside * sum[a][b];
      outside[b] = T(1) - inside;
      for (int a = 0; a < K; ++a) {
        T others = T(1);
        for (int o = 0; o < K; ++o) others = o == a ? others : others * sum[o][b];
        dw[a][b] = others * dsum[a][b];
      }
      weighted[b] = T(0);
    }
    // One pass over the block's grad_output.
    if (!g.channels_last) {
      for (int64_t c = 0; c < g.c; ++c) {
        const T* go = grad_output + (n * g.c + c) * g.points + p0;
        const T f = fill[c];
        for (int64_t b = 0; b < cnt; ++b) weighted[b] = weighted[b] + f * go[b];
        if (partial == nullptr) continue;
        // kLanes independent sums (point b adds to sum b % kLanes), added in a fixed
        // order: a loop the compiler vectorizes, where one running sum would not.
        constexpr int kLanes = 8;
        T lanes[kLanes] = {};
        int64_t b = 0;
        for (; b + kLanes <= cnt; b += kLanes) {
          for (int j = 0; j < kLanes; ++j) lanes[j] = lanes[j] + go[b + j] * outside[b + j];
        }
        for (; b < cnt; ++b) lanes[b % kLanes] = lanes[b % kLanes] + go[b] * outside[b];
        T acc = T(0);
        for (int j = 0; j < kLanes; ++j) acc = acc + lanes[j];
        partial[c] = partial[c] + acc;
      }
    } else {
      for (int64_t b = 0; b < cnt; ++b) {
        const T* go = grad_output + (n * g.points + p0 + b) * g.c;
        T s = T(0);
        for (int64_t c = 0; c < g.c; ++c) {
          s = s + fill[c] * go[c];
          if (partial != nullptr) partial[c] = partial[c] + go[c] * outside[b];
        }
        weighted[b] = s;
      }
    }
    if (grid_grad != nullptr) {
      for (int64_t b = 0; b < cnt; ++b) {
        for (int a = 0; a < K; ++a) {
          grid_grad[(n * g.points + p0 + b) * K + a] = -weighted[b] * dw[a][b];
        }
      }
    }
  }
}

#if GS_CPU_HAVE_AVX2_PATH
// The same source compiled for AVX2 + FMA (float32, where the CPU has them):
// the per-point loops vectorize 8 wide. Contraction is off: the same bits.
template <typename T, int K, int kInterp>
__attribute__((target("avx2,fma"))) void FillTaskAvx2(const Geometry& g, const T* grad_output,
                                                      const T* grid, const T* fill, int64_t n,
                                                      int64_t p_begin, int64_t p_end,
                                                      T* grid_grad, T* partial) {
  FillTask<T, K, kInterp>(g, grad_output, grid, fill, n, p_begin, p_end, grid_grad, partial);
}
#endif

// Task (n, chunk), the AVX2 build where it runs.
template <typename T, int K, int kInterp>
void RunFillTask(const Geometry& g, const T* grad_output, const T* grid, const T* fill, int64_t n,
                 int64_t p_begin, int64_t p_end, T* grid_grad, T* partial) {
#if GS_CPU_HAVE_AVX2_PATH
  if (std::is_same_v<T, float> && HasAvx2Fma()) {
    return FillTaskAvx2<T, K, kInterp>(g, grad_output, grid, fill, n, p_begin, p_end, grid_grad,
                                       partial);
  }
#endif
  FillTask<T, K, kInterp>(g, grad_output, grid, fill, n, p_begin, p_end, grid_grad, partial);
}

// The pass in compute type T; grid_grad and fill_grad may be nullptr (not
// asked for).
template <typename T>
void FillBackwardTyped(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                       const T* grad_output, const T* grid, const T* fill, T* grid_grad,
                       T* fill_grad) {
  if (fill_grad != nullptr) std::fill(fill_grad, fill_grad + g.c, T(0));
  if (g.n == 0 || g.points == 0) return;
  const int64_t chunks_per_n = CeilDiv(g.points, kFillChunk);
  const int64_t tasks = g.n * chunks_per_n;
  std::unique_ptr<T[]> partials;
  if (fill_grad != nullptr) partials = NewArray<T>("fill-gradient partial sums", tasks * g.c);
  DispatchKernel(g.k, interpolation, [&](auto k, auto interp) {
    constexpr int K = decltype(k)::value;
    ParallelFor(pool, tasks, [&](int64_t task) {
      const int64_t n = task / chunks_per_n, p_begin = (task % chunks_per_n) * kFillChunk;
      RunFillTask<T, K, decltype(interp)::value>(
          g, grad_output, grid, fill, n, p_begin, std::min(g.points, p_begin + kFillChunk),
          grid_grad, partials ? partials.get() + task * g.c : nullptr);
    });
  });
  if (fill_grad == nullptr) return;
  for (int64_t task = 0; task < tasks; ++task) {  // in task order
    for (int64_t c = 0; c < g.c; ++c) fill_grad[c] = fill_grad[c] + partials[task * g.c + c];
  }
}

// Half precision (format H): the float32 pass on widened copies.
template <typename H>
void FillBackwardHalf(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                      const ffi::AnyBuffer& grad_output, const ffi::AnyBuffer& grid,
                      const void* fill, void* grid_grad, void* fill_grad) {
  auto wide_go = Widen<H>(pool, "float32 grad_output", grad_output.untyped_data(),
                          grad_output.element_count());
  auto wide_grid = Widen<H>(pool, "float32 grid", grid.untyped_data(), grid.element_count());
  auto wide_fill = Widen<H>(pool, "float32 fill", fill, g.c);
  auto wide_gg = grid_grad != nullptr
                     ? NewArray<float>("float32 grid gradient", grid.element_count())
                     : nullptr;
  auto wide_fg = fill_grad != nullptr ? NewArray<float>("float32 fill gradient", g.c) : nullptr;
  FillBackwardTyped<float>(pool, g, interpolation, wide_go.get(), wide_grid.get(),
                           wide_fill.get(), wide_gg.get(), wide_fg.get());
  if (wide_gg) Narrow<H>(pool, wide_gg.get(), grid_grad, grid.element_count());
  if (wide_fg) Narrow<H>(pool, wide_fg.get(), fill_grad, g.c);
}

// `spatial`: the input's spatial sizes (D, H, W or H, W): the target takes no
// input buffer, so that a sharded input need not be gathered for its shape.
ffi::Error FillBackwardImpl(ffi::ThreadPool pool, ffi::AnyBuffer grad_output, ffi::AnyBuffer grid,
                            ffi::AnyBuffer fill, ffi::RemainingRets results,
                            int64_t interpolation, ffi::Span<const int64_t> padding,
                            bool align_corners, bool channels_last,
                            ffi::Span<const int64_t> spatial, bool grid_mask, bool fill_mask) {
  const ffi::DataType dt = grid.element_type();
  const auto gd = grid.dimensions();
  const auto od = grad_output.dimensions();
  const int k = static_cast<int>(gd.size()) - 2;
  if ((k != 2 && k != 3) || spatial.size() != static_cast<size_t>(k) || od.size() != gd.size()) {
    return InvalidArgument("grid " + gs_ffi::DimsToString(gd) + ", grad_output " +
                           gs_ffi::DimsToString(od) + " and attribute spatial (" +
                           std::to_string(spatial.size()) +
                           " sizes) must all be of one spatial rank, 2 or 3");
  }
  // The input's shape, for MakeGeometry's checks: (N, C, *spatial) or channels last.
  int64_t id[5];
  const int64_t c = channels_last ? od[od.size() - 1] : od[1];
  size_t r = 0;
  id[r++] = gd[0];
  if (!channels_last) id[r++] = c;
  for (int a = 0; a < k; ++a) id[r++] = spatial[a];
  if (channels_last) id[r++] = c;
  Geometry g;
  if (ffi::Error err = gs_ffi::MakeGeometryOf(
          kPlatform, dt, ffi::Span<const int64_t>(id, r), grid, "grad_output", grad_output,
          interpolation, padding, align_corners, channels_last, &g, &fill);
      !err.success()) {
    return err;
  }
  if (g.fill == nullptr) {
    return InvalidArgument("attribute padding has no 3 (constant): there is no fill value");
  }
  const size_t expected = (grid_mask ? 1 : 0) + (fill_mask ? 1 : 0);
  if (results.size() != expected) {
    return InvalidArgument("expected " + std::to_string(expected) + " result(s) for grid_mask=" +
                           (grid_mask ? "true" : "false") + " and fill_mask=" +
                           (fill_mask ? "true" : "false") + ", got " +
                           std::to_string(results.size()));
  }
  void* outs[2] = {nullptr, nullptr};
  size_t next = 0;
  for (int i = 0; i < 2; ++i) {
    if (!(i == 0 ? grid_mask : fill_mask)) continue;
    const char* name = i == 0 ? "grad_grid" : "grad_fill";
    auto res = results.get<ffi::AnyBuffer>(next++);
    if (res.has_error()) return InvalidArgument(std::string(name) + " could not be decoded");
    ffi::AnyBuffer buf = **res;
    if (ffi::Error err = gs_ffi::CheckShape(kPlatform, name, buf, dt,
                                            i == 0 ? gd.begin() : &g.c, i == 0 ? gd.size() : 1);
        !err.success()) {
      return err;
    }
    outs[i] = buf.untyped_data();
  }
  switch (dt) {
    case ffi::DataType::F16:
      FillBackwardHalf<gs::F16Format>(pool, g, interpolation, grad_output, grid, g.fill, outs[0],
                                      outs[1]);
      break;
    case ffi::DataType::BF16:
      FillBackwardHalf<gs::BF16Format>(pool, g, interpolation, grad_output, grid, g.fill,
                                       outs[0], outs[1]);
      break;
    case ffi::DataType::F32:
      FillBackwardTyped<float>(pool, g, interpolation, grad_output.typed_data<float>(),
                               grid.typed_data<float>(), static_cast<const float*>(g.fill),
                               static_cast<float*>(outs[0]), static_cast<float*>(outs[1]));
      break;
    default:
      FillBackwardTyped<double>(pool, g, interpolation, grad_output.typed_data<double>(),
                                grid.typed_data<double>(), static_cast<const double*>(g.fill),
                                static_cast<double*>(outs[0]), static_cast<double*>(outs[1]));
  }
  return ffi::Error::Success();
}

}  // namespace
}  // namespace gs_cpu

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleFillBackwardCpu,
    (gs_ffi::NoExceptions<gs_cpu::kPlatform, gs_cpu::FillBackwardImpl>::Call),
    gs_ffi::BindFillBackward(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
