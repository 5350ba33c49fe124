// CANN's deterministic kernels, set once for the process at start-up.
//
// opbase picks a kernel, deterministic or not, in the first phase of an aclnn
// call, from ACL_OPT_DETERMINISTIC:
// - since opbase c501b51, from the process's option (aclrtGetSysParamOpt),
//   read at every first phase: op_executor.cpp:1453-1457 at c501b51, where
//   only level 1 means on (determinConfig == 1), and op_executor.cpp:1008-1046
//   since f93b493, where every level >= 1 does;
// - before c501b51 (CANN 8.1.RC1), from the current context's option
//   (aclrtCtxGetSysParamOpt), read the first time a kernel's tiling is parsed
//   and then kept for that kernel (tiling_parse_ctx_holder.cpp:225 at
//   c501b51^).
// So no per-call switch changes the kernel on either: a per-call raise of the
// context option is never read by the newer opbase, and the older one has
// fixed the kernel's choice at its first call (our support probe's, if not
// earlier). Determinism is therefore a process setting:
// JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=1 (kDeterministicEnvVar, read once,
// environment.h) makes the handlers, before their first aclnn call in each ACL
// context (the probe's included), set both options to 1 where they are 0 or
// unset; a level someone else set (1, 2 or 3) is left as it is. Only 1 is
// accepted: it is the one level every opbase above reads as "on".
#ifndef JAX_GRIDSAMPLE_FFI_ASCEND_DETERMINISM_H_
#define JAX_GRIDSAMPLE_FFI_ASCEND_DETERMINISM_H_

#include <string>

#include "aclnn_api.h"
#include "xla/ffi/api/ffi.h"

namespace gs_ascend {

// The start-up level: 1, or 0 when the variable is unset or empty. Any other
// value is an error: *error says why and the level is -1.
int StartupDeterminismLevel(std::string* error);

// Applies `level` (StartupDeterminismLevel's 0 or 1) to the current context
// and the process, once per context. Call with a context current, before the
// call's first aclnn call.
xla::ffi::Error ApplyStartupDeterminism(const AclnnApi& api, int level);

// For the tests only (with RereadEnvironment): forget which contexts the level
// was applied to.
void ForgetAppliedDeterminism();

}  // namespace gs_ascend

#endif  // JAX_GRIDSAMPLE_FFI_ASCEND_DETERMINISM_H_
