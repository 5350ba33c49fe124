// Pieces shared by the Ascend forward and backward handlers: errors, dtype
// mapping, and RAII owners for everything a call creates (aclTensor,
// aclBoolArray, the executor until it is launched, device memory, the
// determinism setting), so that every path, errors included, releases it all.
#ifndef JAX_GRIDSAMPLE_FFI_ASCEND_ACLNN_CALL_H_
#define JAX_GRIDSAMPLE_FFI_ASCEND_ACLNN_CALL_H_

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "aclnn_api.h"
#include "xla/ffi/api/ffi.h"

namespace gs_ascend {

namespace ffi = xla::ffi;

inline ffi::Error InvalidArgument(const std::string& msg) {
  return ffi::Error(ffi::ErrorCode::kInvalidArgument, "grid_sample (ascend): " + msg);
}

inline ffi::Error Internal(const std::string& msg) {
  return ffi::Error(ffi::ErrorCode::kInternal, "grid_sample (ascend): " + msg);
}

inline std::string RecentErrMsg(const AclnnApi& api) {
  const char* msg = api.recent_err_msg ? api.recent_err_msg() : nullptr;
  return (msg != nullptr && msg[0] != '\0') ? std::string(msg) : std::string("(no message)");
}

// A non-zero aclnnStatus of `call` as an FFI error: name, number and
// aclGetRecentErrMsg().
inline ffi::Error StatusError(const AclnnApi& api, const char* call, aclnnStatus status) {
  return ffi::Error(ffi::ErrorCode::kInternal,
                    std::string("grid_sample (ascend): ") + call + " failed with " +
                        AclnnStatusName(status) + ": " + RecentErrMsg(api));
}

inline std::optional<int32_t> AclDataTypeOf(ffi::DataType dtype) {
  switch (dtype) {
    case ffi::DataType::F32: return kAclFloat;
    case ffi::DataType::F16: return kAclFloat16;
    case ffi::DataType::BF16: return kAclBf16;
    case ffi::DataType::F64: return kAclDouble;
    default: return std::nullopt;
  }
}

// Owns one aclTensor.
class Tensor {
 public:
  explicit Tensor(const AclnnApi& api) : api_(api) {}
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  ~Tensor() {
    if (tensor_ != nullptr) api_.destroy_tensor(tensor_);
  }

  // A contiguous (row-major) tensor of `dims` at offset 0 over `data`.
  ffi::Error Create(const std::vector<int64_t>& dims, int32_t dtype, int32_t format, void* data,
                    const char* what) {
    std::vector<int64_t> strides(dims.size(), 1);
    for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) {
      strides[i] = strides[i + 1] * dims[i + 1];
    }
    tensor_ = api_.create_tensor(dims.data(), dims.size(), dtype, strides.data(), 0, format,
                                 dims.data(), dims.size(), data);
    if (tensor_ == nullptr) {
      return Internal(std::string("aclCreateTensor returned null for ") + what + ": " +
                      RecentErrMsg(api_));
    }
    return ffi::Error::Success();
  }

  aclTensor* get() const { return tensor_; }

 private:
  const AclnnApi& api_;
  aclTensor* tensor_ = nullptr;
};

// Owns one aclBoolArray.
class BoolArray {
 public:
  explicit BoolArray(const AclnnApi& api) : api_(api) {}
  BoolArray(const BoolArray&) = delete;
  BoolArray& operator=(const BoolArray&) = delete;
  ~BoolArray() {
    if (array_ != nullptr) api_.destroy_bool_array(array_);
  }

  ffi::Error Create(const bool* values, uint64_t size) {
    array_ = api_.create_bool_array(values, size);
    if (array_ == nullptr) {
      return Internal("aclCreateBoolArray returned null: " + RecentErrMsg(api_));
    }
    return ffi::Error::Success();
  }

  const aclBoolArray* get() const { return array_; }

 private:
  const AclnnApi& api_;
  aclBoolArray* array_ = nullptr;
};

// The executor from GetWorkspaceSize: the launch consumes it (CANN executors
// are single-use); if the launch is never reached it is destroyed here when
// the library offers aclDestroyAclOpExecutor.
class Executor {
 public:
  explicit Executor(const AclnnApi& api) : api_(api) {}
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  ~Executor() {
    if (executor_ != nullptr && api_.destroy_executor != nullptr) api_.destroy_executor(executor_);
  }
  aclOpExecutor** out() { return &executor_; }
  // Hands the executor to the launch; it is not ours afterwards.
  aclOpExecutor* release() {
    aclOpExecutor* e = executor_;
    executor_ = nullptr;
    return e;
  }

 private:
  const AclnnApi& api_;
  aclOpExecutor* executor_ = nullptr;
};

