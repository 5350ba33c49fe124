// Which kernel computes a call: the strategies of each direction, what each
// can take, and the one function per direction that chooses among them from
// the call's shapes, dtype, mode and layout (and the thread count, for how
// the work splits).
//
// kPortable runs everywhere, every dtype. The others are float32 in vector
// code (vec8.h: x86-64 with AVX2 + FMA, chosen at run time, and aarch64),
// but for the channels-last build in AVX2 (x86-64 only). Every strategy
// gives bitwise what kPortable gives (forward output; grad_input and
// grad_grid), which the tests check by forcing each.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_STRATEGIES_H_
#define JAX_GRIDSAMPLE_FFI_CPU_STRATEGIES_H_

#include <cstdint>

#include "grid_sample_cpu.h"
#include "xla/ffi/api/ffi.h"

namespace gs_cpu {

// Values of the test target's "strategy" attribute; kAuto lets the chooser
// pick (the production target).
enum class ForwardStrategy : int64_t {
  kAuto = -1,
  kPortable = 0,      // tap tables per block of points, plain loops (any dtype)
  kGather = 1,        // channels first, per channel 8 points at a time: gathers, or pairs of
                      // floats (bilinear) and plain loads (nearest)
  kTiles = 2,         // channels-last input read in place, a pixel's channels as vectors
  kTilesViaCopy = 3,  // channels-first input copied channels-last per batch element, then kTiles
};

enum class BackwardStrategy : int64_t {
  kAuto = -1,
  kPortable = 0,          // tap tables per block of points, plain loops (any dtype)
  kNearestRanges = 1,     // nearest channels first: tasks own ranges of plane elements, staged
                          // vector adds
  kChannelsLastAvx2 = 2,  // channels last: kPortable's loops compiled for AVX2 + FMA
};

// The dtype the kernels compute in: float16 and bfloat16 run float32's
// (half_precision.h).
inline ffi::DataType KernelDType(ffi::DataType dt) {
  return dt == ffi::DataType::F16 || dt == ffi::DataType::BF16 ? ffi::DataType::F32 : dt;
}

// Whether `strategy` can compute this call (kernel dtype `dt`).
bool ForwardCanTake(ForwardStrategy strategy, const Geometry& g, ffi::DataType dt);

// The strategy the production target runs.
ForwardStrategy ChooseForward(const Geometry& g, ffi::DataType dt, int64_t interpolation,
                              int64_t threads);

// `requested` (kAuto or a forced value) as the strategy to run, or an error
// naming the attribute when it is unknown or cannot take the call (`dt`: the
// call's dtype, half types included).
ffi::Error ResolveForwardStrategy(int64_t requested, const Geometry& g, ffi::DataType dt,
                                  int64_t interpolation, int64_t threads, ForwardStrategy* chosen);

bool BackwardCanTake(BackwardStrategy strategy, const Geometry& g, ffi::DataType dt,
                     int64_t interpolation);
BackwardStrategy ChooseBackward(const Geometry& g, ffi::DataType dt, int64_t interpolation);
ffi::Error ResolveBackwardStrategy(int64_t requested, const Geometry& g, ffi::DataType dt,
                                   int64_t interpolation, BackwardStrategy* chosen);

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_STRATEGIES_H_
