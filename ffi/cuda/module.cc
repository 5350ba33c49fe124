// nanobind module jax_gridsample._cuda_kernels: exposes the CUDA FFI handlers.
#include <cuda_runtime.h>
#include <nanobind/nanobind.h>

#include <cstdint>
#include <stdexcept>

#include "../common/ffi_registrations.h"
#include "backward_workspace.h"
#include "xla/ffi/api/c_api.h"

extern "C" {
XLA_FFI_Error* GridSampleForwardCuda(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* GridSampleBackwardCuda(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* GridSampleForwardCudaV1(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* GridSampleBackwardCudaV1(XLA_FFI_CallFrame* call_frame);
}

namespace nb = nanobind;

NB_MODULE(_cuda_kernels, m) {
  m.doc() = "Native CUDA XLA FFI handlers of jax_gridsample.";
  m.def(
      "registrations",
      []() {
        return gs::FfiRegistrations({{"jax_gridsample_forward_v2", GridSampleForwardCuda},
                                     {"jax_gridsample_backward_v2", GridSampleBackwardCuda},
                                     {"jax_gridsample_forward_v1", GridSampleForwardCudaV1},
                                     {"jax_gridsample_backward_v1", GridSampleBackwardCudaV1}});
      },
      "Returns {ffi_target_name: PyCapsule of the XLA FFI handler}.");
  m.def(
      "backward_workspace_bytes",
      [](int k, int64_t n, int64_t c, int64_t plane, int64_t points, int64_t interpolation,
         int storage_bytes, bool input_mask, bool deterministic) {
        const int64_t bytes = gs_cuda::BackwardWorkspaceBytes(
            k, n, c, plane, points, interpolation, storage_bytes, input_mask, deterministic);
        if (bytes < 0) {
          throw std::runtime_error(
              "could not size the CUDA backward's workspace: arguments out of range, or, with "
              "deterministic=True, cub's sort size query failed (it needs a CUDA device at "
              "lowering time)");
        }
        return bytes;
      },
      nb::arg("k"), nb::arg("n"), nb::arg("c"), nb::arg("plane"), nb::arg("points"),
      nb::arg("interpolation"), nb::arg("storage_bytes"), nb::arg("input_mask"),
      nb::arg("deterministic"),
      "Bytes of the uint8 workspace result the backward target needs for one call.");
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
