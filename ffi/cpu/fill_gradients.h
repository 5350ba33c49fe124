// The gradients of "constant" padding's fill term (docs/semantics.md, "The
// fill value"), in one pass over grad_output (implementation in
// fill_gradients.cc): per point, the fill value's weight 1 - W and W's
// derivatives from the shared per-axis math, then
//   fill_grad[c]   = sum over the batch and the points of grad_output[c] (1 - W),
//   grid_grad[.a]  = -(sum_c fill[c] grad_output[c]) dW/dc_a.
// The "zeros" gradients are the backward kernels'; version 3's backward
// target runs this pass after them, version 2's fill backward target alone.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_FILL_GRADIENTS_H_
#define JAX_GRIDSAMPLE_FFI_CPU_FILL_GRADIENTS_H_

#include <cstdint>

#include "grid_sample_cpu.h"
#include "xla/ffi/api/ffi.h"

namespace gs_cpu {

// The pass in compute type T (float or double) for the call `g` (its fill
// axes: g.axis_padding); grid_grad and fill_grad may be nullptr (not asked
// for). grid_grad is set to the term's part, or with add_to_grid that part is
// added to what it holds (the "zeros" grid gradient).
template <typename T>
void FillGradients(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                   const T* grad_output, const T* grid, const T* fill, T* grid_grad,
                   bool add_to_grid, T* fill_grad);

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_FILL_GRADIENTS_H_
