// nanobind module jax_gridsample._cuda_kernels: exposes the CUDA FFI handlers.
#include <cuda_runtime.h>
#include <nanobind/nanobind.h>

#include "../common/ffi_registrations.h"
#include "xla/ffi/api/c_api.h"

extern "C" {
XLA_FFI_Error* GridSampleForwardCuda(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* GridSampleBackwardCuda(XLA_FFI_CallFrame* call_frame);
}

namespace nb = nanobind;

NB_MODULE(_cuda_kernels, m) {
  m.doc() = "Native CUDA XLA FFI handlers of jax_gridsample.";
  m.def(
      "registrations",
      []() {
        return gs::FfiRegistrations({{"jax_gridsample_forward", GridSampleForwardCuda},
                                     {"jax_gridsample_backward", GridSampleBackwardCuda}});
      },
      "Returns {ffi_target_name: PyCapsule of the XLA FFI handler}.");
  m.def(
      "device_count",
      []() {
        int count = 0;
        if (cudaGetDeviceCount(&count) != cudaSuccess) {
          cudaGetLastError();  // clear the sticky-free error state
          return 0;
        }
        return count;
      },
      "Number of CUDA devices the CUDA runtime sees (0 without a driver or device).");
  m.def(
      "cuda_runtime_version",
      []() {
        int v = 0;
        cudaRuntimeGetVersion(&v);
        return v;
      },
      "CUDA runtime version the module was built with (e.g. 13000).");
}
