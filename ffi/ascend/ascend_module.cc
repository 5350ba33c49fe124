// nanobind module jax_gridsample._ascend_kernels: the Ascend handlers as capsules.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>

#include "../common/ffi_registrations.h"
#include "aclnn_api.h"
#include "grid_sample_ascend.h"

namespace nb = nanobind;

NB_MODULE(_ascend_kernels, m) {
  m.doc() = "XLA FFI handlers calling CANN's aclnnGridSampler2D/3D[Backward] (dlopen'ed).";
  m.def("registrations", []() {
    return gs::FfiRegistrations(
        {{"jax_gridsample_ascend_forward_v1", JaxGridSampleAscendForward},
         {"jax_gridsample_ascend_backward_v1", JaxGridSampleAscendBackward}});
  });
  m.def("test_registrations", []() {
    return gs::FfiRegistrations(
        {{"jax_gridsample_ascend_forward_on_test_stream", JaxGridSampleAscendForwardOnTestStream},
         {"jax_gridsample_ascend_backward_on_test_stream",
          JaxGridSampleAscendBackwardOnTestStream}});
  }, "For the tests only: the handlers with the stream passed as the int64 attribute "
     "\"test_stream\", to run on the CPU client against a simulated aclnn.");
  m.def("soc_name", []() { return gs_ascend::SocName(); },
        "aclrtGetSocName() (e.g. \"Ascend910B2\"), or \"\" when CANN cannot tell.");
  m.def("library_status", []() { return gs_ascend::AclnnApiStatus(); },
        "Whether the CANN libraries were loaded yet, and from where.");
  m.def("load_libraries", []() {
    std::string error;
    if (gs_ascend::LoadAclnnApi(&error) == nullptr) throw std::runtime_error(error);
    return gs_ascend::AclnnApiStatus();
  }, "Load the CANN libraries now (normally on first use); raises with the loader's message.");
  m.attr("LIBRARIES_ENV_VAR") = gs_ascend::kLibrariesEnvVar;
  m.attr("DEFAULT_LIBRARIES") = gs_ascend::kDefaultLibraries;
}
