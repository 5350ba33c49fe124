// The CPU backward's grad_input for nearest float32 with channels first, in
// AVX2 (implementation in nearest_backward_avx2.cc): the backward tasks
// that own whole planes (one band; BackwardKernel plans so when batch
// elements x groups of 8 channels make enough tasks).
//
// Why: a nearest point adds its grad_output value to one input element per
// channel. Channels first, those elements lie a plane apart, so the generic
// block (BackwardKernel's `process`) does one scalar load-add-store per
// point and channel, into planes that do not all fit in L1: most of a 2D
// nearest forward-plus-backward. This task sums into a staging copy of its
// planes, per group of 8 channels a plane of 8-float vectors (in passes of
// channels that keep the copy within kNearestStagingBytes), so that a
// point's 8 channels are one vector add, and transposes the copy into
// grad_input at the end of each pass.
//
// Each element gets the same values as from the generic block, added in
// the same order (point order), so grad_input is bitwise the generic
// block's: a nearest tap's weight is 1, and v + g * 1 is v + g.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_NEAREST_BACKWARD_AVX2_H_
#define JAX_GRIDSAMPLE_FFI_CPU_NEAREST_BACKWARD_AVX2_H_

#include <cstdint>

#include "grid_sample_cpu.h"

namespace gs_cpu {

// The largest channels-last staging copy a task keeps (a core's L2 should
// hold it beside the grad_output rows it reads).
inline constexpr int64_t kNearestStagingBytes = int64_t{512} << 10;

// Whether NearestBackwardTaskAvx2F32 can run: AVX2 + FMA, int32 plane
// offsets, and 8 channels of a plane within kNearestStagingBytes.
bool NearestBackwardStagingFits(const Geometry& g);

// Channels [c_begin, c_end) of batch element n, all its points: writes
// those planes of grad_input whole.
struct NearestBackwardTask {
  int64_t n, c_begin, c_end;
  const float* grid;
  const float* grad_out;
  float* grad_input;
};
template <int K>
void NearestBackwardTaskAvx2F32(const Geometry& g, const NearestBackwardTask& task);

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_NEAREST_BACKWARD_AVX2_H_
