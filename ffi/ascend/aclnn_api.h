// The few CANN (aclnn / ACL runtime) declarations the Ascend handlers use,
// declared here so that the package builds without CANN headers or libraries,
// and a loader that resolves them with dlopen/dlsym on first use.
//
// Values are those of CANN's public headers (acl_base.h, aclnn/acl_meta.h,
// acl_rt.h); only the symbols' names, signatures and enum values are taken.
#ifndef JAX_GRIDSAMPLE_FFI_ASCEND_ACLNN_API_H_
#define JAX_GRIDSAMPLE_FFI_ASCEND_ACLNN_API_H_

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" {
struct aclTensor;
struct aclBoolArray;
struct aclOpExecutor;
}

namespace gs_ascend {

using aclnnStatus = int32_t;
using aclError = int;
using aclrtStream = void*;

// aclDataType
enum AclDataType : int32_t {
  kAclFloat = 0,
  kAclFloat16 = 1,
  kAclDouble = 11,
  kAclBf16 = 27,
};

// aclFormat
enum AclFormat : int32_t {
  kAclFormatNCHW = 0,
  kAclFormatNHWC = 1,
  kAclFormatND = 2,
  kAclFormatNDHWC = 27,
  kAclFormatNCDHW = 30,
};

constexpr int32_t kAclOptDeterministic = 0;      // aclSysParamOpt ACL_OPT_DETERMINISTIC
constexpr int32_t kAclMemMallocHugeFirst = 0;    // aclrtMemMallocPolicy
constexpr int32_t kAclPkgNameCann = 0;           // aclCANNPackageName ACL_PKG_NAME_CANN
constexpr aclnnStatus kAclnnSuccess = 0;
// aclnnStatus values of a call's parameters (aclnn_base.h): the caller's fault.
constexpr aclnnStatus kAclnnErrParamNullptr = 161001;
constexpr aclnnStatus kAclnnErrParamInvalid = 161002;

// aclCANNPackageVersion (acl.h): the version strings aclsysGetCANNVersion fills.
struct AclCannPackageVersion {
  char version[128];
  char major_version[64];
  char minor_version[64];
  char release_version[64];
  char patch_version[64];
  char reserved[128];
};

extern "C" {
using CreateTensorFn = aclTensor* (*)(const int64_t* view_dims, uint64_t view_dims_num,
                                      int32_t data_type, const int64_t* stride, int64_t offset,
                                      int32_t format, const int64_t* storage_dims,
                                      uint64_t storage_dims_num, void* tensor_data);
using DestroyTensorFn = aclnnStatus (*)(const aclTensor* tensor);
using CreateBoolArrayFn = aclBoolArray* (*)(const bool* value, uint64_t size);
using DestroyBoolArrayFn = aclnnStatus (*)(const aclBoolArray* array);
using ExecutorFn = aclnnStatus (*)(aclOpExecutor* executor);

using ForwardWorkspaceFn = aclnnStatus (*)(const aclTensor* input, const aclTensor* grid,
                                           int64_t interpolation_mode, int64_t padding_mode,
                                           bool align_corners, aclTensor* out,
                                           uint64_t* workspace_size, aclOpExecutor** executor);
using BackwardWorkspaceFn = aclnnStatus (*)(const aclTensor* grad_output,
                                            const aclTensor* input, const aclTensor* grid,
                                            int64_t interpolation_mode, int64_t padding_mode,
                                            bool align_corners, const aclBoolArray* output_mask,
                                            aclTensor* input_grad, aclTensor* grid_grad,
                                            uint64_t* workspace_size, aclOpExecutor** executor);
using LaunchFn = aclnnStatus (*)(void* workspace, uint64_t workspace_size,
                                 aclOpExecutor* executor, aclrtStream stream);

using MallocFn = aclError (*)(void** dev_ptr, size_t size, int32_t policy);
using FreeFn = aclError (*)(void* dev_ptr);
using SynchronizeStreamFn = aclError (*)(aclrtStream stream);
using RecentErrMsgFn = const char* (*)();
using GetSysParamOptFn = aclError (*)(int32_t opt, int64_t* value);
using SetSysParamOptFn = aclError (*)(int32_t opt, int64_t value);
using GetCurrentContextFn = aclError (*)(void** context);  // aclrtContext is a void*
using MemsetAsyncFn = aclError (*)(void* dev_ptr, size_t max_count, int32_t value, size_t count,
                                   aclrtStream stream);
using GetSocNameFn = const char* (*)();
using GetDeviceFn = aclError (*)(int32_t* device_id);
using GetCannVersionFn = aclError (*)(int32_t package, AclCannPackageVersion* version);
}

// The resolved entry points. Every member is non-null once Load() succeeded,
// except the optional ones marked below.
struct AclnnApi {
  CreateTensorFn create_tensor = nullptr;
  DestroyTensorFn destroy_tensor = nullptr;
  CreateBoolArrayFn create_bool_array = nullptr;
  DestroyBoolArrayFn destroy_bool_array = nullptr;
  // Optional (newer CANN): an executor that is never launched is made
  // repeatable and then destroyed, the lifecycle nnopbase documents for
  // executors the caller manages (aclSetAclOpExecutorRepeatable.md,
  // aclDestroyAclOpExecutor.md); a launched one is CANN's to destroy.
  ExecutorFn set_executor_repeatable = nullptr;
  ExecutorFn destroy_executor = nullptr;

