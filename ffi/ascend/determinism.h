// ACL_OPT_DETERMINISTIC around the handlers' aclnn calls: what a call asks
// for, without changing other libraries' calls.
//
// Where CANN reads the option: the grid sampler's op code reads the option of
// the current context (aclrtCtxGetSysParamOpt, ops-cv
// aclnn_grid_sampler2d_backward.cpp:181 and aclnn_grid_sampler3d_backward.cpp:189),
// as its API pages document; opbase, when it picks and tiles the kernel in the
// first phase, read the context option once per kernel before opbase c501b51
// (tiling_parse_ctx_holder.cpp) and reads the process option
// (aclrtGetSysParamOpt) at every first phase since (op_executor.cpp:1011).
// ops-cv's op_api_list.md (line 26) advises setting it once per thread.
//
// So:
// - A deterministic call (DeterministicScope) raises the current context's
//   option to 1 if it is lower, for its first phase and launch only, and
//   restores it after; a level already set (1, 2 or 3) is never lowered and
//   the process option is never touched. CANN releases that pick kernels by
//   the process option, or cache the context option per kernel, may not
//   honour this; the self-check tests it.
// - For a guarantee, the user sets the level once at start-up:
//   JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC=<level> makes every handler call raise
//   the current context's and the process's options to that level if they
//   are lower (ApplyStartupDeterminism), before its first aclnn call, and
//   never reset them: from the handlers' first call in a context on, every
//   aclnn call there is deterministic.
#ifndef JAX_GRIDSAMPLE_FFI_ASCEND_DETERMINISM_H_
#define JAX_GRIDSAMPLE_FFI_ASCEND_DETERMINISM_H_

#include <cstdint>
#include <mutex>

#include "aclnn_api.h"
#include "xla/ffi/api/ffi.h"

namespace gs_ascend {

// Applies JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC (if set) to the current context
// and the process. Call with a context current, before the call's first aclnn
// call.
xla::ffi::Error ApplyStartupDeterminism(const AclnnApi& api);

// For one deterministic call: Enter() before its first phase, Exit() after its
// launch (the destructor restores on error paths). Calls of the handlers that
// change the option are serialized, so that one call's restore never undoes
// another's raise.
class DeterministicScope {
 public:
  explicit DeterministicScope(const AclnnApi& api) : api_(api) {}
  DeterministicScope(const DeterministicScope&) = delete;
  DeterministicScope& operator=(const DeterministicScope&) = delete;
  ~DeterministicScope() { Restore(); }

  xla::ffi::Error Enter();
  xla::ffi::Error Exit() { return Restore(); }

 private:
  xla::ffi::Error Restore();

  const AclnnApi& api_;
  std::unique_lock<std::mutex> lock_;
  bool raised_ = false;
  int64_t previous_ = 0;
};

}  // namespace gs_ascend

#endif  // JAX_GRIDSAMPLE_FFI_ASCEND_DETERMINISM_H_
