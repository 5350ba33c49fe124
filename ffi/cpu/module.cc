// nanobind module jax_gridsample._cpu_kernels: exposes the CPU FFI handlers.
#include <nanobind/nanobind.h>

#include "../common/ffi_registrations.h"
#include "grid_sample_cpu.h"
#include "xla/ffi/api/c_api.h"

extern "C" {
XLA_FFI_Error* GridSampleForwardCpu(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* GridSampleBackwardCpu(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* GridSampleBackwardCpuV3(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* GridSampleForwardCpuV1(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* GridSampleBackwardCpuV1(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* GridSampleFillBackwardCpu(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* GridSampleForwardCpuWithStrategy(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* GridSampleBackwardCpuWithStrategy(XLA_FFI_CallFrame* call_frame);
}

namespace nb = nanobind;

NB_MODULE(_cpu_kernels, m) {
  m.doc() = "Native CPU XLA FFI handlers of jax_gridsample.";
  m.def(
      "registrations",
      []() {
        // The *_with_strategy targets force a strategy (strategies.h): for tests.
        return gs::FfiRegistrations(
            {{"jax_gridsample_forward_v2", GridSampleForwardCpu},
             {"jax_gridsample_backward_v3", GridSampleBackwardCpuV3},
             {"jax_gridsample_backward_v2", GridSampleBackwardCpu},
             {"jax_gridsample_forward_v1", GridSampleForwardCpuV1},
             {"jax_gridsample_backward_v1", GridSampleBackwardCpuV1},
             {"jax_gridsample_fill_backward_v2", GridSampleFillBackwardCpu},
             {"jax_gridsample_forward_with_strategy", GridSampleForwardCpuWithStrategy},
             {"jax_gridsample_backward_with_strategy", GridSampleBackwardCpuWithStrategy}});
      },
      "Returns {ffi_target_name: PyCapsule of the XLA FFI handler}.");
  m.def(
      "instruction_set", []() { return gs_cpu::KernelInstructionSet(); },
      "The widest instruction set the float32 kernels use here: avx2 or baseline.");
}
