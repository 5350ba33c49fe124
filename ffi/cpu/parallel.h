// Work splitting over the XLA FFI intra-op thread pool.
//
// ParallelFor(pool, n, f) calls f(i) once for every chunk i in [0, n).
// Chunks are claimed through an atomic range kept in shared state: the
// calling thread claims them from the front, helpers from the back, so that
// with two threads each keeps the same chunks, and their data in its cache,
// from call to call on the same input. The caller then waits only until
// every chunk has COMPLETED. It never waits for a helper task to start, so
// a busy (or single-threaded) pool cannot deadlock us: if no helper ever
// runs, the caller does all the work, and helpers that start late find no
// chunk left and return without touching `f` (which may be gone by then).
//
// A pool thread that was asleep can take as long to start a helper task as
// a whole chunk of a small call takes to run. So a helper that has run out
// of chunks lingers: for up to kLingerMicroseconds it waits, spinning, for
// the next ParallelFor, which hands it its state at once instead of
// scheduling a new task (OpenMP runtimes keep their workers spinning the
// same way, for much longer). The wait is bounded, so the pool thread always
// comes back; a lingering helper that gets no work returns to the pool.
//
// The caller waits first spinning (yielding its core to any other runnable
// thread) for up to 100 us, then asleep on a condition variable: a thread
// woken from one can start as late as a whole chunk of a small call takes
// to run.
//
// A chunk that throws claims every chunk left, so that no other starts; the
// caller rethrows the first exception once every claimed chunk has ended (no
// helper touches `f` after that).
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
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "xla/ffi/api/ffi.h"

namespace gs_cpu {

namespace detail {

struct ParallelState {
  // The most chunks one state holds (ParallelFor runs more in windows).
  static constexpr int64_t kMaxChunks = 0xffffffff;
  explicit ParallelState(int64_t n, const std::function<void(int64_t)>* f)
      : num_chunks(n), fn(f), unclaimed(static_cast<uint64_t>(n) << 32) {}
  const int64_t num_chunks;
  // Valid while completed < num_chunks (the caller is still waiting then).
  const std::function<void(int64_t)>* fn;
  // The chunks nobody has claimed: [front, back), front in the low 32 bits.
  std::atomic<uint64_t> unclaimed;
  std::atomic<int64_t> completed{0};
  std::mutex mu;
  std::condition_variable cv;
  std::exception_ptr error;  // the first chunk's exception (under mu)

