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

// The pass's work: chunks of kFillChunk points of one batch element, each in
// sub-blocks of kFillBlock points, whose per-channel sums are added to the
// chunk's row of partial sums in point order; the rows are added in (batch
// element, chunk) order (AddFillPartials). The same bits on any number of
// threads, and where the backward kernel runs the chunks itself.
constexpr int64_t kFillChunk = 4096;
constexpr int64_t kFillBlock = 256;

// The pass in compute type T (float or double) for the call `g` (its fill
// axes: g.axis_padding); grid_grad and fill_grad may be nullptr (not asked
// for). grid_grad is set to the term's part, or with add_to_grid that part is
// added to what it holds (the "zeros" grid gradient).
template <typename T>
void FillGradients(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                   const T* grad_output, const T* grid, const T* fill, T* grid_grad,
                   bool add_to_grid, T* fill_grad);

// Points [p_begin, p_end) of batch element n alone: a chunk, or a run of its
// sub-blocks from a multiple of kFillBlock (the backward kernel's blocks, so
// that grad_output is read while in the cache). grid_grad as above; the
// points' sums are added to `partial`, their chunk's row (C values, zeroed by
// the caller; nullptr: not wanted).
template <typename T>
void FillGradientsOfPoints(const Geometry& g, int64_t interpolation, const T* grad_output,
                           const T* grid, const T* fill, int64_t n, int64_t p_begin,
                           int64_t p_end, T* grid_grad, bool add_to_grid, T* partial);

// fill_grad (C values) from the rows of partial sums of every (batch
// element, chunk), added in that order.
template <typename T>
void AddFillPartials(const Geometry& g, const T* partials, T* fill_grad);

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_FILL_GRADIENTS_H_
