// Times the AVX2 float32 forward kernels directly, without JAX: the gather
// path (ForwardChunkAvx2F32 over the chunks the handler uses) or the path
// through a channels-last copy (ForwardViaChannelsLastAvx2F32), on one or two
// threads. Not a test. The minimum over many passes is the figure to compare:
// on a shared VM noise only ever adds time.
//
// Build it against a source tree (its ffi/ directory), e.g. twice, for two
// commits, and alternate the two binaries:
//
//   g++ -std=c++17 -O3 -march=x86-64-v2 -fno-math-errno -fno-trapping-math \
//     -fno-tree-pre -fno-thread-jumps -ffp-contract=off -pthread -I ffi \
//     -isystem $(python -c 'import jax; print(jax.ffi.include_dir())') \
//     benchmarks/dev/forward_kernel.cc -o /tmp/forward_kernel
//   /tmp/forward_kernel c3 gather 1
//
// Cases (float32, channels-first, align_corners=False, grid uniform in
// [-1.1, 1.1], as in cpu.py): bilinear (8,32,64,64)->64x64 zeros, nearest
// (8,32,64,64)->64x64 border, c3 (1,3,512,512)->512x512 bilinear border,
// 3d (2,16,32,32,32)->32^3 bilinear zeros; 3d-nearest: the same sizes, nearest
// reflection; bilinear-nhwc: the bilinear case's sizes channels last (the tile
// sampler in place; via_cl does not apply).
//
// Every pass writes the same output buffer, whose pages stay in the TLB: under
// JAX, XLA hands the kernel fresh buffers, and on the 2-core Xeon VM the 2D
// nearest case took 0.155 ms here, 0.177 ms with four output buffers used in
// turn, and 0.155 ms again with those on huge pages (2026-12-02).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cpu/grid_sample_avx2.cc"
#include "cpu/grid_sample_avx2_tiles.cc"

namespace {

using gs_cpu::Geometry;

bool MakeCase(const std::string& name, Geometry* g, int64_t* interpolation) {
  g->k = 2;
  g->align_corners = false;
  g->channels_last = false;
  if (name == "bilinear" || name == "nearest" || name == "bilinear-nhwc") {
    g->n = 8, g->c = 32, g->h = 64, g->w = 64, g->points = 64 * 64;
    g->padding = name == "nearest" ? gs::kBorder : gs::kZeros;
    *interpolation = name == "nearest" ? gs::kNearest : gs::kBilinear;
    g->channels_last = name == "bilinear-nhwc";
  } else if (name == "c3") {
    g->n = 1, g->c = 3, g->h = 512, g->w = 512, g->points = 512 * 512;
    g->padding = gs::kBorder;
    *interpolation = gs::kBilinear;
  } else if (name == "3d" || name == "3d-nearest") {
    g->k = 3;
    g->n = 2, g->c = 16, g->d = 32, g->h = 32, g->w = 32, g->points = 32 * 32 * 32;
    g->padding = name == "3d" ? gs::kZeros : gs::kReflection;
    *interpolation = name == "3d" ? gs::kBilinear : gs::kNearest;
  } else {
    return false;
  }
  g->plane = g->d * g->h * g->w;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || !gs_cpu::HasAvx2Fma()) {
    std::fprintf(stderr,
                 "usage: %s bilinear|bilinear-nhwc|nearest|c3|3d|3d-nearest gather|via_cl"
                 " [threads] (AVX2 + FMA)\n",
                 argv[0]);
    return 2;
  }
  Geometry g;
  int64_t interp = 0;
  if (!MakeCase(argv[1], &g, &interp)) return 2;
  const bool via_cl = std::string(argv[2]) == "via_cl";
  const int threads = argc > 3 ? std::max(1, std::atoi(argv[3])) : 1;

