// The operands and attributes of the two FFI targets, bound once for every
// platform. A handler adds its platform contexts first and its extra
// attributes last:
//
//   BindForward(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())
//
// so its implementation takes (contexts..., input, grid, output,
// interpolation, padding, align_corners, channels_last, extras...) and the
// backward (contexts..., grad_output, input, grid, results, interpolation,
// padding, align_corners, channels_last, input_mask, grid_mask, extras...).
// The attribute names are those the Python lowerings pass.
//
// Version 1 (jax_gridsample_{forward,backward}_v1 and the Ascend targets) takes
// `padding` as one int64 for every axis; version 2 (the CPU and CUDA
// jax_gridsample_{forward,backward}_v2) as an int64 array, one code per grid
// component, x first (the Padding template argument below), and its forward a
// fill operand after the grid, for "constant" padding. Version 3 of the CPU
// backward (jax_gridsample_backward_v3) takes the fill value too and returns
// its gradient. Nothing else differs; jax_gridsample/_contract.py lists every
// name. Serialized jax.export
// artifacts call both, so both are frozen: do not change these bindings or what
// they mean. A change is a new version beside them, with its own target names;
// _contract.py says how to add one.
#ifndef JAX_GRIDSAMPLE_FFI_COMMON_FFI_CONTRACT_H_
#define JAX_GRIDSAMPLE_FFI_COMMON_FFI_CONTRACT_H_

#include <cstdint>
#include <type_traits>
#include <utility>

#include "xla/ffi/api/ffi.h"

namespace gs_ffi {

// The `padding` attribute of version 1 (one code for every axis) and of
// version 2 (one per grid component, x first).
using PaddingV1 = int64_t;
using PaddingV2 = xla::ffi::Span<const int64_t>;

// The sampling attributes that both targets take, in order.
template <typename Padding = PaddingV1, typename Binding>
auto BindSamplingAttrs(Binding&& binding) {
  return std::forward<Binding>(binding)
      .template Attr<int64_t>("interpolation")
      .template Attr<Padding>("padding")
      .template Attr<bool>("align_corners")
      .template Attr<bool>("channels_last");
}

// Version 2's forward takes a third operand, the fill value of "constant"
// padding: C values of the input's dtype with a "constant" axis; without one
// it is not read (any shape: the lowering passes an empty array).
template <typename Padding = PaddingV1, typename Binding>
auto BindForward(Binding&& binding) {
  namespace ffi = xla::ffi;
  auto operands = std::forward<Binding>(binding)
                      .template Arg<ffi::AnyBuffer>()   // input
                      .template Arg<ffi::AnyBuffer>();  // grid
  if constexpr (std::is_same_v<Padding, PaddingV2>) {
    return BindSamplingAttrs<Padding>(std::move(operands)
                                          .template Arg<ffi::AnyBuffer>()    // fill
                                          .template Ret<ffi::AnyBuffer>());  // output
  } else {
    return BindSamplingAttrs<Padding>(std::move(operands).template Ret<ffi::AnyBuffer>());
  }
}

template <typename Padding = PaddingV1, typename Binding>
auto BindBackward(Binding&& binding) {
  namespace ffi = xla::ffi;
  return BindSamplingAttrs<Padding>(std::forward<Binding>(binding)
                               .template Arg<ffi::AnyBuffer>()  // grad_output
                               .template Arg<ffi::AnyBuffer>()  // input
                               .template Arg<ffi::AnyBuffer>()  // grid
                               .RemainingRets())                // grad_input?, grad_grid?
      .template Attr<bool>("input_mask")
      .template Attr<bool>("grid_mask");
}

// Version 3 of the CPU backward (jax_gridsample_backward_v3): version 2's
// with a fourth operand, the fill value of "constant" padding (C values of
// the input's dtype with a "constant" axis; without one it is not read, and
// the lowering passes an empty array), the code 3 ("constant") in `padding`,
// and a third result, the fill value's gradient (C values), where
// `fill_mask` asks. The gradients of a "constant" call in one call, so that
// grad_output is read once and no second kernel runs beside the first.
template <typename Binding>
auto BindBackwardV3(Binding&& binding) {
  namespace ffi = xla::ffi;
  return BindSamplingAttrs<PaddingV2>(std::forward<Binding>(binding)
                                          .template Arg<ffi::AnyBuffer>()  // grad_output
                                          .template Arg<ffi::AnyBuffer>()  // input
                                          .template Arg<ffi::AnyBuffer>()  // grid
                                          .template Arg<ffi::AnyBuffer>()  // fill
                                          .RemainingRets())  // grad_input?, grad_grid?, grad_fill?
      .template Attr<bool>("input_mask")
      .template Attr<bool>("grid_mask")
      .template Attr<bool>("fill_mask");
}

// Version 2's fill backward (CPU only: jax_gridsample_fill_backward_v2): the
// gradients of "constant" padding's fill term. Operands grad_output, grid and
// the fill value; results grad_grid (that term's part) and grad_fill, each
// only where grid_mask / fill_mask asks; the sampling attributes, with at
// least one "constant" axis, and `spatial`, the input's spatial sizes (the
// target takes no input buffer).
template <typename Binding>
auto BindFillBackward(Binding&& binding) {
  namespace ffi = xla::ffi;
  return BindSamplingAttrs<PaddingV2>(std::forward<Binding>(binding)
                                          .template Arg<ffi::AnyBuffer>()  // grad_output
                                          .template Arg<ffi::AnyBuffer>()  // grid
                                          .template Arg<ffi::AnyBuffer>()  // fill
                                          .RemainingRets())                // grad_grid?, grad_fill?
      .template Attr<ffi::Span<const int64_t>>("spatial")
      .template Attr<bool>("grid_mask")
      .template Attr<bool>("fill_mask");
}

}  // namespace gs_ffi

#endif  // JAX_GRIDSAMPLE_FFI_COMMON_FFI_CONTRACT_H_
