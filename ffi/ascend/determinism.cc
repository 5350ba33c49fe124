#include "determinism.h"

#include <cstdlib>
#include <mutex>
#include <string>

#include "aclnn_call.h"

namespace gs_ascend {
namespace {

namespace ffi = xla::ffi;

std::mutex g_mutex;  // serializes the handlers' changes of the option

// The option's value; an option never set reads as an error (the runtime's
// API reference, aclrtCtxGetSysParamOpt: "no default value"), which means 0.
int64_t Read(GetSysParamOptFn get) {
  int64_t value = 0;
  return get != nullptr && get(kAclOptDeterministic, &value) == 0 ? value : 0;
}

ffi::Error Set(const AclnnApi& api, SetSysParamOptFn set, const char* name, int64_t value) {
  if (const aclError rc = set(kAclOptDeterministic, value); rc != 0) {
    return Internal(std::string(name) + "(ACL_OPT_DETERMINISTIC, " + std::to_string(value) +
                    ") failed with aclError " + std::to_string(rc) + ": " + RecentErrMsg(api));
  }
  return ffi::Error::Success();
}

}  // namespace

ffi::Error ApplyStartupDeterminism(const AclnnApi& api) {
  const char* env = std::getenv(kDeterministicEnvVar);
  if (env == nullptr || env[0] == '\0') return ffi::Error::Success();
  const std::string text(env);
  if (text != "1" && text != "2" && text != "3") {
    return InvalidArgument(std::string(kDeterministicEnvVar) + " is \"" + text +
                           "\"; expected a level of ACL_OPT_DETERMINISTIC: 1, 2 or 3");
  }
  const int64_t level = text[0] - '0';
  std::lock_guard<std::mutex> lock(g_mutex);
  if (Read(api.ctx_get_sys_param_opt) < level) {
    if (ffi::Error e = Set(api, api.ctx_set_sys_param_opt, "aclrtCtxSetSysParamOpt", level);
        e.failure()) {
      return e;
    }
  }
  if (api.set_sys_param_opt != nullptr && Read(api.get_sys_param_opt) < level) {
    return Set(api, api.set_sys_param_opt, "aclrtSetSysParamOpt", level);
  }
  return ffi::Error::Success();
}

ffi::Error DeterministicScope::Enter() {
  lock_ = std::unique_lock<std::mutex>(g_mutex);
  previous_ = Read(api_.ctx_get_sys_param_opt);
  if (previous_ >= 1) return ffi::Error::Success();
  if (ffi::Error e = Set(api_, api_.ctx_set_sys_param_opt, "aclrtCtxSetSysParamOpt", 1);
      e.failure()) {
    return e;
  }
  raised_ = true;
  return ffi::Error::Success();
}

ffi::Error DeterministicScope::Restore() {
  if (!raised_) return ffi::Error::Success();
  raised_ = false;
  // Someone else (another library, another thread) set a level meanwhile:
  // theirs stands.
  if (Read(api_.ctx_get_sys_param_opt) != 1) return ffi::Error::Success();
  return Set(api_, api_.ctx_set_sys_param_opt, "aclrtCtxSetSysParamOpt", previous_);
}

}  // namespace gs_ascend
