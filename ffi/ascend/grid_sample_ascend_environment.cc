// XLA FFI handler: what the runtime gives a custom call (the plugin check,
// jax_gridsample/ascend_plugin_check.py). Unlike the kernels it refuses
// nothing: it records whether it got a stream, its device ordinal, whether
// the CANN libraries load, whether an ACL context is current and on which
// device, and whether ACL takes the stream, into a per-ordinal report
// (LastEnvironmentReport). Its one result, a byte, is never written.
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "../common/handler_exceptions.h"
#include "aclnn_api.h"
#include "aclnn_call.h"
#include "grid_sample_ascend.h"
#include "xla/ffi/api/ffi.h"

namespace gs_ascend {
namespace {

std::mutex g_reports_mutex;
std::map<int32_t, EnvironmentReport> g_reports;  // guarded by g_reports_mutex
std::optional<EnvironmentReport> g_last;         // guarded by g_reports_mutex

void StoreEnvironmentReport(EnvironmentReport report) {
  std::lock_guard<std::mutex> lock(g_reports_mutex);
  g_reports[report.device_ordinal] = report;
  g_last = std::move(report);
}

// What the ACL runtime says on this thread: its context, the context's
// device, and (only on the call's own device, where a kernel would launch)
// whether it takes the stream.
void AskAcl(const AclnnApi& api, aclrtStream stream, EnvironmentReport& report) {
  void* context = nullptr;
  report.context_status = api.get_current_context(&context);
  report.context = *report.context_status == 0 && context != nullptr;
  report.get_device_available = api.get_device != nullptr;
  bool on_call_device = report.context && api.get_device == nullptr;
  if (api.get_device != nullptr) {
    int32_t device = -1;
    report.get_device_status = api.get_device(&device);
    if (*report.get_device_status == 0) {
      report.acl_device = device;
      on_call_device = report.context && device == report.device_ordinal;
    }
  }
  if (stream != nullptr && on_call_device) {
    report.stream_status = api.rt_synchronize_stream(stream);
  }
}

ffi::Error EnvironmentImpl(aclrtStream stream, int32_t device_ordinal,
                           ffi::Result<ffi::AnyBuffer> /*unused*/) {
  EnvironmentReport report;
  report.stream = stream != nullptr;
  report.device_ordinal = device_ordinal;
  std::string error;
  const AclnnApi* api = LoadAclnnApi(&error);
  report.libraries_loaded = api != nullptr;
  report.libraries = api != nullptr ? AclnnApiStatus() : error;
  if (api != nullptr) AskAcl(*api, stream, report);
  StoreEnvironmentReport(std::move(report));
  return ffi::Error::Success();
}

ffi::Error EnvironmentOnTestStream(int32_t device_ordinal, ffi::Result<ffi::AnyBuffer> done,
                                   int64_t test_stream) {
  return EnvironmentImpl(TestStream(test_stream), device_ordinal, done);
}

}  // namespace

std::optional<EnvironmentReport> LastEnvironmentReport(std::optional<int32_t> device_ordinal) {
  std::lock_guard<std::mutex> lock(g_reports_mutex);
  if (!device_ordinal.has_value()) return g_last;
  auto it = g_reports.find(*device_ordinal);
  if (it == g_reports.end()) return std::nullopt;
  return it->second;
}

}  // namespace gs_ascend

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxGridSampleAscendEnvironment,
    (gs_ffi::NoExceptions<gs_ascend::kPlatform, gs_ascend::EnvironmentImpl>::Call),
    xla::ffi::Ffi::Bind()
        .Ctx<gs_ascend::AclStream>()
        .Ctx<xla::ffi::DeviceOrdinal>()
        .Ret<xla::ffi::AnyBuffer>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxGridSampleAscendEnvironmentOnTestStream,
    (gs_ffi::NoExceptions<gs_ascend::kPlatform, gs_ascend::EnvironmentOnTestStream>::Call),
    xla::ffi::Ffi::Bind()
        .Ctx<xla::ffi::DeviceOrdinal>()
        .Ret<xla::ffi::AnyBuffer>()
        .Attr<int64_t>("test_stream"));
