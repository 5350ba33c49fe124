// Device memory for the aclnn workspace of one call: a buffer per stream,
// cached for the process. It is aclrtMalloc'ed the first time a call on that
// stream needs one and reused by every later call on it (their kernels run in
// stream order, so reuse is safe), and grown when a call needs more, after
// synchronizing the stream so that no queued kernel still uses the old one.
// Every runtime status is checked. The buffers are never freed before the
// process exits (the runtime gives no notice when a stream is destroyed): each
// stream keeps the largest workspace any of its calls asked for.
//
// XLA's scratch allocator is not used: it aligns to at most 16 bytes
// (xla/ffi/ffi_api.cc, kMaxAlignment), and no runtime the tests can run gives
// custom calls a device allocator, so that path could never be tested.
//
// WorkspacePaths() counts the calls, for the acceptance report.
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
  xla::ffi::Error Allocate(const AclnnApi& api, aclrtStream stream, uint64_t size);
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  std::unique_lock<std::mutex> cache_lock_;
};

// How many calls took their workspace from the stream cache or needed none,
// and the cache's buffers.
struct WorkspaceCounts {
  int64_t stream_cache = 0;
  int64_t none = 0;
  int64_t cached_buffers = 0;
  uint64_t cached_bytes = 0;
};
WorkspaceCounts WorkspacePaths();

}  // namespace gs_ascend

#endif  // JAX_GRIDSAMPLE_FFI_ASCEND_WORKSPACE_H_
