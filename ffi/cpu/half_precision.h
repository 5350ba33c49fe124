// float16 and bfloat16 on the CPU. The kernels are compiled for float32 and
// float64 only: a half-precision call widens its operands into float32
// buffers (exactly: every half value is a float), runs the float32 kernel,
// and rounds each result once to its storage type. That is the arithmetic
// of a kernel that reads the halves and computes in float32 (what half
// precision does on every platform here), from a third of the compiled code,
// and with the float32 fast paths.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_HALF_PRECISION_H_
#define JAX_GRIDSAMPLE_FFI_CPU_HALF_PRECISION_H_

#include <algorithm>
#include <cstdint>
#include <memory>

#include "../common/grid_sample_dtypes.h"
#include "grid_sample_cpu.h"
#include "parallel.h"

namespace gs_cpu {

inline constexpr int64_t kConvertChunk = int64_t{1} << 16;

// A float32 copy of the `count` values of format H at `src` (`name`: of what).
template <typename H>
std::unique_ptr<float[]> Widen(ffi::ThreadPool& pool, const char* name, const void* src,
                               int64_t count) {
  std::unique_ptr<float[]> out = NewArray<float>(name, count);
  const auto* from = static_cast<const typename H::Storage*>(src);
  float* to = out.get();
  ParallelFor(pool, CeilDiv(count, kConvertChunk), [&](int64_t chunk) {
    const int64_t end = std::min(count, (chunk + 1) * kConvertChunk);
    for (int64_t i = chunk * kConvertChunk; i < end; ++i) to[i] = H::Load(from[i]);
  });
  return out;
}

// Rounds the `count` float32 values at `src` to format H at `dst`.
template <typename H>
void Narrow(ffi::ThreadPool& pool, const float* src, void* dst, int64_t count) {
  auto* to = static_cast<typename H::Storage*>(dst);
  ParallelFor(pool, CeilDiv(count, kConvertChunk), [&](int64_t chunk) {
    const int64_t end = std::min(count, (chunk + 1) * kConvertChunk);
    for (int64_t i = chunk * kConvertChunk; i < end; ++i) to[i] = H::Store(src[i]);
  });
}

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_HALF_PRECISION_H_
