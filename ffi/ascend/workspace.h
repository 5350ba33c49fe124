// Device memory for the aclnn workspace of one call, and which of the two
// ways it came about.
//
// 1. XLA's scratch allocator, where the runtime gives one. XLA frees that
//    memory when the handler returns, while the kernel may still be queued on
//    the stream: this is safe only because a PJRT plugin's allocator is
//    stream-ordered (the memory is reused only by work queued after ours on
//    the same stream), as XLA's GPU runtime's is. docs/ascend.md says so.
// 2. Otherwise a buffer per stream, cached for the process: aclrtMalloc'ed
//    the first time a call on that stream needs one and reused by every later
//    call on it (their kernels run in stream order, so reuse is safe); grown
//    when a call needs more, after synchronizing the stream so that no queued
//    kernel still uses the old one. Every runtime status is checked.
//
// WorkspacePaths() counts the calls each way went, for the acceptance report.
#ifndef JAX_GRIDSAMPLE_FFI_ASCEND_WORKSPACE_H_
#define JAX_GRIDSAMPLE_FFI_ASCEND_WORKSPACE_H_

#include <cstdint>
#include <mutex>

#include "aclnn_api.h"
#include "xla/ffi/api/ffi.h"

namespace gs_ascend {

// The workspace of one call. Hold it until the launch has been queued: the
// stream cache's lock is held meanwhile, so that no other call grows (and
// frees) the buffer between this call's allocation and its launch.
class Workspace {
 public:
  Workspace() = default;
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  // Memory of `size` bytes for a kernel queued on `stream` (null for 0).
  xla::ffi::Error Allocate(const AclnnApi& api, xla::ffi::ScratchAllocator& scratch,
                           aclrtStream stream, uint64_t size);
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  std::unique_lock<std::mutex> cache_lock_;
};

// How many calls took each path (none: the call asked for no workspace), and
// the stream cache's buffers.
struct WorkspaceCounts {
  int64_t scratch = 0;
  int64_t stream_cache = 0;
  int64_t none = 0;
  int64_t cached_buffers = 0;
  uint64_t cached_bytes = 0;
};
WorkspaceCounts WorkspacePaths();

}  // namespace gs_ascend

#endif  // JAX_GRIDSAMPLE_FFI_ASCEND_WORKSPACE_H_
