// nanobind module jax_gridsample._cpu_kernels: exposes the CPU FFI handlers.
#include <nanobind/nanobind.h>

#include "xla/ffi/api/c_api.h"

extern "C" {
XLA_FFI_Error* GridSampleForwardCpu(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* GridSampleBackwardCpu(XLA_FFI_CallFrame* call_frame);
}

namespace nb = nanobind;

namespace {

template <typename Fn>
nb::capsule Capsule(Fn* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}

}  // namespace

NB_MODULE(_cpu_kernels, m) {
  m.doc() = "Native CPU XLA FFI handlers of jax_gridsample.";
  m.def(
      "registrations",
      []() {
        nb::dict d;
        d["jax_gridsample_forward"] = Capsule(GridSampleForwardCpu);
        d["jax_gridsample_backward"] = Capsule(GridSampleBackwardCpu);
        return d;
      },
      "Returns {ffi_target_name: PyCapsule of the XLA FFI handler}.");
}
