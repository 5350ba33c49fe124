// The environment variables the Ascend handlers read, read once: at the
// first call that needs them, then kept for the process (reading the
// environment on every call would race with a Python thread that changes it).
// RereadEnvironment() is a hook for the tests, which point the handlers at
// another simulated library or start-up level within one process.
#ifndef JAX_GRIDSAMPLE_FFI_ASCEND_ENVIRONMENT_H_
#define JAX_GRIDSAMPLE_FFI_ASCEND_ENVIRONMENT_H_

#include <string>

namespace gs_ascend {

struct Environment {
  // JAX_GRIDSAMPLE_ACLNN_LIBS (kLibrariesEnvVar): empty when unset or empty.
  std::string libraries;
  // JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC (kDeterministicEnvVar): empty when
  // unset or empty.
  std::string deterministic;
};

// The environment as read at first use.
Environment CurrentEnvironment();

// For the tests only: read the variables again, now.
void RereadEnvironment();

}  // namespace gs_ascend

#endif  // JAX_GRIDSAMPLE_FFI_ASCEND_ENVIRONMENT_H_
