// What the installed CANN takes: the support probe's cases and its report.
//
// The probe handler (grid_sample_ascend_probe.cc) runs on the device's own
// thread, in its ACL context, and asks each aclnn grid sampler entry point's
// first phase (GetWorkspaceSize) about one small call per case, with tensors
// that have no data (as nnopbase's aclSetAclOpExecutorRepeatable.md example
// does); nothing is launched. The Python side turns the statuses into the
// routing of "auto" (jax_gridsample/_ascend.py).
#ifndef JAX_GRIDSAMPLE_FFI_ASCEND_PROBE_H_
#define JAX_GRIDSAMPLE_FFI_ASCEND_PROBE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gs_ascend {

struct ProbeCase {
  bool backward;
  int k;              // spatial rank: 2 or 3
  int32_t dtype;      // aclDataType
  int64_t interpolation;
  int64_t channels;   // 1, or more than the AICore kernels take (other routes)
};

struct ProbeResult {
  int32_t status;     // aclnnStatus of the first phase
  std::string message;  // aclGetRecentErrMsg() when it failed
};

struct ProbeReport {
  std::string soc_name;
  std::string cann_version;
  std::vector<ProbeResult> results;  // one per ProbeCases() entry, in order
};

// Every case, in a fixed order.
const std::vector<ProbeCase>& ProbeCases();

// The report of the last probe run on a device, if any.
std::optional<ProbeReport> LastProbeReport(int32_t device_ordinal);

// Stores a report (the probe handler does, after each run).
void StoreProbeReport(int32_t device_ordinal, ProbeReport report);

}  // namespace gs_ascend

#endif  // JAX_GRIDSAMPLE_FFI_ASCEND_PROBE_H_
