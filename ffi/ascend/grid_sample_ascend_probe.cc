// XLA FFI handler: the support probe (probe.h). Its one result, a byte, is
// zeroed; the report goes to LastProbeReport().
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../common/handler_exceptions.h"
#include "aclnn_api.h"
#include "aclnn_call.h"
#include "grid_sample_ascend.h"
#include "probe.h"
#include "xla/ffi/api/ffi.h"

namespace gs_ascend {
namespace {

std::mutex g_reports_mutex;
std::map<int32_t, ProbeReport> g_reports;  // guarded by g_reports_mutex

// The first phase of one case; the executor it hands out is released by
// Executor (repeatable, then destroyed) since it is never launched.
ProbeResult Probe(const AclnnApi& api, const ProbeCase& c) {
  const int64_t channels = c.channels;
  std::vector<int64_t> input = {1, channels, 2, 2}, grid = {1, 1, 1, 2},
                       features_out = {1, channels, 1, 1};
  if (c.k == 3) {
    input = {1, channels, 2, 2, 2};
    grid = {1, 1, 1, 1, 3};
    features_out = {1, channels, 1, 1, 1};
  }
  const int32_t feature_format = FeatureFormat(input.size());
  Tensor acl_input(api), acl_grid(api), acl_out(api), acl_input_grad(api), acl_grid_grad(api);
  BoolArray mask(api);
  Executor executor(api);
  for (auto [tensor, dims, format] :
       {std::tuple{&acl_input, &input, feature_format}, std::tuple{&acl_grid, &grid, kGridFormat},
        std::tuple{&acl_out, &features_out, feature_format},
        std::tuple{&acl_input_grad, &input, feature_format},
        std::tuple{&acl_grid_grad, &grid, kGridFormat}}) {
    if (ffi::Error e = tensor->Create(*dims, c.dtype, format, nullptr, "a probe tensor");
        e.failure()) {
      return {-1, e.message()};
    }
  }
  const bool mask_values[2] = {true, true};
  if (ffi::Error e = mask.Create(mask_values, 2); e.failure()) return {-1, e.message()};
  uint64_t workspace_size = 0;
  aclnnStatus status;
  if (c.backward) {
    const auto get_workspace = c.k == 3 ? api.grid_sampler3d_backward_workspace
                                        : api.grid_sampler2d_backward_workspace;
    status = get_workspace(acl_out.get(), acl_input.get(), acl_grid.get(), c.interpolation, 0,
                           false, mask.get(), acl_input_grad.get(), acl_grid_grad.get(),
                           &workspace_size, executor.out());
  } else {
    const auto get_workspace =
        c.k == 3 ? api.grid_sampler3d_workspace : api.grid_sampler2d_workspace;
    status = get_workspace(acl_input.get(), acl_grid.get(), c.interpolation, 0, false,
                           acl_out.get(), &workspace_size, executor.out());
  }
  return {status, status == kAclnnSuccess ? std::string() : RecentErrMsg(api)};
}

ffi::Error ProbeImpl(aclrtStream stream, int32_t device_ordinal,
                     ffi::Result<ffi::AnyBuffer> done) {
  auto api_or = PrepareCall(stream, device_ordinal);
  if (api_or.has_error()) return api_or.error();
  const AclnnApi& api = *api_or.value();
  ProbeReport report;
  report.soc_name = SocName();
  report.cann_version = CannVersion();
  for (const ProbeCase& c : ProbeCases()) report.results.push_back(Probe(api, c));
  StoreProbeReport(device_ordinal, std::move(report));
  return ZeroOnStream(api, done->untyped_data(), done->size_bytes(), stream, "the probe result");
}

ffi::Error ProbeOnTestStream(int32_t device_ordinal, ffi::Result<ffi::AnyBuffer> done,
                             int64_t test_stream) {
  return ProbeImpl(TestStream(test_stream), device_ordinal, done);
}

}  // namespace

const std::vector<ProbeCase>& ProbeCases() {
  static const std::vector<ProbeCase> cases = [] {
    std::vector<ProbeCase> all;
    for (bool backward : {false, true}) {
      for (int k : {2, 3}) {
        for (int32_t dtype : {kAclFloat, kAclFloat16, kAclBf16, kAclDouble}) {
          for (int64_t interpolation : {0, 1, 2}) {
            for (int64_t channels : {1, 2049}) {
              all.push_back({backward, k, dtype, interpolation, channels});
            }
          }
        }
      }
    }
    return all;
  }();
  return cases;
}

std::optional<ProbeReport> LastProbeReport(int32_t device_ordinal) {
  std::lock_guard<std::mutex> lock(g_reports_mutex);
  auto it = g_reports.find(device_ordinal);
  if (it == g_reports.end()) return std::nullopt;
  return it->second;
}

void StoreProbeReport(int32_t device_ordinal, ProbeReport report) {
  std::lock_guard<std::mutex> lock(g_reports_mutex);
  g_reports[device_ordinal] = std::move(report);
}

}  // namespace gs_ascend

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxGridSampleAscendProbe,
    (gs_ffi::NoExceptions<gs_ascend::kPlatform, gs_ascend::ProbeImpl>::Call),
    xla::ffi::Ffi::Bind()
        .Ctx<gs_ascend::AclStream>()
        .Ctx<xla::ffi::DeviceOrdinal>()
        .Ret<xla::ffi::AnyBuffer>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxGridSampleAscendProbeOnTestStream,
    (gs_ffi::NoExceptions<gs_ascend::kPlatform, gs_ascend::ProbeOnTestStream>::Call),
    xla::ffi::Ffi::Bind()
        .Ctx<xla::ffi::DeviceOrdinal>()
        .Ret<xla::ffi::AnyBuffer>()
        .Attr<int64_t>("test_stream"));
