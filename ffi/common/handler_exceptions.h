// No C++ exception leaves an FFI handler (XLA calls handlers through a C
// interface, where one would end the process): every handler symbol, on every
// platform, binds NoExceptions<platform, implementation>::Call, which runs the
// implementation inside CatchExceptions; that returns what it throws as an
// ffi::Error, kResourceExhausted for a failed allocation. Host code only.
#ifndef JAX_GRIDSAMPLE_FFI_COMMON_HANDLER_EXCEPTIONS_H_
#define JAX_GRIDSAMPLE_FFI_COMMON_HANDLER_EXCEPTIONS_H_

#include <cstdint>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include "xla/ffi/api/ffi.h"

namespace gs_ffi {

// A host buffer that could not be allocated: what it holds, its size.
struct AllocationFailure {
  const char* buffer;
  uint64_t bytes;
};

// body()'s error, or that of the exception it throws, as
// "grid_sample (<platform>): ...". Nothing here throws: the catch blocks copy
// the exception's text into a local buffer, and the message is built once the
// exception is gone ("out of memory" if even that fails).
template <typename Body>
xla::ffi::Error CatchExceptions(const char* platform, Body&& body) noexcept {
  namespace ffi = xla::ffi;
  ffi::ErrorCode code = ffi::ErrorCode::kResourceExhausted;
  char detail[256] = "unknown exception";
  try {
    return body();
  } catch (const AllocationFailure& e) {
    std::snprintf(detail, sizeof(detail), "could not allocate the %s (%llu bytes)", e.buffer,
                  static_cast<unsigned long long>(e.bytes));
  } catch (const std::exception& e) {  // std::bad_alloc: kResourceExhausted
    if (dynamic_cast<const std::bad_alloc*>(&e) == nullptr) code = ffi::ErrorCode::kInternal;
    std::snprintf(detail, sizeof(detail), "%s", e.what());
  } catch (...) {
    code = ffi::ErrorCode::kInternal;
  }
  try {
    return ffi::Error(code, std::string("grid_sample (") + platform + "): " + detail);
  } catch (...) {
    return ffi::Error(code, "out of memory");
  }
}

// NoExceptions<kPlatform, kImpl>::Call: the handler implementation kImpl, with
// the same parameters, inside CatchExceptions; what a handler symbol binds.
template <const char* const& kPlatform, auto kImpl>
struct NoExceptions;

template <const char* const& kPlatform, typename... Args, xla::ffi::Error (*kImpl)(Args...)>
struct NoExceptions<kPlatform, kImpl> {
  static xla::ffi::Error Call(Args... args) noexcept {
    return CatchExceptions(kPlatform, [&] { return kImpl(std::move(args)...); });
  }
};

}  // namespace gs_ffi

#endif  // JAX_GRIDSAMPLE_FFI_COMMON_HANDLER_EXCEPTIONS_H_
