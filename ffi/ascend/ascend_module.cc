// nanobind module jax_gridsample._ascend_kernels: the Ascend handlers as capsules.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>

#include "aclnn_api.h"
#include "grid_sample_ascend.h"

namespace nb = nanobind;

namespace {

template <typename Fn>
nb::capsule Capsule(Fn* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}

}  // namespace

NB_MODULE(_ascend_kernels, m) {
  m.doc() = "XLA FFI handlers calling CANN's aclnnGridSampler2D/3D[Backward] (dlopen'ed).";
  m.def("registrations", []() {
    nb::dict d;
    d["jax_gridsample_ascend_forward"] = Capsule(JaxGridSampleAscendForward);
    d["jax_gridsample_ascend_backward"] = Capsule(JaxGridSampleAscendBackward);
    return d;
  });
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
