// Bands of grad_input for the CPU backward: ranges of the last spatial axis
// (y in 2D, z in 3D), each owned by one task, and for every band the list of
// output points with a tap in it.
//
// Why: with few batch elements, the backward still needs several tasks, and
// tasks that split the points would each need a private grad_input buffer
// plus a reduction. Splitting grad_input instead needs neither; the price is
// this one pass that sorts point indices by band (a counting sort, so each
// list keeps point order and the result does not depend on threads).
#ifndef JAX_GRIDSAMPLE_FFI_CPU_BACKWARD_BANDS_H_
#define JAX_GRIDSAMPLE_FFI_CPU_BACKWARD_BANDS_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "grid_sample_cpu.h"
#include "parallel.h"

namespace gs_cpu {

// Most bands a backward call uses (BandLists stores band numbers as bytes).
inline constexpr int kMaxBands = 8;

// Size of the axis that bands split.
inline int64_t BandAxisSize(const Geometry& g) { return g.k == 2 ? g.h : g.d; }

// First index of band b of `bands` over an axis of `size`.
inline int64_t BandStart(int64_t b, int64_t bands, int64_t size) { return b * size / bands; }

// For every (batch element n, band b), the points (indices within n) with a
// tap in band b, in increasing order: points[begin[n * bands + b] ..
// begin[n * bands + b + 1]). first / last: per point (n * points + p), its
// first and last band. A point with no tap in range is listed in band 0 only,
// so that its (zero) grid gradient is still written.
struct BandLists {
  std::vector<int64_t> points;
  std::vector<int64_t> begin;
  std::vector<uint8_t> first, last;
};

// Builds the lists from the taps of the last axis (computed by FillTaps'
// own first pass, so both agree on every index). Requires
// 1 < bands <= kMaxBands, each band at least one tap span tall, so that a
// point's taps fall in at most two bands.
template <typename Fmt, int K, int kInterp>
void BuildBandLists(xla::ffi::ThreadPool& pool, const Geometry& g,
                    const typename Fmt::Storage* grid, int64_t bands, BandLists* out) {
  using T = typename Fmt::Compute;
  constexpr int kT1 = gs::TapsPerAxis(kInterp);
  const int64_t size = BandAxisSize(g);
  const int64_t points = g.points;
  constexpr int64_t kChunk = int64_t{1} << 16;
  const int64_t chunks_per_n = CeilDiv(points, kChunk);
  const int64_t chunks = g.n * chunks_per_n;
  out->first.resize(g.n * points);
  out->last.resize(g.n * points);
  // Pass 1: each point's bands, and the per-(chunk, band) counts. The taps
  // of the last axis come from FillTaps' vectorized first pass.
  using TB = TapBlock<T, K, kInterp>;
  std::vector<int64_t> counts(chunks * bands, 0);
  // Band starts, padded to kMaxBands with "never" so that the per-point
  // loops have a fixed trip count.
  int64_t starts[kMaxBands];
  for (int64_t b = 0; b < kMaxBands; ++b) {
    starts[b] = b < bands ? BandStart(b, bands, size) : std::numeric_limits<int64_t>::max();
  }
  ParallelFor(pool, chunks, [&](int64_t chunk) {
    const int64_t n = chunk / chunks_per_n;
    const int64_t p_begin = (chunk % chunks_per_n) * kChunk;
    const int64_t p_end = std::min(points, p_begin + kChunk);
    int64_t count[kMaxBands] = {};
    auto tb = NewTapBlock<TB>();
    for (int64_t p0 = p_begin; p0 < p_end; p0 += TB::kBlock) {
      const int64_t cnt = std::min<int64_t>(TB::kBlock, p_end - p0);
      const typename Fmt::Storage* block = grid + (n * points + p0) * K;
      DispatchPadding(g, [&](auto pad, auto align) {
        AxisTaps<Fmt, K, kInterp, decltype(pad)::value, decltype(align)::value>(
            block, cnt, size, K - 1, tb.get());
      });
      uint8_t* first = out->first.data() + n * points + p0;
      uint8_t* last = out->last.data() + n * points + p0;
      for (int64_t b = 0; b < cnt; ++b) {
        int64_t lo = size, hi = -1;
        for (int i = 0; i < kT1; ++i) {
          const int64_t idx = tb->aidx[K - 1][i][b];
          lo = std::min(lo, idx >= 0 ? idx : size);
          hi = std::max(hi, idx);
        }
        lo = hi < 0 ? 0 : lo;
        hi = hi < 0 ? 0 : hi;
        int bf = 0, bl = 0;  // the bands of lo and hi: the last start <= each
        for (int k = 1; k < kMaxBands; ++k) {
          bf += lo >= starts[k] ? 1 : 0;
          bl += hi >= starts[k] ? 1 : 0;
        }
        first[b] = static_cast<uint8_t>(bf);
        last[b] = static_cast<uint8_t>(bl);
        for (int k = 0; k < kMaxBands; ++k) count[k] += (bf <= k) & (k <= bl) ? 1 : 0;
      }
    }
    std::copy(count, count + bands, counts.data() + chunk * bands);
  });
  // Offsets in (n, band, chunk) order.
  std::vector<int64_t> cursor(chunks * bands);
  out->begin.assign(g.n * bands + 1, 0);
  int64_t pos = 0;
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t b = 0; b < bands; ++b) {
      out->begin[n * bands + b] = pos;
      for (int64_t c = 0; c < chunks_per_n; ++c) {
        const int64_t i = (n * chunks_per_n + c) * bands + b;
        cursor[i] = pos;
        pos += counts[i];
      }
    }
  }
  out->begin[g.n * bands] = pos;
  out->points.resize(pos);
  // Pass 2: each chunk writes its points into its slots of the lists.
  ParallelFor(pool, chunks, [&](int64_t chunk) {
    const int64_t n = chunk / chunks_per_n;
    const int64_t p_begin = (chunk % chunks_per_n) * kChunk;
    const int64_t p_end = std::min(points, p_begin + kChunk);
    int64_t* next = cursor.data() + chunk * bands;
    for (int64_t p = p_begin; p < p_end; ++p) {
      const int64_t q = n * points + p;
      for (int64_t b = out->first[q]; b <= out->last[q]; ++b) out->points[next[b]++] = p;
    }
  });
}

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_BACKWARD_BANDS_H_
