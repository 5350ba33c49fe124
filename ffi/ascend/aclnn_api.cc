// dlopen/dlsym loader for the CANN entry points declared in aclnn_api.h.
#include "aclnn_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gs_ascend {
namespace {

std::vector<std::string> SplitLibraryList(const std::string& list) {
  std::vector<std::string> names;
  std::string current;
  for (char ch : list) {
    if (ch == ':' || ch == ';') {
      if (!current.empty()) names.push_back(current);
      current.clear();
    } else {
      current.push_back(ch);
    }
  }
  if (!current.empty()) names.push_back(current);
  return names;
}

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
    "paths separated by ':' (default: libopapi_cv.so:libopapi.so:libnnopbase.so:"
    "libascendcl.so:libacl_rt.so).";

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

std::unique_ptr<Loaded> Load(const std::string& key, bool explicit_list, std::string* error) {
  auto loaded = std::make_unique<Loaded>();
  loaded->key = key;
  std::vector<std::string> failed;
  for (const std::string& name : SplitLibraryList(key)) {
    dlerror();
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      failed.push_back(name + " (" + (why ? why : "dlopen failed") + ")");
      continue;
    }
    loaded->handles.push_back(handle);
    loaded->opened.push_back(name);
  }
  auto join = [](const std::vector<std::string>& items) {
    std::string s;
    for (const auto& item : items) s += (s.empty() ? "" : ", ") + item;
    return s;
  };
  if (explicit_list && !failed.empty()) {
    *error = std::string("grid_sample (ascend): cannot load the CANN library ") + join(failed) +
             " listed in " + kLibrariesEnvVar + ". " + kFixHint;
    return nullptr;
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
  need("aclGetRecentErrMsg", &api.recent_err_msg);
  need("aclrtCtxGetSysParamOpt", &api.ctx_get_sys_param_opt);
  need("aclrtCtxSetSysParamOpt", &api.ctx_set_sys_param_opt);
  Resolve(*loaded, "aclDestroyAclOpExecutor", &api.destroy_executor);  // optional

  if (!missing.empty()) {
    std::string msg = "grid_sample (ascend): the CANN aclnn libraries are not available: ";
    msg += "symbols " + join(missing) + " not found";
    msg += loaded->opened.empty() ? std::string(" (no library could be loaded)")
                                  : " in " + join(loaded->opened);
    if (!failed.empty()) msg += "; could not load " + join(failed);
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
  const char* env = std::getenv(kLibrariesEnvVar);
  const bool explicit_list = env != nullptr && env[0] != '\0';
  const std::string key = explicit_list ? std::string(env) : std::string(kDefaultLibraries);
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
