// AVX2 + FMA forward path for float32, chosen at run time (implementation
// in grid_sample_avx2.cc).
//
// The library is built for a portable baseline (x86-64-v2). The kernel
// functions carry __attribute__((target("avx2,fma"))) and are called only
// after HasAvx2Fma() said the CPU has both, so no other code is compiled for
// AVX2 and nothing can leak into the baseline code.
//
// A chunk of points is processed in blocks of kB points, with struct-of-arrays
// tables over the block so that the compiler vectorizes the coordinate math
// across points (soa_taps.h). Two samplers use them:
// - grid_sample_avx2.cc, channels first: per channel, 8 points at a time
//   with masked gathers (out-of-range taps are masked off: they never read
//   memory), or plain loads where those are cheaper (nearest; bilinear, one
//   8-byte load per row of taps).
// - tile_sampler.cc (vector code for every CPU with vector kernels): from
//   channels-last pixels.
// Both give bitwise the same results. Outputs of 1 MiB or more are written
// with non-temporal stores (output_store.h).
#ifndef JAX_GRIDSAMPLE_FFI_CPU_GRID_SAMPLE_AVX2_H_
#define JAX_GRIDSAMPLE_FFI_CPU_GRID_SAMPLE_AVX2_H_

#include <cstdint>

#include "grid_sample_cpu.h"

namespace gs_cpu {

// HasAvx2Fma() is declared in grid_sample_cpu.h.

// Forward of points [p_begin, p_end) of batch element n, float32, channels
// first, for spatial rank g.k and `interpolation` (the gather strategy).
// Call only when HasAvx2Fma() and FitsInt32Offsets(g).
void ForwardChunkAvx2F32(const Geometry& g, int64_t interpolation, const float* input,
                         const float* grid, float* output, int64_t n, int64_t p_begin,
                         int64_t p_end);

// Whether the gather path reads bilinear taps as pairs of floats, one 8-byte
// load per row of taps (channels-first, 2 <= w, h, d <= 2^24): faster than masked
// gathers, and in 2D than the tile sampler's channels-last copy except where
// ViaChannelsLastPays says otherwise.
bool SamplesPairs(const Geometry& g, int64_t interpolation);

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_GRID_SAMPLE_AVX2_H_
