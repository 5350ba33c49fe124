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
// across points (soa_taps_avx2.h). Two samplers use them:
// - grid_sample_avx2.cc, channels first: per channel, 8 points at a time
//   with masked gathers (out-of-range taps are masked off: they never read
//   memory), or plain loads where those are cheaper (nearest; bilinear, one
//   8-byte load per row of taps).
// - grid_sample_avx2_tiles.cc: from channels-last pixels (the input itself,
//   or a copy of channels-first input), plain vector loads instead of
//   gathers; points one at a time into channels-last output, tiles of points
//   x channels into channels-first output.
// Both give bitwise the same results. Outputs of 1 MiB or more are written
// with non-temporal stores (output_store_avx2.h).
#ifndef JAX_GRIDSAMPLE_FFI_CPU_GRID_SAMPLE_AVX2_H_
#define JAX_GRIDSAMPLE_FFI_CPU_GRID_SAMPLE_AVX2_H_

#include <cstdint>

#include "grid_sample_cpu.h"

namespace gs_cpu {

// HasAvx2Fma() is declared in grid_sample_cpu.h.

// Whether the int32 tables can describe this geometry (every plane offset
// fits in int32).
bool Avx2PathFits(const Geometry& g);

// Forward of points [p_begin, p_end) of batch element n, float32, channels
// first, for spatial rank g.k and `interpolation` (the gather strategy).
// Call only when HasAvx2Fma() and Avx2PathFits(g).
void ForwardChunkAvx2F32(const Geometry& g, int64_t interpolation, const float* input,
                         const float* grid, float* output, int64_t n, int64_t p_begin,
                         int64_t p_end);

// Whether the gather path reads bilinear taps as pairs of floats, one 8-byte
// load per row of taps (channels-first, 2 <= w, h, d <= 2^24): faster than masked
// gathers, and in 2D than the tile sampler's channels-last copy except where
// ViaChannelsLastPays says otherwise.
bool SamplesPairs(const Geometry& g, int64_t interpolation);

// The tile sampler (grid_sample_avx2_tiles.cc).
//
// Floats per pixel in the copy: the channels rounded up to a multiple of 8
// (the extra channels are zeros).
int64_t ChannelsLastStride(int64_t channels);

// Whether the copy pays for itself here: channels-first, at least two
// channels, at least 4 taps per point, at least as many tap reads as input
// elements, and for 2D bilinear read as pairs (SamplesPairs) at least 8
// channels and planes larger than half an L1 (of 32 KiB, assumed).
bool ViaChannelsLastPays(const Geometry& g, int64_t interpolation);

// Floats of the buffer that ForwardViaChannelsLastAvx2F32 needs: the copy
// of one batch element and a row of zeros.
int64_t ViaChannelsLastBufferFloats(const Geometry& g);

// Forward of all points of batch element n, as ForwardChunkAvx2F32 computes
// it (bitwise), through a channels-last copy of that element made in
// `buffer` (ViaChannelsLastBufferFloats(g) floats). Call only when
// HasAvx2Fma() and Avx2PathFits(g).
void ForwardViaChannelsLastAvx2F32(const Geometry& g, int64_t interpolation, const float* input,
                                   const float* grid, float* output, int64_t n, float* buffer);

// Forward of points [p_begin, p_end) of batch element n of channels-last
// input, read in place by the tile sampler. Call only when HasAvx2Fma() and
// Avx2PathFits(g).
void ForwardChannelsLastChunkAvx2F32(const Geometry& g, int64_t interpolation,
                                     const float* input, const float* grid, float* output,
                                     int64_t n, int64_t p_begin, int64_t p_end);

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_GRID_SAMPLE_AVX2_H_
