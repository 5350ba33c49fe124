// nanobind module jax_gridsample._ascend_kernels: the Ascend handlers as capsules.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "../common/ffi_registrations.h"
#include "aclnn_api.h"
#include "determinism.h"
#include "environment.h"
#include "grid_sample_ascend.h"
#include "probe.h"
#include "workspace.h"

namespace nb = nanobind;

namespace {

const char* DtypeName(int32_t dtype) {
  switch (dtype) {
    case gs_ascend::kAclFloat: return "float32";
    case gs_ascend::kAclFloat16: return "float16";
    case gs_ascend::kAclBf16: return "bfloat16";
    case gs_ascend::kAclDouble: return "float64";
    default: return "unknown";
  }
}

}  // namespace

NB_MODULE(_ascend_kernels, m) {
  m.doc() = "XLA FFI handlers calling CANN's aclnnGridSampler2D/3D[Backward] (dlopen'ed).";
  m.def("registrations", []() {
    return gs::FfiRegistrations(
        {{"jax_gridsample_ascend_forward_v1", JaxGridSampleAscendForward},
         {"jax_gridsample_ascend_backward_v1", JaxGridSampleAscendBackward},
         {"jax_gridsample_ascend_probe", JaxGridSampleAscendProbe},
         {"jax_gridsample_ascend_environment", JaxGridSampleAscendEnvironment}});
  });
  m.def("test_registrations", []() {
    return gs::FfiRegistrations(
        {{"jax_gridsample_ascend_forward_on_test_stream", JaxGridSampleAscendForwardOnTestStream},
         {"jax_gridsample_ascend_backward_on_test_stream",
          JaxGridSampleAscendBackwardOnTestStream},
         {"jax_gridsample_ascend_probe_on_test_stream", JaxGridSampleAscendProbeOnTestStream},
         {"jax_gridsample_ascend_environment_on_test_stream",
          JaxGridSampleAscendEnvironmentOnTestStream}});
  }, "For the tests only: the handlers with the stream passed as the int64 attribute "
     "\"test_stream\", to run on the CPU client against a simulated aclnn.");
  m.def("probe_cases", []() {
    nb::list cases;
    for (const gs_ascend::ProbeCase& c : gs_ascend::ProbeCases()) {
      cases.append(nb::make_tuple(c.backward, c.k, DtypeName(c.dtype), c.interpolation,
                                  c.channels));
    }
    return cases;
  }, "The support probe's cases, in order: (backward, k, dtype, interpolation, channels).");
  m.def("probe_report", [](int device_ordinal) -> nb::object {
    std::optional<gs_ascend::ProbeReport> report = gs_ascend::LastProbeReport(device_ordinal);
    if (!report.has_value()) return nb::none();
    nb::list results;
    for (const gs_ascend::ProbeResult& r : report->results) {
      results.append(nb::make_tuple(r.status, r.message));
    }
    nb::dict d;
    d["soc_name"] = report->soc_name;
    d["cann_version"] = report->cann_version;
    d["results"] = results;
    return d;
  }, nb::arg("device_ordinal"),
     "The last support probe's report for a device ({soc_name, cann_version, results: "
     "[(aclnnStatus, message)] in probe_cases() order}), or None.");
  m.def("environment_report", [](std::optional<int> device_ordinal) -> nb::object {
    std::optional<gs_ascend::EnvironmentReport> report =
        gs_ascend::LastEnvironmentReport(device_ordinal);
    if (!report.has_value()) return nb::none();
    nb::dict d;
    d["stream"] = report->stream;
    d["device_ordinal"] = report->device_ordinal;
    d["libraries_loaded"] = report->libraries_loaded;
    d["libraries"] = report->libraries;
    d["context_status"] = report->context_status;
    d["context"] = report->context;
    d["get_device_available"] = report->get_device_available;
    d["get_device_status"] = report->get_device_status;
    d["acl_device"] = report->acl_device;
    d["stream_status"] = report->stream_status;
    return d;
  }, nb::arg("device_ordinal") = nb::none(),
     "What the environment target last found the runtime gives a custom call on a device (the "
     "last of any device for None): {stream, device_ordinal, libraries_loaded, libraries, "
     "context_status, context, get_device_available, get_device_status, acl_device, "
     "stream_status}, aclErrors None where not asked; or None.");
  m.def("soc_name", []() { return gs_ascend::SocName(); },
        "aclrtGetSocName() (e.g. \"Ascend910B2\"), or \"\" when CANN cannot tell.");
  m.def("cann_version", []() { return gs_ascend::CannVersion(); },
        "aclsysGetCANNVersion() (e.g. \"8.1.RC1\"), or \"\" when CANN cannot tell.");
  m.def("workspace_paths", []() {
    const gs_ascend::WorkspaceCounts counts = gs_ascend::WorkspacePaths();
    nb::dict d;
    d["stream_cache"] = counts.stream_cache;
    d["none"] = counts.none;
    d["cached_buffers"] = counts.cached_buffers;
    d["cached_bytes"] = counts.cached_bytes;
    return d;
  }, "How many calls took their aclnn workspace from the per-stream cache or needed none; "
     "and the cache's buffers and bytes.");
  m.def("library_status", []() { return gs_ascend::AclnnApiStatus(); },
        "Whether the CANN libraries were loaded yet, and from where.");
  m.def("load_libraries", []() {
    std::string error;
    if (gs_ascend::LoadAclnnApi(&error) == nullptr) throw std::runtime_error(error);
    return gs_ascend::AclnnApiStatus();
  }, "Load the CANN libraries now (normally on first use); raises with the loader's message.");
  m.def("deterministic_level", []() -> nb::tuple {
    std::string error;
    const int level = gs_ascend::StartupDeterminismLevel(&error);
    return nb::make_tuple(level, error);
  }, "(level, error): the start-up level of JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC the handlers "
     "apply (1, or 0 when unset), or (-1, why) for a value they refuse; read once.");
  m.def("reread_environment", []() {
    gs_ascend::RereadEnvironment();
    gs_ascend::ForgetAppliedDeterminism();
  }, "For the tests only: read JAX_GRIDSAMPLE_ACLNN_LIBS and JAX_GRIDSAMPLE_ASCEND_DETERMINISTIC "
     "again (the handlers read them once) and apply the start-up level afresh.");
  m.attr("LIBRARIES_ENV_VAR") = gs_ascend::kLibrariesEnvVar;
  m.attr("DEFAULT_LIBRARIES") = gs_ascend::kDefaultLibraries;
  m.attr("DETERMINISTIC_ENV_VAR") = gs_ascend::kDeterministicEnvVar;
}
