// Pieces shared by the Ascend handlers: errors, dtype mapping, the checks made
// before CANN is called, and RAII owners for everything a call creates
// (aclTensor, aclBoolArray, the executor until it is launched), so that every
// path, errors included, releases it all. The workspace is in workspace.h and
// the determinism option in determinism.h.
#ifndef JAX_GRIDSAMPLE_FFI_ASCEND_ACLNN_CALL_H_
#define JAX_GRIDSAMPLE_FFI_ASCEND_ACLNN_CALL_H_

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aclnn_api.h"
#include "determinism.h"
#include "xla/ffi/api/ffi.h"

namespace gs_ascend {

namespace ffi = xla::ffi;

inline ffi::Error Error(ffi::ErrorCode code, const std::string& msg) {
  return ffi::Error(code, "grid_sample (ascend): " + msg);
}

inline ffi::Error InvalidArgument(const std::string& msg) {
  return Error(ffi::ErrorCode::kInvalidArgument, msg);
}

inline ffi::Error Internal(const std::string& msg) {
  return Error(ffi::ErrorCode::kInternal, msg);
}

inline ffi::Error FailedPrecondition(const std::string& msg) {
  return Error(ffi::ErrorCode::kFailedPrecondition, msg);
}

inline std::string RecentErrMsg(const AclnnApi& api) {
  const char* msg = api.recent_err_msg ? api.recent_err_msg() : nullptr;
  return (msg != nullptr && msg[0] != '\0') ? std::string(msg) : std::string("(no message)");
}

// A non-zero aclnnStatus of `call` as an FFI error: name, number and
// aclGetRecentErrMsg(). The parameter errors (161001 null pointer, 161002
// invalid parameter) are the caller's: kInvalidArgument; the rest kInternal.
inline ffi::Error StatusError(const AclnnApi& api, const char* call, aclnnStatus status) {
  const bool parameter = status == kAclnnErrParamNullptr || status == kAclnnErrParamInvalid;
  return Error(parameter ? ffi::ErrorCode::kInvalidArgument : ffi::ErrorCode::kInternal,
               std::string(call) + " failed with " + AclnnStatusName(status) + ": " +
                   RecentErrMsg(api));
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

// The executor from GetWorkspaceSize. A launch consumes it: CANN destroys a
// non-repeatable executor in the second phase (aclDestroyAclOpExecutor.md),
// so it is never destroyed here. One that is never launched (a failed
// workspace allocation, a support probe) is made repeatable and destroyed,
// the lifecycle nnopbase documents for executors the caller manages
// (aclSetAclOpExecutorRepeatable.md). An executor that opbase's op cache
// handed out (a wrapper of a cached one) cannot be made repeatable
// (aclSetAclOpExecutorRepeatable returns ACLNN_ERR_INNER for it, opbase
// acl_op_api.cpp:476-488), but aclDestroyAclOpExecutor deletes it
// (acl_op_api.cpp:501-504), as the second phase does on its error path
// (op_executor.cpp, DeleteExecutorForError): so it is destroyed either way.
// Where CANN lacks those two calls it is left to CANN.
class Executor {
 public:
  explicit Executor(const AclnnApi& api) : api_(api) {}
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  ~Executor() {
    if (executor_ == nullptr || api_.set_executor_repeatable == nullptr ||
        api_.destroy_executor == nullptr) {
      return;
    }
    api_.set_executor_repeatable(executor_);  // fails for a cache wrapper: destroyed all the same
    api_.destroy_executor(executor_);
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

// The second phase of every aclnn call: the launch on `stream`, which
// consumes the executor. `launch_name` names the launch function in errors.
inline ffi::Error Launch(const AclnnApi& api, Executor& executor, LaunchFn launch,
                         const char* launch_name, void* workspace, uint64_t workspace_size,
                         aclrtStream stream) {
  const aclnnStatus status = launch(workspace, workspace_size, executor.release(), stream);
  if (status != kAclnnSuccess) return StatusError(api, launch_name, status);
  return ffi::Error::Success();
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

// The product of `dims` from `first` on, saturating at INT64_MAX (an empty
// tensor may have huge dimensions besides its zero one).
inline int64_t SaturatingProduct(ffi::Span<const int64_t> dims, size_t first) {
  int64_t product = 1;
  for (size_t i = first; i < dims.size(); ++i) {
    if (__builtin_mul_overflow(product, dims[i], &product)) return INT64_MAX;
  }
  return product;
}

// The sampled plane's element count (H*W, or D*H*W in 3D) must stay below
// INT32_MAX, as the aclnn forward's API pages document.
inline ffi::Error CheckPlaneLimit(const ffi::AnyBuffer& input) {
  const int64_t plane = SaturatingProduct(input.dimensions(), 2);
  if (plane < INT32_MAX) return ffi::Error::Success();
  return InvalidArgument("the input's spatial size (H*W, or D*H*W in 3D) is " +
                         std::to_string(plane) + ", but aclnn takes at most 2147483646; " +
                         "use implementation=\"reference\" (\"auto\" does so)");
}

// The backward kernels index in 32 bits: the 2D kernel keeps per-sample
// strides in uint32 and int32 (ops-cv grid_sampler2_d_grad.h:201-216 and
// :828-832) and forms offsets such as n*strideN + (h*W + w)*C in int32
// (:938), its tiling sizes the half-type workspace as N*C*H*W*4 with a uint32
// product (grid_sampler2_d_grad_tiling.cpp:526), and the 3D kernel uses the
// same int32 indices. So each operand, whole and
// per sample, must have at most INT32_MAX elements (checked per sample too,
// so that the bound holds whatever N is).
inline ffi::Error CheckBackwardSizeLimits(const ffi::AnyBuffer& grad_output,
                                          const ffi::AnyBuffer& input,
                                          const ffi::AnyBuffer& grid) {
  const std::pair<const char*, const ffi::AnyBuffer*> operands[] = {
      {"grad_output", &grad_output}, {"input", &input}, {"grid", &grid}};
  for (const auto& [name, buffer] : operands) {
    for (size_t first : {size_t{0}, size_t{1}}) {
      const int64_t count = SaturatingProduct(buffer->dimensions(), first);
      if (count <= INT32_MAX) continue;
      return InvalidArgument(std::string(first == 0 ? "" : "one sample of ") + name + " has " +
                             std::to_string(count) +
                             " elements, but the aclnn backward indexes in 32 bits (at most "
                             "2147483647); use implementation=\"reference\" (\"auto\" does so)");
    }
  }
  return ffi::Error::Success();
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

// The context current on this thread must be on the device XLA runs the call
// on: the stream XLA gives belongs to that device, and a kernel queued on it
// from another device's context would run there with the wrong memory.
inline ffi::Error RequireDevice(const AclnnApi& api, int32_t device_ordinal) {
  if (api.get_device == nullptr) return ffi::Error::Success();  // older CANN cannot tell
  int32_t device = -1;
  if (const aclError rc = api.get_device(&device); rc != 0) {
    return FailedPrecondition("aclrtGetDevice failed with aclError " + std::to_string(rc) +
                              ": " + RecentErrMsg(api));
  }
  if (device == device_ordinal) return ffi::Error::Success();
  return FailedPrecondition(
      "the ACL context current on the thread running this call is on device " +
      std::to_string(device) + ", but XLA runs the call on device " +
      std::to_string(device_ordinal) + "; the Ascend PJRT plugin must make that device's "
      "context current before running custom calls. Use implementation=\"reference\" to run "
      "the jax.numpy reference instead.");
}

// What every call needs before its first aclnn call: the stream XLA gave it,
// the libraries, a current ACL context on the call's device, and the start-up
// determinism level applied (determinism.h).
inline ffi::ErrorOr<const AclnnApi*> PrepareCall(aclrtStream stream, int32_t device_ordinal) {
  std::string level_error;
  const int level = StartupDeterminismLevel(&level_error);
  if (level < 0) return ffi::Unexpected(InvalidArgument(level_error));
  if (ffi::Error e = RequireStream(stream); e.failure()) return ffi::Unexpected(e);
  auto api = RequireApi();
  if (api.has_error()) return api;
  if (ffi::Error e = RequireContext(*api.value()); e.failure()) return ffi::Unexpected(e);
  if (ffi::Error e = RequireDevice(*api.value(), device_ordinal); e.failure()) {
    return ffi::Unexpected(e);
  }
  if (ffi::Error e = ApplyStartupDeterminism(*api.value(), level); e.failure()) {
    return ffi::Unexpected(e);
  }
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

// The formats of the tensors: feature maps ND in 2D and NCDHW in 3D (the
// formats ops-cv reads C from the second axis for; NDHWC would make it read C
// from the last, aclnn_grid_sampler3d_backward.cpp:122), grids ND, as CANN's
// own examples and tests send them (test_aclnn_grid_sampler3_d_backward.cpp
// creates every tensor ND) and torch_npu does.
inline int32_t FeatureFormat(size_t rank) { return rank == 5 ? kAclFormatNCDHW : kAclFormatND; }
inline constexpr int32_t kGridFormat = kAclFormatND;

}  // namespace gs_ascend

#endif  // JAX_GRIDSAMPLE_FFI_ASCEND_ACLNN_CALL_H_
