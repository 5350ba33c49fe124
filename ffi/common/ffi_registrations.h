// The `registrations()` dict every compiled module exposes to Python:
// FFI target name -> PyCapsule holding the XLA FFI handler.
#ifndef JAX_GRIDSAMPLE_FFI_COMMON_FFI_REGISTRATIONS_H_
#define JAX_GRIDSAMPLE_FFI_COMMON_FFI_REGISTRATIONS_H_

#include <nanobind/nanobind.h>

#include <initializer_list>
#include <utility>

#include "xla/ffi/api/c_api.h"

namespace gs {

inline nanobind::dict FfiRegistrations(
    std::initializer_list<std::pair<const char*, XLA_FFI_Handler*>> handlers) {
  nanobind::dict registrations;
  for (const auto& [name, handler] : handlers) {
    registrations[name] = nanobind::capsule(reinterpret_cast<void*>(handler));
  }
  return registrations;
}

}  // namespace gs

#endif  // JAX_GRIDSAMPLE_FFI_COMMON_FFI_REGISTRATIONS_H_
