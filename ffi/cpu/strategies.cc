// The strategy choosers; see strategies.h.
#include "strategies.h"

#include <cstdint>
#include <string>

#include "gather_sampler.h"
#include "grid_sample_cpu.h"
#include "nearest_ranges_backward.h"
#include "tile_sampler.h"

#if GS_CPU_HAVE_AVX2_PATH
#include <cpuid.h>
#endif

namespace gs_cpu {

#if GS_CPU_HAVE_AVX2_PATH
namespace {

// AVX2 and FMA in the CPU, and the AVX state saved by the OS, read with cpuid and
// xgetbv. Not __builtin_cpu_supports: its __cpu_model symbol does not link into a
// shared library with zig's toolchain (the release wheels', CMakeLists.txt).
bool CpuidHasAvx2Fma() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool fma = ecx & (1u << 12), osxsave = ecx & (1u << 27), avx = ecx & (1u << 28);
  if (!(fma && osxsave && avx)) return false;
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low & 0x6u) != 0x6u) return false;  // XMM and YMM state enabled
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return ebx & (1u << 5);
}

}  // namespace
#endif

bool HasAvx2Fma() {
#if GS_CPU_HAVE_AVX2_PATH
  static const bool has = CpuidHasAvx2Fma();
  return has;
#else
  return false;
#endif
}

namespace {

// Float32 with the vector kernels (vec8.h) and int32 plane offsets.
bool VectorTakes(const Geometry& g, ffi::DataType dt) {
  return dt == ffi::DataType::F32 && HasVectorKernels() && FitsInt32Offsets(g);
}

// The same, and AVX2 + FMA (the strategies written in its intrinsics).
bool Avx2Takes(const Geometry& g, ffi::DataType dt) { return VectorTakes(g, dt) && HasAvx2Fma(); }

// The largest channels-last copy of a batch element kTilesViaCopy makes
// when chosen: it should stay in a core's cache.
constexpr int64_t kMaxCopyBytes = int64_t{4} << 20;

}  // namespace

bool ForwardCanTake(ForwardStrategy strategy, const Geometry& g, ffi::DataType dt) {
  switch (strategy) {
    case ForwardStrategy::kPortable: return true;
    case ForwardStrategy::kGather: return VectorTakes(g, dt) && !g.channels_last;
    case ForwardStrategy::kTiles: return VectorTakes(g, dt) && g.channels_last;
    case ForwardStrategy::kTilesViaCopy: return VectorTakes(g, dt) && !g.channels_last;
    default: return false;
  }
}

ForwardStrategy ChooseForward(const Geometry& g, ffi::DataType dt, int64_t interpolation,
                              int64_t threads) {
  if (!VectorTakes(g, dt)) return ForwardStrategy::kPortable;
  if (g.channels_last) return ForwardStrategy::kTiles;
  // The copy takes one task per batch element: only where that keeps the
  // threads busy.
  if (ViaChannelsLastPays(g, interpolation) && ElementsKeepThreadsBusy(threads, g) &&
      ViaChannelsLastBufferFloats(g) * 4 <= kMaxCopyBytes) {
    return ForwardStrategy::kTilesViaCopy;
  }
  return ForwardStrategy::kGather;
}

// The error of a strategy that cannot take the call (`dt`: the call's dtype).
ffi::Error Refused(const char* direction, int64_t requested, const Geometry& g, ffi::DataType dt) {
  return InvalidArgument("attribute strategy " + std::to_string(requested) +
                         " cannot compute this " + direction + " (" + DTypeName(dt) + ", " +
                         (g.channels_last ? "channels last" : "channels first") + ")");
}

ffi::Error ResolveForwardStrategy(int64_t requested, const Geometry& g, ffi::DataType dt,
                                  int64_t interpolation, int64_t threads, ForwardStrategy* chosen) {
  if (requested == static_cast<int64_t>(ForwardStrategy::kAuto)) {
    *chosen = ChooseForward(g, KernelDType(dt), interpolation, threads);
    return ffi::Error::Success();
  }
  const auto strategy = static_cast<ForwardStrategy>(requested);
  if (!ForwardCanTake(strategy, g, KernelDType(dt))) {  // unknown values too
    return Refused("forward", requested, g, dt);
  }
  *chosen = strategy;
  return ffi::Error::Success();
}

bool BackwardCanTake(BackwardStrategy strategy, const Geometry& g, ffi::DataType dt,
                     int64_t interpolation) {
  switch (strategy) {
    case BackwardStrategy::kPortable: return true;
    case BackwardStrategy::kNearestRanges:
      return VectorTakes(g, dt) && interpolation == gs::kNearest && !g.channels_last;
    case BackwardStrategy::kChannelsLastAvx2: return Avx2Takes(g, dt) && g.channels_last;
    default: return false;
  }
}

BackwardStrategy ChooseBackward(const Geometry& g, ffi::DataType dt, int64_t interpolation) {
  if (!VectorTakes(g, dt)) return BackwardStrategy::kPortable;
  // Each range's task reads all the points' grad_output: more than two
  // ranges (planes whose 8 channels overflow the staging copy) do not pay.
  if (interpolation == gs::kNearest && !g.channels_last && NearestStagingRanges(g) <= 2) {
    return BackwardStrategy::kNearestRanges;
  }
  return g.channels_last && HasAvx2Fma() ? BackwardStrategy::kChannelsLastAvx2
                                         : BackwardStrategy::kPortable;
}

ffi::Error ResolveBackwardStrategy(int64_t requested, const Geometry& g, ffi::DataType dt,
                                   int64_t interpolation, BackwardStrategy* chosen) {
  if (requested == static_cast<int64_t>(BackwardStrategy::kAuto)) {
    *chosen = ChooseBackward(g, KernelDType(dt), interpolation);
    return ffi::Error::Success();
  }
  const auto strategy = static_cast<BackwardStrategy>(requested);
  if (!BackwardCanTake(strategy, g, KernelDType(dt), interpolation)) {  // unknown values too
    return Refused("backward", requested, g, dt);
  }
  *chosen = strategy;
  return ffi::Error::Success();
}

}  // namespace gs_cpu
