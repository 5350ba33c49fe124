// The tile sampler: float32 forwards from channels-last pixels, in the
// portable vector code of vec8.h (AVX2 + FMA on x86-64, NEON on aarch64;
// implementation in tile_sampler.cc). Call its functions only where
// HasVectorKernels() and FitsInt32Offsets(g).
//
// Gathering one channel of 8 points costs a gather per tap, which x86 cores
// run slowly and NEON has no instruction for. With the channels of a pixel
// contiguous, a tap of a point is one plain vector load of 8 channels.
// Channels-last input is read in place; channels-first input is first copied
// channels last, one batch element at a time, into a buffer that stays in
// the core's cache.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_TILE_SAMPLER_H_
#define JAX_GRIDSAMPLE_FFI_CPU_TILE_SAMPLER_H_

#include <cstdint>

#include "grid_sample_cpu.h"

namespace gs_cpu {

// Floats per pixel in the copy: the channels rounded up to a multiple of 8
// (the extra channels are zeros).
int64_t ChannelsLastStride(int64_t channels);

// Whether the copy pays for itself here: channels-first, at least two
// channels, at least 4 taps per point, at least as many tap reads as input
// elements, and for 2D bilinear read as pairs (SamplesPairs) at least 8
// channels and planes larger than half an L1 (of 32 KiB, assumed).
bool ViaChannelsLastPays(const Geometry& g, int64_t interpolation);

// Floats of the buffer a channels-first forward allocates: the copy of one
// batch element and a row of zeros.
int64_t ViaChannelsLastBufferFloats(const Geometry& g);

// Forward of points [p_begin, p_end) of batch element n: channels-last input
// read in place; channels-first input (kTilesViaCopy: all the points of n
// at once) through a channels-last copy of the element.
void ForwardTilesF32(const Geometry& g, int64_t interpolation, const float* input,
                     const float* grid, float* output, int64_t n, int64_t p_begin, int64_t p_end);

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_TILE_SAMPLER_H_
