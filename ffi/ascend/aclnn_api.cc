// dlopen/dlsym loader for the CANN entry points declared in aclnn_api.h.
#include "aclnn_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "environment.h"

namespace gs_ascend {
namespace {

// Splits `list` at any of `separators`, dropping empty items.
std::vector<std::string> Split(const std::string& list, const char* separators) {
  std::vector<std::string> items;
  std::string current;
  for (char ch : list) {
    if (std::strchr(separators, ch) != nullptr) {
      if (!current.empty()) items.push_back(current);
      current.clear();
    } else {
      current.push_back(ch);
    }
  }
  if (!current.empty()) items.push_back(current);
  return items;
}

// Every symbol the handlers need, in the order errors list them.
constexpr const char* kRequiredSymbols[] = {
    "aclCreateTensor", "aclDestroyTensor", "aclCreateBoolArray", "aclDestroyBoolArray",
    "aclnnGridSampler2DGetWorkspaceSize", "aclnnGridSampler2D",
    "aclnnGridSampler3DGetWorkspaceSize", "aclnnGridSampler3D",
    "aclnnGridSampler2DBackwardGetWorkspaceSize", "aclnnGridSampler2DBackward",
    "aclnnGridSampler3DBackwardGetWorkspaceSize", "aclnnGridSampler3DBackward",
    "aclrtMalloc", "aclrtFree", "aclrtSynchronizeStream", "aclrtMemsetAsync",
    "aclrtGetCurrentContext", "aclGetRecentErrMsg", "aclrtCtxGetSysParamOpt",
    "aclrtCtxSetSysParamOpt"};

struct Loaded {
  std::string key;                  // the library list it was loaded from
  std::vector<std::string> opened;  // names that dlopen'ed
  std::vector<void*> handles;
  AclnnApi api;
};

std::mutex g_mutex;
Loaded* g_current = nullptr;                   // guarded by g_mutex
std::vector<std::unique_ptr<Loaded>> g_all;    // never freed: handlers may hold an api pointer

const char* kFixHint =
    "On an Ascend machine, source CANN's environment script first (for example "
    "`source /usr/local/Ascend/ascend-toolkit/set_env.sh`, which puts the CANN "
    "libraries on LD_LIBRARY_PATH), or set JAX_GRIDSAMPLE_ACLNN_LIBS to the libraries' "
    "paths separated by ':' (default: libnnopbase.so:libascendcl.so|libacl_rt.so:"
    "libopapi_cv.so|libopapi.so, where '|' separates alternatives of which only the "
    "first that loads and has the symbols is used).";

template <typename Fn>
bool Resolve(const Loaded& loaded, const char* symbol, Fn* out) {
  for (void* handle : loaded.handles) {
    if (void* p = dlsym(handle, symbol)) {
      *out = reinterpret_cast<Fn>(p);
      return true;
    }
  }
  return false;
}

bool Defines(void* handle, const char* symbol) { return dlsym(handle, symbol) != nullptr; }

// Whether `handle` defines a required symbol that none of `kept` defines.
bool AddsSymbols(void* handle, const std::vector<void*>& kept) {
  for (const char* symbol : kRequiredSymbols) {
    if (!Defines(handle, symbol)) continue;
    bool found = false;
    for (void* other : kept) found = found || Defines(other, symbol);
    if (!found) return true;
  }
  return false;
}

std::string Join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& item : items) s += (s.empty() ? "" : ", ") + item;
  return s;
}