  std::vector<float> input(g.n * g.c * g.plane), grid(g.n * g.points * g.k);
  std::vector<float> output(g.n * g.c * g.points + 16);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.1f, 1.1f);
  for (float& v : input) v = uniform(rng);
  for (float& v : grid) v = uniform(rng);
  // 64-byte aligned output, as XLA's CPU buffers are (so that 16-float runs of
  // the output rows are whole cache lines, as the streaming stores expect).
  float* out = output.data() + ((64 - (reinterpret_cast<uintptr_t>(output.data()) & 63)) & 63) / 4;

  // The handler's chunks of points (grid_sample_forward_cpu.cc): whole
  // batch elements for bilinear pairs and channels-last input sampled in
  // place when they keep the threads busy.
  const int block = g.k == 3                   ? gs_cpu::TapBlock<float, 3, gs::kBilinear>::kBlock
                    : interp == gs::kNearest ? gs_cpu::TapBlock<float, 2, gs::kNearest>::kBlock
                                             : gs_cpu::TapBlock<float, 2, gs::kBilinear>::kBlock;
  const bool whole = (gs_cpu::SamplesPairs(g, interp) ||
                      gs_cpu::SamplesChannelsLastInPlace(g, interp)) &&
                     gs_cpu::ElementsKeepThreadsBusy(threads, g);
  const int64_t chunk =
      whole ? g.points
            : gs_cpu::PointsPerChunk(g.points, g.c, gs::TapsPerPoint(g.k, interp), block);
  const int64_t chunks_per_n = gs_cpu::CeilDiv(g.points, chunk);
  // Or its parts of elements (PairPartsPerElement).
  const int64_t parts = whole ? 1 : gs_cpu::PairPartsPerElement(g, interp, threads);
  auto work = [&](int tid) {
    if (via_cl) {
      std::vector<float> buffer(gs_cpu::ViaChannelsLastBufferFloats(g));
      for (int64_t n = tid; n < g.n; n += threads) {
        gs_cpu::ForwardViaChannelsLastAvx2F32(g, interp, input.data(), grid.data(), out, n,
                                              buffer.data());
      }
      return;
    }
    if (parts > 1) {
      for (int64_t i = tid; i < g.n * parts; i += threads) {
        gs_cpu::ForwardPartAvx2F32(g, interp, input.data(), grid.data(), out, i / parts,
                                   i % parts, parts);
      }
      return;
    }
    for (int64_t i = tid; i < g.n * chunks_per_n; i += threads) {
      const int64_t n = i / chunks_per_n, p = (i % chunks_per_n) * chunk;
      gs_cpu::ForwardChunkAvx2F32(g, interp, input.data(), grid.data(), out, n, p,
                                  std::min(g.points, p + chunk));
    }
  };
  // Helper threads start once and spin between passes (as the handler's pool
  // helpers linger between calls), so that a pass times the kernel, not
  // thread creation (which had added 0.05-0.08 ms to two-thread passes).
  constexpr int kPasses = 400;
  std::atomic<int> started{0}, finished{0};
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t) {
    helpers.emplace_back([&, t] {
      for (int pass = 1; pass <= kPasses; ++pass) {
        while (started.load(std::memory_order_acquire) < pass) {
        }
        work(t);
        finished.fetch_add(1, std::memory_order_acq_rel);
      }
    });
  }
  std::vector<double> ms;
  for (int pass = 1; pass <= kPasses; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    started.store(pass, std::memory_order_release);
    work(0);
    while (finished.load(std::memory_order_acquire) < pass * (threads - 1)) {
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                     .count());
  }
  for (std::thread& h : helpers) h.join();
  std::sort(ms.begin(), ms.end());
  double checksum = 0;
  for (int64_t i = 0; i < g.n * g.c * g.points; ++i) checksum += out[i];
  std::printf("%s %s, %d thread(s): min %.3f p10 %.3f median %.3f ms (checksum %.6g)\n", argv[1],
              argv[2], threads, ms[0], ms[ms.size() / 10], ms[ms.size() / 2], checksum);
  return 0;
}
