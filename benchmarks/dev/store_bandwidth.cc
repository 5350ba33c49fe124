// How long it takes only to write a forward's output on this machine: one or
// two threads storing `mib` MiB of floats, with ordinary or non-temporal
// (streaming) 32-byte stores, into `buffers` buffers taken in turn (XLA hands
// a jitted function a different output buffer from call to call). Not a test:
// the floor under which no forward that writes that output can go. The
// float32 forwards stream outputs of 1 MiB and more (output_store_avx2.h).
//
//   g++ -std=c++17 -O3 -mavx2 -pthread benchmarks/dev/store_bandwidth.cc -o /tmp/store_bandwidth
//   /tmp/store_bandwidth 2 stream 4 4
//
// Prints the minimum and the median of 3000 passes.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

// Thread t of `threads` writes its share of `floats` floats at `out`.
void StoreShare(float* out, int64_t floats, int threads, int t, bool stream, float value) {
  const int64_t share = floats / threads / 8 * 8;
  float* p = out + t * share;
  const __m256 v = _mm256_set1_ps(value);
  if (stream) {
    for (int64_t i = 0; i < share; i += 8) _mm256_stream_ps(p + i, v);
    _mm_sfence();
  } else {
    for (int64_t i = 0; i < share; i += 8) _mm256_store_ps(p + i, v);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 || (std::atoi(argv[1]) != 1 && std::atoi(argv[1]) != 2) ||
      (std::strcmp(argv[2], "plain") != 0 && std::strcmp(argv[2], "stream") != 0) ||
      std::atoi(argv[3]) < 1 || std::atoi(argv[4]) < 1) {
    std::fprintf(stderr, "usage: %s THREADS(1|2) plain|stream MIB BUFFERS\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]);
  const bool stream = std::strcmp(argv[2], "stream") == 0;
  const int64_t floats = int64_t{std::atoi(argv[3])} << 18;
  const int buffers = std::atoi(argv[4]);
  float* all = static_cast<float*>(std::aligned_alloc(64, floats * buffers * sizeof(float)));
  if (all == nullptr) return 1;
  std::fill(all, all + floats * buffers, 0.f);  // touch every page first

  constexpr int kPasses = 3000;
  // The helper spins between passes (as XLA's pool threads do for a while),
  // so that thread wake-up is not timed.
  std::atomic<int> started{0}, finished{0};
  std::thread helper;
  if (threads == 2) {
    helper = std::thread([&] {
      for (int r = 1; r <= kPasses; ++r) {
        while (started.load(std::memory_order_acquire) < r) {
        }
        StoreShare(all + (r % buffers) * floats, floats, 2, 1, stream, r);
        finished.store(r, std::memory_order_release);
      }
    });
  }
  std::vector<double> ms;
  for (int r = 1; r <= kPasses; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    started.store(r, std::memory_order_release);
    StoreShare(all + (r % buffers) * floats, floats, threads, 0, stream, r);
    if (threads == 2) {
      while (finished.load(std::memory_order_acquire) < r) {
      }
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                     .count());
  }
  if (helper.joinable()) helper.join();
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  std::printf("%d thread(s), %s stores, %s MiB into %d buffer(s): min %.3f median %.3f ms "
              "(%.1f GB/s at the median)\n",
              threads, stream ? "streaming" : "plain", argv[3], buffers, ms.front(), median,
              floats * 4.0 / median / 1e6);
  std::free(all);
  return 0;
}
