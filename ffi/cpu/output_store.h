// Forward output stores of the vector kernels: ordinary, or non-temporal for
// large outputs.
//
// An ordinary store to a line that is not in the cache first reads that line
// (read for ownership). The forwards write their output once, in whole
// 64-byte lines (16 points of a channel row, or runs of 8 channels of
// consecutive points), so for an output too large to stay in the caches
// that read is wasted traffic: non-temporal stores write the lines without
// reading them. Outputs smaller than a core's L2 keep ordinary stores,
// which leave them in the cache for the op that reads them next.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_OUTPUT_STORE_H_
#define JAX_GRIDSAMPLE_FFI_CPU_OUTPUT_STORE_H_

#include <cstdint>

#include "grid_sample_cpu.h"
#include "vec8.h"

namespace gs_cpu {

// Float32 outputs of at least this many bytes are streamed.
constexpr int64_t kStreamOutputBytes = int64_t{1} << 20;

// Whether to stream a float32 output of `floats` floats written in runs of
// `run` contiguous floats: a large one whose runs of 8 floats can all be
// 32-byte aligned (`run` a multiple of 8), so that no line mixes the two
// kinds of store.
inline bool StreamsRuns(int64_t run, int64_t floats) {
  return run % 8 == 0 && floats * int64_t{4} >= kStreamOutputBytes;
}

// A forward's output: runs are channels-first rows of points, or
// channels-last points of channels.
inline bool StreamsOutput(const Geometry& g) {
  return StreamsRuns(g.channels_last ? g.c : g.points, g.n * g.c * g.points);
}

// 8 floats at p: non-temporal when `stream` and p is 32-byte aligned (a row
// that starts unaligned is stored the ordinary way throughout), on x86-64;
// ordinary stores elsewhere.
GS_CPU_VECTOR_INLINE void StoreOutput(float* p, F8 v, bool stream) {
  if (stream && (reinterpret_cast<uintptr_t>(p) & 31) == 0) return StreamStore8(p, v);
  Store8(p, v);
}

// Orders a task's non-temporal stores before whatever it does next (the
// pool's completion signal): call at the end of each chunk that streamed.
GS_CPU_VECTOR_INLINE void FinishOutputStores(bool stream) {
  if (stream) StreamFence();
}

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_OUTPUT_STORE_H_
