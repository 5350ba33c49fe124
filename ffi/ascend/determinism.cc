#include "determinism.h"

#include <mutex>
#include <set>
#include <string>

#include "aclnn_call.h"
#include "environment.h"

namespace gs_ascend {
namespace {

namespace ffi = xla::ffi;

std::mutex g_mutex;
std::set<void*> g_applied_contexts;  // guarded by g_mutex
bool g_applied_process = false;      // guarded by g_mutex

// The option's value; an option never set reads as an error (the runtime's
// API reference, aclrtCtxGetSysParamOpt: "no default value"), which means 0.
int64_t Read(GetSysParamOptFn get) {
  int64_t value = 0;
  return get != nullptr && get(kAclOptDeterministic, &value) == 0 ? value : 0;
}

ffi::Error SetToOne(const AclnnApi& api, SetSysParamOptFn set, const char* name) {
  if (const aclError rc = set(kAclOptDeterministic, 1); rc != 0) {
    return Internal(std::string(name) + "(ACL_OPT_DETERMINISTIC, 1) failed with aclError " +
                    std::to_string(rc) + ": " + RecentErrMsg(api));
  }
  return ffi::Error::Success();
}

}  // namespace

int StartupDeterminismLevel(std::string* error) {
  const std::string value = CurrentEnvironment().deterministic;
  if (value.empty()) return 0;
  if (value == "1") return 1;
  *error = std::string(kDeterministicEnvVar) + " is \"" + value +
           "\"; expected 1 (or unset). Levels 2 and 3 are not accepted: opbase c501b51 to "
           "f93b493 reads them as off (op_executor.cpp, determinConfig == 1); see "
           "docs/ascend.md, \"Determinism\"";
  return -1;
}

ffi::Error ApplyStartupDeterminism(const AclnnApi& api, int level) {
  if (level != 1) return ffi::Error::Success();
  void* context = nullptr;
  if (api.get_current_context(&context) != 0) context = nullptr;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_applied_contexts.count(context) == 0) {
    if (Read(api.ctx_get_sys_param_opt) == 0) {
      if (ffi::Error e = SetToOne(api, api.ctx_set_sys_param_opt, "aclrtCtxSetSysParamOpt");
          e.failure()) {
        return e;
      }
    }
    g_applied_contexts.insert(context);
  }
  if (!g_applied_process && api.set_sys_param_opt != nullptr) {
    if (Read(api.get_sys_param_opt) == 0) {
      if (ffi::Error e = SetToOne(api, api.set_sys_param_opt, "aclrtSetSysParamOpt");
          e.failure()) {
        return e;
      }
    }
    g_applied_process = true;
  }
  return ffi::Error::Success();
}

void ForgetAppliedDeterminism() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_applied_contexts.clear();
  g_applied_process = false;
}

}  // namespace gs_ascend