std::unique_ptr<Loaded> Load(const std::string& key, bool explicit_list, std::string* error) {
  auto loaded = std::make_unique<Loaded>();
  loaded->key = key;
  std::vector<std::string> failed;
  for (const std::string& group : Split(key, ":;")) {
    std::vector<std::string> group_failed;
    bool kept = false;
    const std::vector<std::string> names = Split(group, "|");
    // An alternative the process has loaded already (torch_npu opens the
    // combined libopapi.so) is kept in preference to opening another: CANN
    // does not support the combined and a per-repository library together
    // (ops-cv docs/zh/op_api_list.md, line 12).
    for (const std::string& name : names) {
      void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
      if (handle == nullptr) continue;
      if (!AddsSymbols(handle, loaded->handles)) {
        dlclose(handle);
        continue;
      }
      loaded->handles.push_back(handle);
      loaded->opened.push_back(name + " (already loaded)");
      kept = true;
      break;
    }
    for (const std::string& name : names) {
      if (kept) break;
      dlerror();
      void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        const char* why = dlerror();
        group_failed.push_back(name + " (" + (why ? why : "dlopen failed") + ")");
        continue;
      }
      if (!AddsSymbols(handle, loaded->handles)) {
        group_failed.push_back(name + " (defines none of the symbols still missing)");
        dlclose(handle);
        continue;
      }
      loaded->handles.push_back(handle);
      loaded->opened.push_back(name);
      kept = true;
      break;
    }
    if (kept) continue;
    if (explicit_list) {
      *error = std::string("grid_sample (ascend): cannot load the CANN library ") +
               Join(group_failed) + " listed in " + kLibrariesEnvVar + ". " + kFixHint;
      for (void* handle : loaded->handles) dlclose(handle);
      return nullptr;
    }
    failed.insert(failed.end(), group_failed.begin(), group_failed.end());
  }

  AclnnApi& api = loaded->api;
  std::vector<std::string> missing;
  auto need = [&](const char* symbol, auto* slot) {
    if (!Resolve(*loaded, symbol, slot)) missing.push_back(symbol);
  };
  need("aclCreateTensor", &api.create_tensor);
  need("aclDestroyTensor", &api.destroy_tensor);
  need("aclCreateBoolArray", &api.create_bool_array);
  need("aclDestroyBoolArray", &api.destroy_bool_array);
  need("aclnnGridSampler2DGetWorkspaceSize", &api.grid_sampler2d_workspace);
  need("aclnnGridSampler2D", &api.grid_sampler2d);
  need("aclnnGridSampler3DGetWorkspaceSize", &api.grid_sampler3d_workspace);
  need("aclnnGridSampler3D", &api.grid_sampler3d);
  need("aclnnGridSampler2DBackwardGetWorkspaceSize", &api.grid_sampler2d_backward_workspace);
  need("aclnnGridSampler2DBackward", &api.grid_sampler2d_backward);
  need("aclnnGridSampler3DBackwardGetWorkspaceSize", &api.grid_sampler3d_backward_workspace);
  need("aclnnGridSampler3DBackward", &api.grid_sampler3d_backward);
  need("aclrtMalloc", &api.rt_malloc);
  need("aclrtFree", &api.rt_free);
  need("aclrtSynchronizeStream", &api.rt_synchronize_stream);
  need("aclrtMemsetAsync", &api.memset_async);
  need("aclrtGetCurrentContext", &api.get_current_context);
  need("aclGetRecentErrMsg", &api.recent_err_msg);
  need("aclrtCtxGetSysParamOpt", &api.ctx_get_sys_param_opt);
  need("aclrtCtxSetSysParamOpt", &api.ctx_set_sys_param_opt);
  // Optional symbols (older CANN lacks some).
  Resolve(*loaded, "aclSetAclOpExecutorRepeatable", &api.set_executor_repeatable);
  Resolve(*loaded, "aclDestroyAclOpExecutor", &api.destroy_executor);
  Resolve(*loaded, "aclrtGetSocName", &api.get_soc_name);
  Resolve(*loaded, "aclrtGetDevice", &api.get_device);
  Resolve(*loaded, "aclsysGetCANNVersion", &api.get_cann_version);
  Resolve(*loaded, "aclrtGetSysParamOpt", &api.get_sys_param_opt);
  Resolve(*loaded, "aclrtSetSysParamOpt", &api.set_sys_param_opt);

  if (!missing.empty()) {
    // A one-sentence summary first (native_status() shows it), then the details.
    std::string msg = "grid_sample (ascend): ";
    if (loaded->opened.empty()) {
      msg += "no CANN library could be loaded (tried " + key + "). Could not load " +
             Join(failed);
    } else {
      msg += "the CANN libraries loaded lack symbols " + Join(missing) + " (loaded " +
             Join(loaded->opened) + ")";
      if (!failed.empty()) msg += ". Could not load " + Join(failed);
    }
    msg += ". ";
    msg += kFixHint;
    *error = msg;
    for (void* handle : loaded->handles) dlclose(handle);
    return nullptr;
  }
  return loaded;
}

}  // namespace

const AclnnApi* LoadAclnnApi(std::string* error) {
  const std::string env = CurrentEnvironment().libraries;
  const bool explicit_list = !env.empty();
  const std::string key = explicit_list ? env : std::string(kDefaultLibraries);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_current != nullptr && g_current->key == key) return &g_current->api;
  std::unique_ptr<Loaded> loaded = Load(key, explicit_list, error);
  if (!loaded) return nullptr;  // not cached: a later call retries
  g_current = loaded.get();
  g_all.push_back(std::move(loaded));
  return &g_current->api;
}

std::string AclnnApiStatus() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_current == nullptr) return "not loaded (loaded on first use)";
  std::string s = "loaded from ";
  for (size_t i = 0; i < g_current->opened.size(); ++i) {
    s += (i ? ", " : "") + g_current->opened[i];
  }
  return s;
}

std::string SocName() {
  std::string error;
  const AclnnApi* api = LoadAclnnApi(&error);
  if (api == nullptr || api->get_soc_name == nullptr) return "";
  const char* name = api->get_soc_name();
  return name != nullptr ? std::string(name) : std::string();
}

std::string CannVersion() {
  std::string error;
  const AclnnApi* api = LoadAclnnApi(&error);
  if (api == nullptr || api->get_cann_version == nullptr) return "";
  AclCannPackageVersion version{};
  if (api->get_cann_version(kAclPkgNameCann, &version) != 0) return "";
  version.version[sizeof(version.version) - 1] = '\0';
  return version.version;
}

std::string AclnnStatusName(aclnnStatus status) {
  const char* name = nullptr;
  switch (status) {
    case 0: name = "ACLNN_SUCCESS"; break;
    case 161001: name = "ACLNN_ERR_PARAM_NULLPTR"; break;
    case 161002: name = "ACLNN_ERR_PARAM_INVALID"; break;
    case 361001: name = "ACLNN_ERR_RUNTIME_ERROR"; break;
    case 561000: name = "ACLNN_ERR_INNER"; break;
    case 561001: name = "ACLNN_ERR_INNER_INFERSHAPE_ERROR"; break;
    case 561002: name = "ACLNN_ERR_INNER_TILING_ERROR"; break;
    case 561003: name = "ACLNN_ERR_INNER_FIND_KERNEL_ERROR"; break;
    case 561101: name = "ACLNN_ERR_INNER_CREATE_EXECUTOR"; break;
    case 561102: name = "ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR"; break;
    case 561103: name = "ACLNN_ERR_INNER_NULLPTR"; break;
    default: break;
  }
  std::string s;
  if (name != nullptr) {
    s = name;
  } else if (status >= 561000 && status < 562000) {
    s = "ACLNN_ERR_INNER_*";
  } else {
    s = "aclnnStatus";
  }
  return s + " (" + std::to_string(status) + ")";
}

}  // namespace gs_ascend
