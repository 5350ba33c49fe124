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
#include <memory>

#include "grid_sample_cpu.h"
#include "parallel.h"

namespace gs_cpu {

// Most bands a backward call uses (BandLists stores band numbers as bytes).
inline constexpr int kMaxBands = 8;

// Size of the axis that bands split.
inline int64_t BandAxisSize(const Geometry& g) { return g.k == 2 ? g.h : g.d; }

// First index of band b of `bands` over an axis of `size`.
inline int64_t BandStart(int64_t b, int64_t bands, int64_t size) { return b * size / bands; }

// Points are taken in chunks of kBandChunk within a batch element (shape-only).
inline constexpr int64_t kBandChunk = int64_t{1} << 16;

// For every (batch element n, band b), the points (indices within n) with a
// tap in band b, in increasing order, and their coordinates: entries
// begin[n * bands + b] .. begin[n * bands + b + 1] of `points` (and K values
// each of `coords`, so that a band's task reads them contiguously), of
// `entries` in all.
// chunk_begin[chunk * bands + b]: the first entry of band b that comes from
// point chunk `chunk` (n * chunks_per_n + p / kBandChunk). first / last: per
// point (n * points + p), its first and last band. A point with no tap in
// range is listed in band 0 only, so that its (zero) grid gradient is still
// written.
template <typename T>
struct BandLists {
  int64_t entries = 0;
  std::unique_ptr<int64_t[]> points, begin, chunk_begin;
  std::unique_ptr<T[]> coords;
  std::unique_ptr<uint8_t[]> first, last;
};

// Calls f(q, p, e0, e1) for every point p of point chunk `chunk` in order
// (q = n * points + p): e0 is its entry in its first band, e1 its entry in
// its second band or -1. Needs chunk_begin, first and last (the entries
// themselves may still be unwritten): both the list building and the
// readers of per-entry results walk the lists this way.
template <typename T, typename F>
void ForEachEntry(const BandLists<T>& lists, int64_t points, int64_t bands, int64_t chunk, F&& f) {
  const int64_t chunks_per_n = CeilDiv(points, kBandChunk);
  const int64_t n = chunk / chunks_per_n;
  const int64_t p_begin = (chunk % chunks_per_n) * kBandChunk;
  const int64_t p_end = std::min(points, p_begin + kBandChunk);
  int64_t next[kMaxBands];
  std::copy_n(lists.chunk_begin.get() + chunk * bands, bands, next);
  const uint8_t* first = lists.first.get();
  const uint8_t* last = lists.last.get();
  for (int64_t p = p_begin; p < p_end; ++p) {
    const int64_t q = n * points + p;
    const int bf = first[q], bl = last[q];
    const int64_t e0 = next[bf]++;
    const int64_t e1 = bl != bf ? next[bl]++ : -1;
    f(q, p, e0, e1);
  }
}

// Pass 1 of BuildBandLists for one block of `cnt` points: the first and
// last band of each (from the taps of the last axis, computed by FillTaps'
// own first pass, so both agree on every index; band 0 for a point with no
// tap in range), and, added to count[b], how many of them have a tap in
// band b.
template <typename T, int K, int kInterp>
GS_CPU_INLINE void BlockBands(const T* block, int64_t cnt, const Geometry& g, int64_t size,
                              int64_t pad, bool align, const uint8_t* band_of, int64_t bands,
                              TapBlock<T, K, kInterp>* tb, uint8_t* first, uint8_t* last,
                              int64_t* count) {
  constexpr int kT1 = gs::TapsPerAxis(kInterp);
  AxisTapsUnder<T, K, kInterp>(block, cnt, g, pad, align, K - 1, tb);
  // Four sets of counters, taken in turn: consecutive points in the same band
  // do not wait for each other's increment. Slot kMaxBands counts nothing.
  int64_t tally[4][kMaxBands + 1] = {};
  for (int64_t b = 0; b < cnt; ++b) {
    // The lowest and highest in-range tap (index 0 for both when none).
    int64_t l = size, h = -1;
    for (int i = 0; i < kT1; ++i) {
      const int64_t idx = tb->aidx[K - 1][i][b];
      l = std::min(l, idx >= 0 ? idx : size);
      h = std::max(h, idx);
    }
    const uint8_t bf = band_of[h < 0 ? 0 : l], bl = band_of[h < 0 ? 0 : h];
    first[b] = bf;
    last[b] = bl;
    int64_t* t = tally[b & 3];
    ++t[bf];
    ++t[bl != bf ? bl : kMaxBands];  // the second band (bf + 1), if any
  }
  for (int64_t band = 0; band < bands; ++band) {
    count[band] += tally[0][band] + tally[1][band] + tally[2][band] + tally[3][band];
  }
}

// Builds the lists from the taps of the last axis (computed by FillTaps'
// own first pass, so both agree on every index). Requires
// 1 < bands <= kMaxBands, each band at least one tap span tall, so that a
// point's taps fall in at most two bands.
template <typename T, int K, int kInterp>
void BuildBandLists(xla::ffi::ThreadPool& pool, const Geometry& g, const T* grid, int64_t bands,
                    BandLists<T>* out) {
  const int64_t size = BandAxisSize(g);
  const int64_t points = g.points;
  const int64_t chunks_per_n = CeilDiv(points, kBandChunk);
  const int64_t chunks = g.n * chunks_per_n;
  out->first = NewArray<uint8_t>("first bands of the points", g.n * points);
  out->last = NewArray<uint8_t>("last bands of the points", g.n * points);
  // Pass 1: each point's bands, and the per-(chunk, band) counts. The taps
  // of the last axis come from FillTaps' vectorized first pass.
  using TB = TapBlock<T, K, kInterp>;
  auto counts = NewArray<int64_t>("band counts", chunks * bands);
  // The band of every index of the axis.
  auto band_of = NewArray<uint8_t>("bands of the band axis", size);
  for (int64_t b = 0; b < bands; ++b) {
    std::fill(band_of.get() + BandStart(b, bands, size),
              band_of.get() + BandStart(b + 1, bands, size), static_cast<uint8_t>(b));
  }
  ParallelFor(pool, chunks, [&](int64_t chunk) {
    const int64_t n = chunk / chunks_per_n;
    const int64_t p_begin = (chunk % chunks_per_n) * kBandChunk;
    const int64_t p_end = std::min(points, p_begin + kBandChunk);
    int64_t count[kMaxBands] = {};
    auto tb = NewObject<TB>("tap table");
    for (int64_t p0 = p_begin; p0 < p_end; p0 += TB::kBlock) {
      const int64_t cnt = std::min<int64_t>(TB::kBlock, p_end - p0);
      const T* block = grid + (n * points + p0) * K;
      uint8_t* first = out->first.get() + n * points + p0;
      uint8_t* last = out->last.get() + n * points + p0;
      WithTapConstants<T>(g, [&](int64_t pad, bool align) GS_CPU_INLINE_LAMBDA {
        BlockBands<T, K, kInterp>(block, cnt, g, size, pad, align, band_of.get(), bands,
                                  tb.get(), first, last, count);
      });
    }
    std::copy(count, count + bands, counts.get() + chunk * bands);
  });
  // Offsets in (n, band, chunk) order.
  out->chunk_begin = NewArray<int64_t>("band list offsets", chunks * bands);
  out->begin = NewArray<int64_t>("band list offsets", g.n * bands + 1);
  int64_t pos = 0;
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t b = 0; b < bands; ++b) {
      out->begin[n * bands + b] = pos;
      for (int64_t c = 0; c < chunks_per_n; ++c) {
        const int64_t i = (n * chunks_per_n + c) * bands + b;
        out->chunk_begin[i] = pos;
        pos += counts[i];
      }
    }
  }
  out->begin[g.n * bands] = out->entries = pos;
  out->points = NewArray<int64_t>("band lists", pos);
  out->coords = NewArray<T>("band lists' coordinates", pos * K);
  // Pass 2: each chunk writes its points and their coordinates into its
  // slots of the lists.
  ParallelFor(pool, chunks, [&](int64_t chunk) {
    ForEachEntry(*out, points, bands, chunk, [&](int64_t q, int64_t p, int64_t e0, int64_t e1) {
      auto put = [&](int64_t e) {
        out->points[e] = p;
        for (int a = 0; a < K; ++a) out->coords[e * K + a] = grid[q * K + a];
      };
      put(e0);
      if (e1 >= 0) put(e1);
    });
  });
}

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_BACKWARD_BANDS_H_
