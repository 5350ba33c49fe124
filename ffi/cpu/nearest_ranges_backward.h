// The CPU backward's grad_input for nearest float32 in vector code (vec8.h;
// implementation in nearest_ranges_backward.cc): backward tasks that
// own a range of plane elements (the whole plane, or one of a few ranges
// when 8 channels of the plane would not fit the staging copy, or to make
// enough tasks) for a block of channels, and read all their batch
// element's points.
//
// Why: a nearest point adds its grad_output value to one input element per
// channel. Channels first, those elements lie a plane apart, so the generic
// block (GenericBlock) does one scalar load-add-store per
// point and channel, into planes that do not all fit in L1: most of a 2D
// nearest forward-plus-backward. This task sums into a staging copy of its
// range, per group of 8 channels a range of 8-float vectors (in passes of
// channels that keep the copy within kNearestStagingBytes), so that a
// point's 8 channels are one vector add, and transposes the copy into
// grad_input at the end of each pass. Each range's task reads all the
// points' grad_output and adds those whose tap lies in its range (the
// others into spare vectors, rather than past a branch per point, which,
// taken at random, would cost about what the task saves), so only a few
// ranges pay (see PlanNearestRanges).
//
// Each element gets the same values as from the generic block, added in
// the same order (point order), so grad_input is bitwise the generic
// block's: a nearest tap's weight is 1, and v + g * 1 is v + g.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_NEAREST_RANGES_BACKWARD_H_
#define JAX_GRIDSAMPLE_FFI_CPU_NEAREST_RANGES_BACKWARD_H_

#include <cstdint>

#include "grid_sample_cpu.h"

namespace gs_cpu {

// The largest staging copy a task keeps (8 channels interleaved): a core's
// L2 should hold it beside the grad_output rows it reads.
inline constexpr int64_t kNearestStagingBytes = int64_t{512} << 10;

// The fewest element ranges of a plane whose 8 channels each fit
// kNearestStagingBytes, or 0 when the tasks cannot run (no AVX2 + FMA, or
// plane offsets beyond int32).
int64_t NearestStagingRanges(const Geometry& g);

// First element of range r of `ranges` over a plane of `plane` elements
// (r == ranges: the end): a multiple of 16, so that a row that starts
// 64-byte aligned is written in whole lines.
inline int64_t NearestRangeStart(int64_t r, int64_t ranges, int64_t plane) {
  return r == ranges ? plane : r * plane / ranges / 16 * 16;
}

// Elements [s_begin, s_end) of the planes of channels [c_begin, c_end) of
// batch element n (channels first), from all its points: writes that part
// of grad_input. offsets: the points' tap offsets from
// NearestTapOffsetsF32 (element n * points on), or nullptr to compute
// them in the task.
struct NearestBackwardTask {
  int64_t n, c_begin, c_end, s_begin, s_end;
  const float* grid;
  const int32_t* offsets;
  const float* grad_out;
  float* grad_input;
};
template <int K>
void NearestRangesTaskF32(const Geometry& g, const NearestBackwardTask& task);

// The plane element of the tap of points [p_begin, p_end) of batch element
// n, -1 out of range, into offsets[n * points + p]: computed once for all
// the tasks of a batch element where it has several.
template <int K>
void NearestTapOffsetsF32(const Geometry& g, const float* grid, int64_t n, int64_t p_begin,
                          int64_t p_end, int32_t* offsets);
}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_NEAREST_RANGES_BACKWARD_H_