  // The first (or, from_back, the last) unclaimed chunk, now claimed; -1
  // when none is left.
  int64_t Claim(bool from_back) {
    uint64_t r = unclaimed.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t front = r & 0xffffffffu, back = r >> 32;
      if (front >= back) return -1;
      const uint64_t rest = from_back ? front | (back - 1) << 32 : (front + 1) | back << 32;
      if (unclaimed.compare_exchange_weak(r, rest, std::memory_order_relaxed)) {
        return static_cast<int64_t>(from_back ? back - 1 : front);
      }
    }
  }
};

// Runs chunks until none is left; returns after the last claimed one. The
// caller claims from the front, helpers from the back.
inline void RunChunks(const std::shared_ptr<ParallelState>& s, bool from_back) {
  for (;;) {
    const int64_t i = s->Claim(from_back);
    if (i < 0) return;
    int64_t done = 1;  // this chunk, and those a failure claims
    try {
      (*s->fn)(i);
    } catch (...) {  // the first exception is kept; the chunks left are claimed
      std::lock_guard<std::mutex> lock(s->mu);
      if (!s->error) s->error = std::current_exception();
      const uint64_t r = s->unclaimed.exchange(0, std::memory_order_relaxed);
      done += static_cast<int64_t>((r >> 32) - (r & 0xffffffffu));
    }
    if (s->completed.fetch_add(done, std::memory_order_acq_rel) + done == s->num_chunks) {
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

// Helpers that ran out of chunks and wait a little for the next ParallelFor.
// Invariant (under mu): waiting + tickets = the lingering helpers that hold
// no work yet; Offer turns waiting helpers into tickets for its state, and
// every ticket is taken by one of them (at the latest when its wait ends).
class Lingerers {
 public:
  static constexpr auto kLingerMicroseconds = std::chrono::microseconds(200);
  // A pool task stops taking loops after this long, so that a caller that
  // keeps ParallelFor busy cannot hold a pool thread away from other tasks.
  static constexpr auto kMaxLingerMicroseconds = std::chrono::microseconds(5000);

  static Lingerers& Get() {
    static Lingerers* lingerers = new Lingerers();  // never destroyed: helpers may outlive exit
    return *lingerers;
  }

  // Gives `s` to up to `want` lingering helpers; returns how many will run
  // its chunks. 0 while another loop's offer is still being taken.
  int64_t Offer(const std::shared_ptr<ParallelState>& s, int64_t want) {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t k = std::min(want, waiting_);
    if (k == 0 || tickets_ > 0) return 0;
    waiting_ -= k;
    tickets_ = k;
    offered_ = s;
    has_tickets_.store(true, std::memory_order_release);
    return k;
  }

  // Run by a helper after its chunks: takes offered loops until none comes
  // within kLingerMicroseconds of the last one (or kMaxLingerMicroseconds
  // have passed).
  void Linger() {
    const auto end = std::chrono::steady_clock::now() + kMaxLingerMicroseconds;
    while (std::chrono::steady_clock::now() < end) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++waiting_;
      }
      std::shared_ptr<ParallelState> work = WaitForOffer();
      if (work == nullptr) return;
      RunChunks(work, true);
    }
  }

 private:
  Lingerers() = default;

  // A ticket's state, or nullptr (having left the waiting count) when none
  // came in time.
  std::shared_ptr<ParallelState> WaitForOffer() {
    const auto deadline = std::chrono::steady_clock::now() + kLingerMicroseconds;
    for (;;) {
      const bool timed_out = std::chrono::steady_clock::now() > deadline;
      if (timed_out || has_tickets_.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(mu_);
        if (tickets_ > 0) {
          std::shared_ptr<ParallelState> work = offered_;
          if (--tickets_ == 0) {
            offered_.reset();
            has_tickets_.store(false, std::memory_order_relaxed);
          }
          return work;
        }
        if (timed_out) {
          --waiting_;
          return nullptr;
        }
      }
      std::this_thread::yield();
    }
  }

  std::mutex mu_;
  int64_t waiting_ = 0;
  int64_t tickets_ = 0;
  std::shared_ptr<ParallelState> offered_;
  std::atomic<bool> has_tickets_{false};
};

}  // namespace detail

inline void ParallelFor(xla::ffi::ThreadPool& pool, int64_t num_chunks,
                        const std::function<void(int64_t)>& f) {
  if (num_chunks <= 0) return;
  const int64_t threads = std::max<int64_t>(1, pool.num_threads());
  if (num_chunks == 1 || threads == 1) {
    for (int64_t i = 0; i < num_chunks; ++i) f(i);
    return;
  }
  if (num_chunks > detail::ParallelState::kMaxChunks) {
    for (int64_t base = 0; base < num_chunks; base += detail::ParallelState::kMaxChunks) {
      const int64_t n = std::min(num_chunks - base, detail::ParallelState::kMaxChunks);
      ParallelFor(pool, n, [&f, base](int64_t i) { f(base + i); });
    }
    return;
  }
  auto state = std::make_shared<detail::ParallelState>(num_chunks, &f);
  const int64_t helpers = std::min(threads, num_chunks) - 1;
  try {
    for (int64_t h = detail::Lingerers::Get().Offer(state, helpers); h < helpers; ++h) {
      pool.Schedule([state]() mutable {
        detail::RunChunks(state, true);
        state.reset();
        detail::Lingerers::Get().Linger();
      });
    }
  } catch (...) {  // a helper not scheduled: the caller runs its chunks
  }
  detail::RunChunks(state, false);
  if (!detail::SpinUntilCompleted(*state)) {
    std::unique_lock<std::mutex> lock(state->mu);
    state->cv.wait(lock, [&] {
      return state->completed.load(std::memory_order_acquire) == num_chunks;
    });
  }
  if (state->error) std::rethrow_exception(state->error);
}

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_PARALLEL_H_
