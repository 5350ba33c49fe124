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
// This is version 1 of the targets' contract (jax_gridsample_{forward,backward}_v1
// and the Ascend ones; jax_gridsample/_contract.py lists every name). Serialized
// jax.export artifacts call it, so it is frozen: do not change these bindings or
// what they mean. A change is a new version beside this one, with its own target
// names; _contract.py says how to add one.
#ifndef JAX_GRIDSAMPLE_FFI_COMMON_FFI_CONTRACT_H_
#define JAX_GRIDSAMPLE_FFI_COMMON_FFI_CONTRACT_H_

#include <cstdint>
#include <utility>

#include "xla/ffi/api/ffi.h"

namespace gs_ffi {

// The sampling attributes that both targets take, in order.
template <typename Binding>
auto BindSamplingAttrs(Binding&& binding) {
  return std::forward<Binding>(binding)
      .template Attr<int64_t>("interpolation")
      .template Attr<int64_t>("padding")
      .template Attr<bool>("align_corners")
      .template Attr<bool>("channels_last");
}

template <typename Binding>
auto BindForward(Binding&& binding) {
  namespace ffi = xla::ffi;
  return BindSamplingAttrs(std::forward<Binding>(binding)
                               .template Arg<ffi::AnyBuffer>()    // input
                               .template Arg<ffi::AnyBuffer>()    // grid
                               .template Ret<ffi::AnyBuffer>());  // output
}

template <typename Binding>
auto BindBackward(Binding&& binding) {
  namespace ffi = xla::ffi;
  return BindSamplingAttrs(std::forward<Binding>(binding)
                               .template Arg<ffi::AnyBuffer>()  // grad_output
                               .template Arg<ffi::AnyBuffer>()  // input
                               .template Arg<ffi::AnyBuffer>()  // grid
                               .RemainingRets())                // grad_input?, grad_grid?
      .template Attr<bool>("input_mask")
      .template Attr<bool>("grid_mask");
}

}  // namespace gs_ffi

#endif  // JAX_GRIDSAMPLE_FFI_COMMON_FFI_CONTRACT_H_
