#include "workspace.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "aclnn_call.h"

namespace gs_ascend {
namespace {

namespace ffi = xla::ffi;

struct CachedBuffer {
  void* data = nullptr;
  uint64_t size = 0;
};

// The stream cache: one buffer per (library, stream), never freed before the
// process exits (the runtime gives no notice when a stream is destroyed).
std::mutex g_cache_mutex;
std::map<std::pair<const AclnnApi*, aclrtStream>, CachedBuffer> g_cache;  // guarded

std::atomic<int64_t> g_cache_calls{0};
std::atomic<int64_t> g_none_calls{0};

ffi::Error RuntimeError(const AclnnApi& api, const std::string& what, aclError rc) {
  return Internal(what + " failed with aclError " + std::to_string(rc) + ": " +
                  RecentErrMsg(api));
}

}  // namespace

ffi::Error Workspace::Allocate(const AclnnApi& api, aclrtStream stream, uint64_t size) {
  data_ = nullptr;
  if (size == 0) {
    ++g_none_calls;
    return ffi::Error::Success();
  }
  cache_lock_ = std::unique_lock<std::mutex>(g_cache_mutex);
  CachedBuffer& buffer = g_cache[{&api, stream}];
  if (buffer.size < size) {
    if (buffer.data != nullptr) {
      // Kernels queued earlier on this stream may still use the old buffer.
      if (const aclError rc = api.rt_synchronize_stream(stream); rc != 0) {
        return RuntimeError(api, "aclrtSynchronizeStream before growing the workspace", rc);
      }
      const aclError rc = api.rt_free(buffer.data);
      buffer = CachedBuffer{};
      if (rc != 0) return RuntimeError(api, "aclrtFree of the old workspace", rc);
    }
    void* p = nullptr;
    const aclError rc = api.rt_malloc(&p, size, kAclMemMallocHugeFirst);
    if (rc != 0 || p == nullptr) {
      return Error(ffi::ErrorCode::kResourceExhausted,
                   "aclrtMalloc of " + std::to_string(size) +
                       " bytes for the aclnn workspace failed with aclError " +
                       std::to_string(rc) + ": " + RecentErrMsg(api));
    }
    buffer = CachedBuffer{p, size};
  }
  data_ = buffer.data;
  ++g_cache_calls;
  return ffi::Error::Success();
}

WorkspaceCounts WorkspacePaths() {
  WorkspaceCounts counts;
  counts.stream_cache = g_cache_calls.load();
  counts.none = g_none_calls.load();
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  for (const auto& entry : g_cache) {
    counts.cached_buffers += entry.second.data != nullptr;
    counts.cached_bytes += entry.second.size;
  }
  return counts;
}

}  // namespace gs_ascend
