// The CPU backward tasks for nearest float32, channels first; see
// nearest_ranges_backward.h.
#include "nearest_ranges_backward.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "../common/grid_sample_math.h"
#include "grid_sample_cpu.h"
#include "output_store.h"
#include "soa_taps.h"
#include "vec8.h"

namespace gs_cpu {

int64_t NearestStagingRanges(const Geometry& g) {
  if (!HasVectorKernels() || !FitsInt32Offsets(g)) return 0;
  return std::max<int64_t>(1, CeilDiv(g.plane * int64_t{8 * sizeof(float)}, kNearestStagingBytes));
}

namespace {

// How far ahead (in floats) each grad_output row is prefetched. The rows
// usually come from memory (the forward streamed them out).
constexpr int64_t kPrefetchFloats = 256;

inline int64_t RoundUp8(int64_t v) { return (v + 7) / 8 * 8; }

// One pass: `rows` channels of the task, whose first grad_output row is
// `go`, summed into `staging`: per group of 8 channels, the task's range
// (elements s_begin .. s_begin + span - 1 of the plane) as 8-float vectors,
// then 8 more (one per lane of a group of points) that take the points
// outside the range, so that adding needs no branch (group c0 / 8 at
// staging + c0 * Stride(); past `rows`, lanes of zeros).
struct Pass {
  const float* go;
  int64_t rows;
  float* staging;
  int64_t s_begin, span;
  int64_t Stride() const { return span + 8; }
};

// The staging vectors of elem[0 .. 7] (8-float units from the group's
// start): an element of the pass's range goes to its own, any other (-1,
// out of range, included) to its lane's spare one. False when none lies in
// the range.
GS_CPU_VECTOR_INLINE bool StagingSlots(const int32_t* elem, const Pass& p, int32_t* slot) {
  const I8 rel = LoadI8(elem) - static_cast<int32_t>(p.s_begin);
  const int32_t span = static_cast<int32_t>(p.span);
  const I8 in_span = (rel >= 0) & (rel < span);
  const I8 spare = span + I8{0, 1, 2, 3, 4, 5, 6, 7};
  const I8 chosen = in_span ? rel : spare;
  std::memcpy(slot, &chosen, sizeof chosen);
  int any = 0;
  for (int i = 0; i < 8; ++i) any |= in_span[i];
  return any != 0;
}

// Adds the grad_output of `cnt` consecutive points from p0, 8 channels at a
// time: 8 points x 8 channels are loaded as 8 row pieces and transposed, so
// that each point's channels are one vector. elem[b]: the plane element of
// point b's tap, or -1 (out of range). Only the points whose tap lies in
// the pass's range are added.
// Channels outer: the loads follow 8 rows at a time, which costs less than
// following all the task's rows at once.
GS_CPU_VECTOR void AddPoints(const Geometry& g, const Pass& p, int64_t p0, int cnt,
                             const int32_t* elem) {
  const int64_t points = g.points;
  for (int64_t c0 = 0; c0 < p.rows; c0 += 8) {
    const int64_t n_rows = std::min<int64_t>(8, p.rows - c0);
    const float* go = p.go + c0 * points + p0;
    float* staging = p.staging + c0 * p.Stride();
    for (int b0 = 0; b0 < cnt; b0 += 8) {
      const bool whole = b0 + 8 <= cnt;
      alignas(32) int32_t tail[8];
      const int32_t* e = elem + b0;
      if (!whole) {
        std::fill(tail, tail + 8, -1);
        std::copy(e, e + (cnt - b0), tail);
        e = tail;
      }
      alignas(32) int32_t slot[8];
      if (!StagingSlots(e, p, slot)) continue;
      F8 in[8], out[8];
      for (int r = 0; r < 8; ++r) {
        const float* src = go + r * points + b0;
        if ((b0 & 15) == 0 && r < n_rows) __builtin_prefetch(src + kPrefetchFloats);
        in[r] = r >= n_rows ? F8{} : whole ? Load8(src) : LoadFirst(src, cnt - b0);
      }
      Transpose8x8(in, out);
      for (int k = 0; k < 8; ++k) {
        float* dst = staging + int64_t{slot[k]} * 8;
        Store8(dst, Load8(dst) + out[k]);
      }
    }
  }
}

// The pass's staging -> its range of its `rows` planes of grad_input (gi:
// element s_begin of the first plane): 16 elements of 8 planes at a time,
// so that each plane's row gets whole 64-byte lines (streamed when `stream`
// and aligned, see output_store.h).
GS_CPU_VECTOR void WritePlanes(const Pass& p, int64_t plane, float* gi, bool stream) {
  const int64_t span = p.span, span16 = span / 16 * 16;
  for (int64_t c0 = 0; c0 < p.rows; c0 += 8) {
    const int64_t n_rows = std::min<int64_t>(8, p.rows - c0);
    const float* staging = p.staging + c0 * p.Stride();
    for (int64_t s = 0; s < span16; s += 16) {
      F8 in[8], lo[8], hi[8];
      for (int r = 0; r < 8; ++r) in[r] = Load8(staging + (s + r) * 8);
      Transpose8x8(in, lo);
      for (int r = 0; r < 8; ++r) in[r] = Load8(staging + (s + 8 + r) * 8);
      Transpose8x8(in, hi);
      for (int k = 0; k < n_rows; ++k) {
        float* dst = gi + (c0 + k) * plane + s;
        StoreOutput(dst, lo[k], stream);
        StoreOutput(dst + 8, hi[k], stream);
      }
    }
    for (int64_t s = span16; s < span; ++s) {
      for (int64_t k = 0; k < n_rows; ++k) gi[(c0 + k) * plane + s] = staging[s * 8 + k];
    }
  }
  FinishOutputStores(stream);
}

}  // namespace

template <int K>
GS_CPU_VECTOR void NearestRangesTaskF32(const Geometry& g, const NearestBackwardTask& t) {
  using ST = SoaTaps<K, gs::kNearest>;
  const int64_t plane = g.plane, points = g.points, span = t.s_end - t.s_begin;
  if (span <= 0 || t.c_end <= t.c_begin) return;
  // Channels per pass: a multiple of 8 whose staging copy fits (8 always
  // do, but for the rounding of NearestRangeStart and the spare vectors:
  // the ranges are no larger than NearestStagingRanges asks).
  const int64_t most = std::max<int64_t>(8, kNearestStagingBytes / (span * 4) / 8 * 8);
  const int64_t per_pass = std::min(RoundUp8(t.c_end - t.c_begin), most);
  std::unique_ptr<float[]> staging = NewArray<float>("staging copy", (span + 8) * per_pass);
  std::unique_ptr<ST> st(t.offsets == nullptr ? NewObject<ST>("tap table") : nullptr);
  // grad_input (rows of a plane) is streamed as a forward output would be.
  const bool stream = StreamsRuns(plane, g.n * g.c * plane);
  for (int64_t c_pass = t.c_begin; c_pass < t.c_end; c_pass += per_pass) {
    const int64_t rows = std::min(per_pass, t.c_end - c_pass);
    const Pass p{t.grad_out + (t.n * g.c + c_pass) * points, rows, staging.get(), t.s_begin, span};
    std::fill(p.staging, p.staging + p.Stride() * RoundUp8(rows), 0.f);
    // The points' taps, precomputed or by the forward's index math (the
    // generic block's taps either way).
    for (int64_t p0 = 0; p0 < points; p0 += ST::kB) {
      const int cnt = static_cast<int>(std::min<int64_t>(ST::kB, points - p0));
      if (t.offsets != nullptr) {
        AddPoints(g, p, p0, cnt, t.offsets + t.n * points + p0);
        continue;
      }
      FillSoaTaps<K, gs::kNearest>(t.grid + (t.n * points + p0) * K, cnt, g, st.get());
      AddPoints(g, p, p0, cnt, st->off[0]);
    }
    WritePlanes(p, plane, t.grad_input + (t.n * g.c + c_pass) * plane + t.s_begin, stream);
  }
}

template void NearestRangesTaskF32<2>(const Geometry&, const NearestBackwardTask&);
template void NearestRangesTaskF32<3>(const Geometry&, const NearestBackwardTask&);

template <int K>
GS_CPU_VECTOR void NearestTapOffsetsF32(const Geometry& g, const float* grid, int64_t n,
                                        int64_t p_begin, int64_t p_end, int32_t* offsets) {
  using ST = SoaTaps<K, gs::kNearest>;
  std::unique_ptr<ST> st = NewObject<ST>("tap table");
  for (int64_t p0 = p_begin; p0 < p_end; p0 += ST::kB) {
    const int cnt = static_cast<int>(std::min<int64_t>(ST::kB, p_end - p0));
    FillSoaTaps<K, gs::kNearest>(grid + (n * g.points + p0) * K, cnt, g, st.get());
    std::copy(st->off[0], st->off[0] + cnt, offsets + n * g.points + p0);
  }
}

template void NearestTapOffsetsF32<2>(const Geometry&, const float*, int64_t, int64_t, int64_t,
                                      int32_t*);
template void NearestTapOffsetsF32<3>(const Geometry&, const float*, int64_t, int64_t, int64_t,
                                      int32_t*);

}  // namespace gs_cpu
