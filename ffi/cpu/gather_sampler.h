// The gather sampler: float32 forwards of channels-first input, in the
// portable vector code of vec8.h (AVX2 + FMA on x86-64, NEON on aarch64;
// implementation in gather_sampler.cc). Call its functions only where
// HasVectorKernels() and FitsInt32Offsets(g).
//
// A chunk of points is processed in blocks, with struct-of-arrays tables
// over the block (soa_taps.h), then channel after channel, 8 points at a
// time: gathers of their taps (Gather8: out-of-range taps read nothing), or
// plain loads where those are cheaper (nearest; bilinear, one 8-byte load
// per row of a point's taps, but for the points at a "wrap" axis's seam,
// whose sums are gathered apart). Its results are bitwise those of every other
// forward strategy. Outputs of 1 MiB or more are written with non-temporal
// stores (output_store.h).
#ifndef JAX_GRIDSAMPLE_FFI_CPU_GATHER_SAMPLER_H_
#define JAX_GRIDSAMPLE_FFI_CPU_GATHER_SAMPLER_H_

#include <cstdint>

#include "grid_sample_cpu.h"

namespace gs_cpu {

// Forward of points [p_begin, p_end) of batch element n, float32, channels
// first, for spatial rank g.k and `interpolation`.
void ForwardGatherF32(const Geometry& g, int64_t interpolation, const float* input,
                      const float* grid, float* output, int64_t n, int64_t p_begin, int64_t p_end);

// Whether bilinear taps are read as pairs of floats, one 8-byte load per row
// of taps (channels-first, 2 <= w, h, d <= 2^24): faster than gathers, and
// in 2D than the tile sampler's channels-last copy except where
// ViaChannelsLastPays says otherwise.
bool SamplesPairs(const Geometry& g, int64_t interpolation);

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_GATHER_SAMPLER_H_
