// The Ascend (aclnn) XLA FFI handlers and the stream they launch on.
#ifndef JAX_GRIDSAMPLE_FFI_ASCEND_GRID_SAMPLE_ASCEND_H_
#define JAX_GRIDSAMPLE_FFI_ASCEND_GRID_SAMPLE_ASCEND_H_

#include <cstdint>
#include <optional>
#include <string>

#include "aclnn_api.h"
#include "xla/ffi/api/ffi.h"

namespace gs_ascend {
// What error messages name the platform ("grid_sample (ascend): ...").
inline constexpr const char* kPlatform = "ascend";

// The device stream (aclrtStream is a void*) of the PJRT plugin running the
// call: what xla::ffi::PlatformStream<aclrtStream> decodes, except that a
// runtime without streams decodes to null instead of failing to decode, so
// that the handler can refuse the call with a message that says what is
// missing (RequireStream) rather than XLA's generic decoding error.
struct AclStream {};

// What the environment handler (grid_sample_ascend_environment.cc) found the
// runtime gives a custom call; the plugin check reads it. An aclError is
// unset where it was not asked.
struct EnvironmentReport {
  bool stream = false;            // XLA_FFI_Stream_Get gave a non-null stream
  int32_t device_ordinal = -1;    // the call's XLA device ordinal
  bool libraries_loaded = false;  // the CANN libraries loaded
  std::string libraries;          // AclnnApiStatus(), or the loader's error
  std::optional<aclError> context_status;     // aclrtGetCurrentContext
  bool context = false;                       // ... returned 0 and a context
  bool get_device_available = false;          // this CANN has aclrtGetDevice
  std::optional<aclError> get_device_status;  // aclrtGetDevice
  std::optional<int32_t> acl_device;          // ... its answer
  // aclrtSynchronizeStream of the call's stream: asked only when there is
  // one and the current context is on the call's device.
  std::optional<aclError> stream_status;
};

// The last environment report for a device ordinal, or the last of any
// device for nullopt; nullopt when there is none.
std::optional<EnvironmentReport> LastEnvironmentReport(std::optional<int32_t> device_ordinal);
}  // namespace gs_ascend

namespace xla::ffi {
template <>
struct CtxDecoding<gs_ascend::AclStream> {
  using Type = gs_ascend::aclrtStream;

  static std::optional<Type> Decode(const XLA_FFI_Api* api, XLA_FFI_ExecutionContext* ctx,
                                    DiagnosticEngine&) {
    XLA_FFI_Stream_Get_Args args;
    args.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
    args.extension_start = nullptr;
    args.ctx = ctx;
    args.stream = nullptr;
    if (XLA_FFI_Error* error = api->XLA_FFI_Stream_Get(&args)) {
      XLA_FFI_Error_Destroy_Args destroy;
      destroy.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
      destroy.extension_start = nullptr;
      destroy.error = error;
      api->XLA_FFI_Error_Destroy(&destroy);
      return Type{nullptr};
    }
    return reinterpret_cast<Type>(args.stream);
  }
};
}  // namespace xla::ffi

XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxGridSampleAscendForward);
XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxGridSampleAscendBackward);
// The support probe (probe.h).
XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxGridSampleAscendProbe);
// What the runtime gives a custom call (EnvironmentReport).
XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxGridSampleAscendEnvironment);

// For the tests only: the same handlers with the stream given as an int64
// attribute "test_stream" instead of taken from the runtime, so that the CPU
// client (which has no device stream) can run them against a simulated aclnn
// that hands out and checks stream handles. The Python package never
// registers these; the tests do, through the module's test_registrations().
XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxGridSampleAscendForwardOnTestStream);
XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxGridSampleAscendBackwardOnTestStream);
XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxGridSampleAscendProbeOnTestStream);
XLA_FFI_DECLARE_HANDLER_SYMBOL(JaxGridSampleAscendEnvironmentOnTestStream);

#endif  // JAX_GRIDSAMPLE_FFI_ASCEND_GRID_SAMPLE_ASCEND_H_
