// The CPU backward's block of points for 2D bilinear float32 with channels
// first, in the vector kernels' code (vec8.h; implementation in
// bilinear_backward_block.cc). Needs HasVectorKernels() and
// FitsInt32Offsets(g).
//
// Why: with few channels, the generic block (GenericBlock)
// spends about as long building its per-point tap tables (FillTaps: 64-bit
// offsets, weights and weight derivatives of every tap) as using them. This
// block keeps per-axis tables that vectorize and, per point, only the
// offsets of its taps and their weights; the weight derivatives of bilinear
// are +-1, so the grid gradient is folded from the per-axis weights
// directly.
//
// It visits the points as the generic block does (those with every tap in
// range first, then the others by tap count; the same block boundaries,
// kBilinearBackwardBlock points) and sums in its order (per-tap channel
// sums, folded once per point), so both gradients are bitwise the generic
// block's.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_BILINEAR_BACKWARD_BLOCK_H_
#define JAX_GRIDSAMPLE_FFI_CPU_BILINEAR_BACKWARD_BLOCK_H_

#include <cstdint>

#include "grid_sample_cpu.h"

namespace gs_cpu {

inline constexpr int kBilinearBackwardBlock = TapBlock<float, 2, gs::kBilinear>::kBlock;

// Per-block tables (about 180 KiB: allocate one per task).
struct BilinearBackwardTables {
  static constexpr int kB = kBilinearBackwardBlock;
  // Per axis a (0: x, 1: y) and tap i: index (-1 when out of range, or for
  // y outside the band), weight; per axis, the chain factor.
  alignas(32) int32_t idx[2][2][kB];
  alignas(32) float w[2][2][kB];
  alignas(32) float dm[2][kB];
  // Points with all four taps in range (`full`): offsets of their two rows
  // of taps (x0 in rows y0 and y1). The others (`part`, by number of taps in
  // range, 0 to 4: part[part_begin[t] .. part_begin[t + 1]) have t): the
  // offsets of their taps in range, in tap order.
  alignas(32) int32_t row_off[2][kB];
  int32_t part_off[kB][4];
  // Per point, of its taps in range in the order (y0, x0), (y0, x1),
  // (y1, x0), (y1, x1): weights and, for the grid gradient, channel sums.
  alignas(32) float tap_w[kB][4];
  alignas(16) float tap_sum[kB][4];
  int full[kB];
  int n_full;
  int part[kB];
  int part_begin[6];
};

// One block of `cnt` (<= kBilinearBackwardBlock) points of batch element n,
// channels [c_begin, c_end), taps with y in [band_lo, band_hi) only:
// coordinates `coords` (2 floats a point), indices within the batch element
// `pidx`. Adds into grad_input (`gi`, if not null) and, if `grid_grad` is not
// null, writes each point's grid gradient there (2 floats a point).
struct BilinearBackwardBlock {
  const float* coords;
  const int64_t* pidx;
  int cnt;
  int64_t n, c_begin, c_end, band_lo, band_hi;
  const float* grad_out;
  const float* input;
  float* gi;
  float* grid_grad;
};
void BilinearBackwardBlockF32(const Geometry& g, const BilinearBackwardBlock& block,
                              BilinearBackwardTables* tables);

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_BILINEAR_BACKWARD_BLOCK_H_