// Device memory for one call: from XLA's scratch allocator where the runtime
// provides one (stream-ordered, released by XLA after the call), otherwise
// aclrtMalloc'ed and aclrtFree'd here, after synchronizing the stream when a
// kernel that may use it was launched.
class DeviceMemory {
 public:
  DeviceMemory(const AclnnApi& api, ffi::ScratchAllocator& scratch, aclrtStream stream)
      : api_(api), scratch_(scratch), stream_(stream) {}
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    if (owned_.empty()) return;
    if (launched_) api_.rt_synchronize_stream(stream_);
    for (void* p : owned_) api_.rt_free(p);
  }

  ffi::Error Allocate(uint64_t size, void** out, const char* what) {
    *out = nullptr;
    if (size == 0) return ffi::Error::Success();
    if (std::optional<void*> p = scratch_.Allocate(size, kAlignment); p.has_value() && *p) {
      *out = *p;
      return ffi::Error::Success();
    }
    void* p = nullptr;
    const aclError rc = api_.rt_malloc(&p, size, kAclMemMallocHugeFirst);
    if (rc != 0 || p == nullptr) {
      return Internal(std::string("aclrtMalloc of ") + std::to_string(size) + " bytes for " +
                      what + " failed with aclError " + std::to_string(rc) + ": " +
                      RecentErrMsg(api_));
    }
    owned_.push_back(p);
    *out = p;
    return ffi::Error::Success();
  }

  // Called right before a launch: from then on, freeing waits for the stream.
  void MarkLaunched() { launched_ = true; }

 private:
  static constexpr size_t kAlignment = 512;
  const AclnnApi& api_;
  ffi::ScratchAllocator& scratch_;
  aclrtStream stream_;
  std::vector<void*> owned_;
  bool launched_ = false;
};

// The second phase of every aclnn call: workspace of the size the first phase
// asked for, then the launch, which consumes the executor. `launch_name` names
// the launch function in errors.
inline ffi::Error AllocateAndLaunch(const AclnnApi& api, DeviceMemory& memory, Executor& executor,
                                    LaunchFn launch, const char* launch_name,
                                    uint64_t workspace_size, aclrtStream stream) {
  void* workspace = nullptr;
  if (ffi::Error e = memory.Allocate(workspace_size, &workspace, "the aclnn workspace");
      e.failure()) {
    return e;
  }
  memory.MarkLaunched();
  const aclnnStatus status = launch(workspace, workspace_size, executor.release(), stream);
  if (status != kAclnnSuccess) return StatusError(api, launch_name, status);
  return ffi::Error::Success();
}

// Sets ACL_OPT_DETERMINISTIC to 1 through `get`/`set` unless it already is 1.
inline ffi::Error RaiseToDeterministic(const AclnnApi& api, GetSysParamOptFn get,
                                       SetSysParamOptFn set, const char* set_name) {
  int64_t current = 0;
  // An option never set reads as an error (107021): it is 0 then.
  if (get(kAclOptDeterministic, &current) == 0 && current == 1) return ffi::Error::Success();
  const aclError rc = set(kAclOptDeterministic, 1);
  if (rc != 0) {
    return Internal(std::string(set_name) + "(ACL_OPT_DETERMINISTIC, 1) failed with aclError " +
                    std::to_string(rc) + ": " + RecentErrMsg(api));
  }
  return ffi::Error::Success();
}

// Makes aclnn deterministic from now on: ACL_OPT_DETERMINISTIC = 1 in the
// current context (which the grid sampler's op code reads) and, where the
// runtime has it, for the process (which opbase reads when it picks kernels;
// torch_npu sets both too). Each is set only if it is not 1 already, and
// never switched back: the options are context- or process-wide, so
// restoring them after the call would race with other threads' calls, and
// CANN advises setting them once. The price: after the first deterministic
// call, the non-deterministic ones run the deterministic kernels too.
inline ffi::Error EnsureDeterministic(const AclnnApi& api) {
  if (ffi::Error e = RaiseToDeterministic(api, api.ctx_get_sys_param_opt,
                                          api.ctx_set_sys_param_opt, "aclrtCtxSetSysParamOpt");
      e.failure()) {
    return e;
  }
  if (api.get_sys_param_opt == nullptr || api.set_sys_param_opt == nullptr) {
    return ffi::Error::Success();
  }
  return RaiseToDeterministic(api, api.get_sys_param_opt, api.set_sys_param_opt,
                              "aclrtSetSysParamOpt");
}

inline ffi::Error FailedPrecondition(const std::string& msg) {
  return ffi::Error(ffi::ErrorCode::kFailedPrecondition, "grid_sample (ascend): " + msg);
}

// The kernels launch only on the stream XLA gives the call: ACL's default
// stream (null) would run unordered with XLA's own work on the device.
inline ffi::Error RequireStream(aclrtStream stream) {
  if (stream != nullptr) return ffi::Error::Success();
  return FailedPrecondition(
      "the runtime gave this call no device stream (XLA_FFI_Stream_Get), so the aclnn "
      "kernels cannot be ordered with XLA's work; they run only under an Ascend PJRT plugin "
      "that provides its stream. Use implementation=\"reference\" to run the jax.numpy "
      "reference instead.");
}

