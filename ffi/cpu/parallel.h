// Work splitting over the XLA FFI intra-op thread pool.
//
// ParallelFor(pool, n, f) calls f(i) once for every chunk i in [0, n).
// Chunks are claimed through an atomic counter kept in shared state; the
// calling thread claims chunks too, and then waits only until every chunk has
// COMPLETED. It never waits for a helper task to start, so a busy (or
// single-threaded) pool cannot deadlock us: if no helper ever runs, the
// caller does all the work, and helpers that start late find no chunk left and
// return without touching `f` (which may be gone by then).
//
// The caller waits first spinning (yielding its core to any other runnable
// thread) for up to 100 us, then asleep on a condition variable: a thread
// woken from one started 10-20 us late on the VMs we measured, as long as a
// whole chunk of a small call takes.
//
// How chunks map to threads never affects results: every kernel makes its
// chunking depend on shapes only and writes each output element from exactly
// one chunk, in a fixed order.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_PARALLEL_H_
#define JAX_GRIDSAMPLE_FFI_CPU_PARALLEL_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "xla/ffi/api/ffi.h"

namespace gs_cpu {

namespace detail {

struct ParallelState {
  explicit ParallelState(int64_t n, const std::function<void(int64_t)>* f)
      : num_chunks(n), fn(f) {}
  const int64_t num_chunks;
  // Valid while completed < num_chunks (the caller is still waiting then).
  const std::function<void(int64_t)>* fn;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> completed{0};
  std::mutex mu;
  std::condition_variable cv;
};

// Runs chunks until none is left; returns after the last claimed one.
inline void RunChunks(const std::shared_ptr<ParallelState>& s) {
  for (;;) {
    const int64_t i = s->next.fetch_add(1, std::memory_order_relaxed);
    if (i >= s->num_chunks) return;
    (*s->fn)(i);
    if (s->completed.fetch_add(1, std::memory_order_acq_rel) + 1 == s->num_chunks) {
      std::lock_guard<std::mutex> lock(s->mu);
      s->cv.notify_all();
    }
  }
}

// True once every chunk has completed, false if that took longer than the
// spin budget.
inline bool SpinUntilCompleted(const ParallelState& s) {
  constexpr auto kSpinMicroseconds = std::chrono::microseconds(100);
  const auto deadline = std::chrono::steady_clock::now() + kSpinMicroseconds;
  while (s.completed.load(std::memory_order_acquire) != s.num_chunks) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace detail

inline void ParallelFor(xla::ffi::ThreadPool& pool, int64_t num_chunks,
                        const std::function<void(int64_t)>& f) {
  if (num_chunks <= 0) return;
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  if (num_chunks == 1 || threads == 1) {
    for (int64_t i = 0; i < num_chunks; ++i) f(i);
    return;
  }
  auto state = std::make_shared<detail::ParallelState>(num_chunks, &f);
  const int64_t helpers = std::min(threads, num_chunks) - 1;
  for (int64_t h = 0; h < helpers; ++h) {
    pool.Schedule([state]() { detail::RunChunks(state); });
  }
  detail::RunChunks(state);
  if (detail::SpinUntilCompleted(*state)) return;
  std::unique_lock<std::mutex> lock(state->mu);
  state->cv.wait(lock, [&] {
    return state->completed.load(std::memory_order_acquire) == num_chunks;
  });
}

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_PARALLEL_H_
