// XLA FFI CPU handler of version 2's fill backward
// (jax_gridsample_fill_backward_v2): the gradients of "constant" padding's
// fill term alone (fill_gradients.h), beside version 2's backward, which
// computes the "zeros" gradients. Lowerings now call version 3's backward,
// which does both; artifacts exported with version 2 call this one.
#include <cstdint>
#include <string>

#include "../common/ffi_contract.h"
#include "../common/handler_exceptions.h"
#include "fill_gradients.h"
#include "grid_sample_cpu.h"
#include "half_precision.h"
#include "xla/ffi/api/ffi.h"

namespace gs_cpu {
namespace {

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
  FillGradients<float>(pool, g, interpolation, wide_go.get(), wide_grid.get(), wide_fill.get(),
                       wide_gg.get(), /*add_to_grid=*/false, wide_fg.get());
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
      FillGradients<float>(pool, g, interpolation, grad_output.typed_data<float>(),
                           grid.typed_data<float>(), static_cast<const float*>(g.fill),
                           static_cast<float*>(outs[0]), false, static_cast<float*>(outs[1]));
      break;
    default:
      FillGradients<double>(pool, g, interpolation, grad_output.typed_data<double>(),
                            grid.typed_data<double>(), static_cast<const double*>(g.fill),
                            static_cast<double*>(outs[0]), false, static_cast<double*>(outs[1]));
  }
  return ffi::Error::Success();
}

}  // namespace
}  // namespace gs_cpu

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    GridSampleFillBackwardCpu,
    (gs_ffi::NoExceptions<gs_cpu::kPlatform, gs_cpu::FillBackwardImpl>::Call),
    gs_ffi::BindFillBackward(xla::ffi::Ffi::Bind().Ctx<xla::ffi::ThreadPool>()));