  ForwardWorkspaceFn grid_sampler2d_workspace = nullptr;
  LaunchFn grid_sampler2d = nullptr;
  ForwardWorkspaceFn grid_sampler3d_workspace = nullptr;
  LaunchFn grid_sampler3d = nullptr;
  BackwardWorkspaceFn grid_sampler2d_backward_workspace = nullptr;
  LaunchFn grid_sampler2d_backward = nullptr;
  BackwardWorkspaceFn grid_sampler3d_backward_workspace = nullptr;
  LaunchFn grid_sampler3d_backward = nullptr;

  MallocFn rt_malloc = nullptr;
  FreeFn rt_free = nullptr;
  SynchronizeStreamFn rt_synchronize_stream = nullptr;
  RecentErrMsgFn recent_err_msg = nullptr;
  GetSysParamOptFn ctx_get_sys_param_opt = nullptr;
  SetSysParamOptFn ctx_set_sys_param_opt = nullptr;
  GetCurrentContextFn get_current_context = nullptr;
  MemsetAsyncFn memset_async = nullptr;
  GetSocNameFn get_soc_name = nullptr;            // optional
  GetDeviceFn get_device = nullptr;               // optional: aclrtGetDevice
  GetCannVersionFn get_cann_version = nullptr;    // optional: aclsysGetCANNVersion
  // The process-wide twins of the context options (aclrtGet/SetSysParamOpt),
  // optional; used only when the user asks for determinism at start-up
  // (kDeterministicEnvVar), since newer opbase reads the process value when
  // it picks kernels.
  GetSysParamOptFn get_sys_param_opt = nullptr;
  SetSysParamOptFn set_sys_param_opt = nullptr;
};

// The environment variable that overrides the library list. The list is groups
// separated by ':' or ';', each one name or path, or alternatives separated by
// '|'. Of a group's alternatives, one the process has loaded already (say,
// torch_npu's libopapi.so) is kept if it defines a symbol not yet found in the
// groups before it; otherwise the first that loads and does so (the others
// are never opened, or closed again). Symbols are then looked up in group
// order.
inline constexpr const char* kLibrariesEnvVar = "JAX_GRIDSAMPLE_ACLNN_LIBS";

// Set to 1 at start-up to make every aclnn call of the process deterministic
// (determinism.h; docs/ascend.md, "Determinism").
inline constexpr const char* kDeterministicEnvVar = "JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC";

// The list used when the environment variable is unset or empty: aclCreateTensor
// & co. (libnnopbase.so), the runtime (libascendcl.so, or libacl_rt.so where
// only that exists), then the operators: the per-repository libopapi_cv.so
// where it has the grid sampler, else the combined libopapi.so of older CANN.
// CANN does not support loading the combined library together with the
// per-repository ones, hence one group. A group none of whose alternatives
// loads is skipped as long as every symbol is found in the others.
inline constexpr const char* kDefaultLibraries =
    "libnnopbase.so:libascendcl.so|libacl_rt.so:libopapi_cv.so|libopapi.so";

// Returns the API, loading it on first use (thread-safe). The libraries are
// (re)loaded when the variable's value, as environment.h keeps it, changes
// (the tests point a process at another simulated library that way). On failure
// returns nullptr and sets *error to a message naming the libraries and
// symbols that are missing and how to fix it.
const AclnnApi* LoadAclnnApi(std::string* error);

// A description of the current state ("not loaded", the libraries opened).
std::string AclnnApiStatus();

// The chip's name from aclrtGetSocName (e.g. "Ascend910B2"), or "" when the
// libraries do not load, lack the symbol or the runtime cannot tell.
std::string SocName();

// CANN's version from aclsysGetCANNVersion (e.g. "8.1.RC1"), or "" when the
// libraries do not load, lack the symbol or the runtime cannot tell.
std::string CannVersion();

// "ACLNN_ERR_PARAM_INVALID (161002)" and the like.
std::string AclnnStatusName(aclnnStatus status);

}  // namespace gs_ascend

#endif  // JAX_GRIDSAMPLE_FFI_ASCEND_ACLNN_API_H_