// aclnn runs in the ACL context current on the calling thread; without one
// every ACL call fails, so say so plainly before making any.
inline ffi::Error RequireContext(const AclnnApi& api) {
  void* context = nullptr;
  const aclError rc = api.get_current_context(&context);
  if (rc == 0 && context != nullptr) return ffi::Error::Success();
  return FailedPrecondition(
      "no ACL context is current on the thread running this call (aclrtGetCurrentContext "
      "returned aclError " + std::to_string(rc) + "); the Ascend PJRT plugin must make its "
      "device's context current before running custom calls. Use "
      "implementation=\"reference\" to run the jax.numpy reference instead.");
}

// Zeros `bytes` of device memory at `data` on `stream` (nothing for 0 bytes).
inline ffi::Error ZeroOnStream(const AclnnApi& api, void* data, size_t bytes, aclrtStream stream,
                               const char* what) {
  if (bytes == 0) return ffi::Error::Success();
  const aclError rc = api.memset_async(data, bytes, 0, bytes, stream);
  if (rc != 0) {
    return Internal(std::string("aclrtMemsetAsync of ") + what + " failed with aclError " +
                    std::to_string(rc) + ": " + RecentErrMsg(api));
  }
  return ffi::Error::Success();
}

// The sampled plane's element count (H*W, or D*H*W in 3D) must stay below
// INT32_MAX, as the aclnn forward documents.
inline ffi::Error CheckPlaneLimit(const ffi::AnyBuffer& input) {
  auto dims = input.dimensions();
  int64_t plane = 1;
  for (size_t i = 2; i < dims.size(); ++i) plane *= dims[i];
  if (plane < INT32_MAX) return ffi::Error::Success();
  return InvalidArgument("the input's spatial size (H*W, or D*H*W in 3D) is " +
                         std::to_string(plane) + ", but aclnn takes at most 2147483646; " +
                         "use implementation=\"reference\" (\"auto\" does so)");
}

inline std::vector<int64_t> DimsOf(const ffi::AnyBuffer& buffer) {
  auto dims = buffer.dimensions();
  return std::vector<int64_t>(dims.begin(), dims.end());
}

// Loads the API or returns the loader's error.
inline ffi::ErrorOr<const AclnnApi*> RequireApi() {
  std::string error;
  const AclnnApi* api = LoadAclnnApi(&error);
  if (api == nullptr) {
    return ffi::Unexpected(ffi::Error(ffi::ErrorCode::kFailedPrecondition, error));
  }
  return api;
}

// What every call needs before its first aclnn call: the stream XLA gave it,
// the libraries, and a current ACL context.
inline ffi::ErrorOr<const AclnnApi*> PrepareCall(aclrtStream stream) {
  if (ffi::Error e = RequireStream(stream); e.failure()) return ffi::Unexpected(e);
  auto api = RequireApi();
  if (api.has_error()) return api;
  if (ffi::Error e = RequireContext(*api.value()); e.failure()) return ffi::Unexpected(e);
  return api;
}

// The stream handle a test-only handler takes as its "test_stream" attribute.
inline aclrtStream TestStream(int64_t handle) {
  return reinterpret_cast<aclrtStream>(static_cast<intptr_t>(handle));
}

// Checks shared by forward and backward: rank, dtype, modes, layout.
inline ffi::Error CheckCommon(const ffi::AnyBuffer& input, const ffi::AnyBuffer& grid,
                              int64_t interpolation, int64_t padding, bool channels_last) {
  if (channels_last) {
    return InvalidArgument(
        "the aclnn kernels take channels-first input only (NCHW / NCDHW); channels-last "
        "layouts run on the reference lowering");
  }
  const size_t rank = input.dimensions().size();
  if ((rank != 4 && rank != 5) || grid.dimensions().size() != rank) {
    return InvalidArgument("input and grid must both be 4-D (2D) or 5-D (3D)");
  }
  if (!AclDataTypeOf(input.element_type()).has_value()) {
    return InvalidArgument("unsupported dtype: aclnn takes float32, float16, bfloat16, float64");
  }
  if (grid.element_type() != input.element_type()) {
    return InvalidArgument("grid must have the input's dtype");
  }
  if (interpolation < 0 || interpolation > 2 || (rank == 5 && interpolation == 2)) {
    return InvalidArgument("unsupported interpolation mode " + std::to_string(interpolation));
  }
  if (padding < 0 || padding > 2) {
    return InvalidArgument("unsupported padding mode " + std::to_string(padding));
  }
  return ffi::Error::Success();
}

// The formats the API pages list: every 2D tensor ND; 3D feature maps NCDHW;
// the 3D forward's grid ND and the 3D backward's grid and grid gradient NDHWC
// (their coordinate axis is last). Only the feature maps' format changes how
// ops-cv reads the shapes (NDHWC would make it take C from the last axis).
inline int32_t FeatureFormat(size_t rank) { return rank == 5 ? kAclFormatNCDHW : kAclFormatND; }
inline int32_t GridFormat(size_t rank, bool backward) {
  return rank == 5 && backward ? kAclFormatNDHWC : kAclFormatND;
}

}  // namespace gs_ascend

#endif  // JAX_GRIDSAMPLE_FFI_ASCEND_ACLNN_CALL_H_
