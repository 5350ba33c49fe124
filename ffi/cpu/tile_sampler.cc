// The tile sampler; see tile_sampler.h.
//
// For channels-last output it sums each point's channels and stores them at
// once; for channels-first output it computes a tile of 16 points x up to
// 32 channels, each point's taps loaded once for all its channels, and
// stores it transposed into 16-float runs of the channel rows.
//
// Results are bitwise those of every other forward strategy (TapSum's
// order in grid_sample_forward_cpu.cc): the same fused multiply-adds into
// the same two accumulators (even / odd taps), 2D bicubic's separable sum,
// and a tap out of range reads a row of zeros with its weight (adding
// exactly 0, as a skipped tap does).
#include "tile_sampler.h"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "../common/grid_sample_math.h"
#include "gather_sampler.h"
#include "grid_sample_cpu.h"
#include "output_store.h"
#include "soa_taps.h"
#include "vec8.h"

namespace gs_cpu {

namespace {

// The L1 data cache size ViaChannelsLastPays assumes (current cores have at
// least 32 KiB): a constant, not a probe, so that the choice depends on the
// call's shapes alone.
constexpr int64_t kL1DataBytes = int64_t{32} << 10;

}  // namespace

int64_t ChannelsLastStride(int64_t channels) { return (channels + 7) / 8 * 8; }

bool ViaChannelsLastPays(const Geometry& g, int64_t interpolation) {
  const int64_t taps = gs::TapsPerPoint(g.k, static_cast<int>(interpolation));
  // One channel alone gains nothing (a pixel is one float either way), nor
  // does one tap per point (nearest): its gathers are as many as the loads.
  if (g.channels_last || g.c < 2 || taps < 4 || g.points * taps < g.plane) return false;
  // In 3D, with twice the taps per point, the copy pays. In 2D, bilinear
  // pairs (SamplesPairs) read one plane at a time at random, and the tile
  // sampler the whole copy: the copy needs 8 channels or more (a pixel of
  // fewer leaves lanes of its vector empty) and planes that take more than
  // half of the L1 (the pairs' random reads then miss it).
  if (g.k == 2 && SamplesPairs(g, interpolation)) {
    return g.c >= 8 && g.plane * int64_t{4} * 2 > kL1DataBytes;
  }
  return true;
}

int64_t ViaChannelsLastBufferFloats(const Geometry& g) {
  return (g.plane + 1) * ChannelsLastStride(g.c);
}

namespace {

// Batch element n of channels-first input, copied channels last
// (ChannelsLastStride(g.c) floats a pixel, zeros past the last channel): 8
// channels x 8 pixels at a time, each channel row read in order and
// prefetched 512 bytes ahead.
GS_CPU_VECTOR void CopyToChannelsLast(const Geometry& g, const float* __restrict input, int64_t n,
                                      float* __restrict copy) {
  const int64_t channels = g.c, plane = g.plane;
  const int64_t stride = ChannelsLastStride(channels);
  const float* src_n = input + n * channels * plane;
  const int64_t s8 = plane / 8 * 8;
  for (int64_t c0 = 0; c0 < stride; c0 += 8) {
    const int rows = static_cast<int>(std::min<int64_t>(8, channels - c0));
    for (int64_t s = 0; s < s8; s += 8) {
      if ((s & 15) == 0 && s + 128 < plane) {
        for (int r = 0; r < rows; ++r) __builtin_prefetch(src_n + (c0 + r) * plane + s + 128);
      }
      F8 v[8], t[8];
      for (int r = 0; r < 8; ++r) v[r] = r < rows ? Load8(src_n + (c0 + r) * plane + s) : F8{};
      Transpose8x8(v, t);
      for (int r = 0; r < 8; ++r) Store8(copy + (s + r) * stride + c0, t[r]);
    }
  }
  for (int64_t s = s8; s < plane; ++s) {
    for (int64_t c = 0; c < stride; ++c) {
      copy[s * stride + c] = c < channels ? src_n[c * plane + s] : 0.f;
    }
  }
}

// The taps of one point: row of each tap in the pixels (the zero row when out
// of range) and the weights, broadcast (2D bicubic: the 4 x and 4 y weights
// of its separable sum; otherwise one per tap).
template <int K, int kInterp>
struct PointTaps {
  static constexpr int kTaps = SoaTaps<K, kInterp>::kTaps;
  static constexpr bool kSeparable = K == 2 && kInterp == gs::kBicubic;
  const float* row[kTaps];
  F8 w[kSeparable ? 8 : kTaps];
};

template <int K, int kInterp>
GS_CPU_VECTOR_INLINE void LoadPointTaps(const SoaTaps<K, kInterp>* __restrict st, int b,
                                        const float* pixels, int64_t stride, const float* zeros,
                                        PointTaps<K, kInterp>* pt) {
  using PT = PointTaps<K, kInterp>;
  for (int t = 0; t < PT::kTaps; ++t) {
    const int32_t o = st->off[t][b];
    pt->row[t] = o >= 0 ? pixels + static_cast<int64_t>(o) * stride : zeros;
  }
  if constexpr (PT::kSeparable) {
    for (int i = 0; i < 4; ++i) {
      pt->w[i] = Broadcast8(st->aw[0][i][b]);
      pt->w[4 + i] = Broadcast8(st->aw[1][i][b]);
    }
  } else {
    for (int t = 0; t < PT::kTaps; ++t) pt->w[t] = Broadcast8(st->TapWeight(t, b));
  }
}

// The channels of one point that load(row) reads from each tap's row (8
// floats, or fewer in the low lanes with the others zero), in the forward's
// one summation order (TapSum).
template <int K, int kInterp, typename Load>
GS_CPU_VECTOR_INLINE F8 PointSum(const PointTaps<K, kInterp>& pt, Load load) {
  using PT = PointTaps<K, kInterp>;
  if constexpr (PT::kSeparable) {
    F8 q[4];
    for (int j = 0; j < 4; ++j) {
      F8 pv[4];
      for (int i = 0; i < 4; ++i) pv[i] = pt.w[i] * load(pt.row[4 * j + i]);
      q[j] = pt.w[4 + j] * ((pv[0] + pv[1]) + (pv[2] + pv[3]));
    }
    return (q[0] + q[1]) + (q[2] + q[3]);
  } else {
    F8 acc[2] = {F8{}, F8{}};
#pragma GCC unroll 64  // whole, so that the two accumulators stay in registers
    for (int t = 0; t < PT::kTaps; ++t) acc[t & 1] = Fma(pt.w[t], load(pt.row[t]), acc[t & 1]);
    return PT::kTaps == 1 ? acc[0] : acc[0] + acc[1];
  }
}

// Channels [c, c + 8) of one point.
template <int K, int kInterp>
GS_CPU_VECTOR_INLINE F8 PointSum(const PointTaps<K, kInterp>& pt, int64_t c) {
  return PointSum(pt, [c](const float* row) GS_CPU_VECTOR { return Load8(row + c); });
}

// Stores channel rows [0, rows) of kG (a multiple of 8) points (res[j]: the
// channels of point j) at dst + r * points; only the first `valid` points
// when < kG. Each row is written as kG contiguous floats.
template <int kG>
GS_CPU_VECTOR_INLINE void StoreTransposed(const F8 (&res)[kG], float* dst, int64_t points, int rows,
                                          int valid, bool stream) {
  F8 t[kG / 8][8];
  for (int h = 0; h < kG / 8; ++h) {
    Transpose8x8(reinterpret_cast<const F8(&)[8]>(res[8 * h]), t[h]);
  }
  for (int r = 0; r < rows; ++r) {
    if (valid == kG) {
      for (int h = 0; h < kG / 8; ++h) StoreOutput(dst + r * points + 8 * h, t[h][r], stream);
    } else {
      for (int j = 0; j < valid; ++j) dst[r * points + j] = t[j / 8][r][j % 8];
    }
  }
}

// Channels [c, c + 8) of one point plus the fill value's term, with a fill
// value (`fill`: ChannelsLastStride(g.c) floats, not nullptr).
template <int K, int kInterp>
GS_CPU_VECTOR_INLINE F8 PointSumWithFill(const PointTaps<K, kInterp>& pt, int64_t c,
                                         const float* fill, float outside) {
  const F8 sum = PointSum(pt, c);
  return fill == nullptr ? sum : sum + FillTerm8(Load8(fill + c), Broadcast8(outside));
}

// Channels-last output of one point, its channels summed and stored at once
// (not through the tiles, whose registers would spill): whole vectors of 8,
// then the last channels (1 to 7), read and stored one by one.
template <int K, int kInterp>
GS_CPU_VECTOR_INLINE void ChannelsLastPoint(const PointTaps<K, kInterp>& pt, int64_t channels,
                                            float* dst, bool stream, const float* fill,
                                            float outside) {
  const int64_t c8 = channels & ~int64_t{7};
  for (int64_t c = 0; c < c8; c += 8) {
    StoreOutput(dst + c, PointSumWithFill(pt, c, fill, outside), stream);
  }
  if (c8 == channels) return;
  F8 sum = PointSum(
      pt, [&](const float* row) GS_CPU_VECTOR { return LoadFirst(row + c8, channels - c8); });
  if (fill != nullptr) sum = sum + FillTerm8(Load8(fill + c8), Broadcast8(outside));
  for (int64_t c = c8; c < channels; ++c) dst[c] = sum[c - c8];
}

// Forward of points [p_begin, p_end) of batch element n from `pixels`, its
// channels-last data (the input itself, `stride` = g.c floats per pixel, or
// a copy, ChannelsLastStride(g.c)), into the output in the layout of g;
// `fill`: g's fill value, zeros after it to ChannelsLastStride(g.c) floats
// (nullptr without one).
template <int K, int kInterp>
GS_CPU_VECTOR void SamplePoints(const Geometry& g, const float* pixels, int64_t stride,
                                const float* zeros, const float* fill,
                                const float* __restrict grid, float* __restrict output, int64_t n,
                                int64_t p_begin, int64_t p_end, SoaTaps<K, kInterp>* st) {
  using ST = SoaTaps<K, kInterp>;
  const int64_t channels = g.c, points = g.points;
  // Groups of kG points (a whole 64-byte line of each output row), up to
  // kTile channel vectors at a time.
  constexpr int kG = 16;
  constexpr int kTile = 4;
  const bool stream = StreamsOutput(g);
  for (int64_t p0 = p_begin; p0 < p_end; p0 += ST::kB) {
    const int cnt = static_cast<int>(std::min<int64_t>(ST::kB, p_end - p0));
    FillSoaTaps<K, kInterp>(grid + (n * points + p0) * K, cnt, g, st);
    if (g.channels_last) {
      for (int b = 0; b < cnt; ++b) {
        PointTaps<K, kInterp> pt;
        LoadPointTaps(st, b, pixels, stride, zeros, &pt);
        ChannelsLastPoint(pt, channels, output + (n * points + p0 + b) * channels, stream, fill,
                          st->outside[b]);
      }
      continue;
    }
    for (int b0 = 0; b0 < cnt; b0 += kG) {
      const int valid = std::min(kG, cnt - b0);
      for (int64_t c0 = 0; c0 < channels; c0 += kTile * 8) {
        const int vecs = static_cast<int>(std::min<int64_t>(kTile, CeilDiv(channels - c0, 8)));
        F8 tile[kTile][kG];
        for (int j = 0; j < kG; ++j) {
          PointTaps<K, kInterp> pt;
          LoadPointTaps(st, b0 + j, pixels, stride, zeros, &pt);
          const float outside = st->outside[b0 + j];
          for (int v = 0; v < vecs; ++v) {
            tile[v][j] = PointSumWithFill(pt, c0 + v * 8, fill, outside);
          }
        }
        float* dst = output + n * channels * points + p0 + b0;
        for (int v = 0; v < vecs; ++v) {
          const int64_t c = c0 + v * 8;
          const int nrows = static_cast<int>(std::min<int64_t>(8, channels - c));
          StoreTransposed(tile[v], dst + c * points, points, nrows, valid, stream);
        }
      }
    }
  }
  FinishOutputStores(stream);
}

// Channels last: in place, `buffer` a row of g.c zeros; channels first:
// through the copy, made in `buffer`.
template <int K, int kInterp>
void Sample(const Geometry& g, const float* input, const float* grid, float* output, int64_t n,
            int64_t p_begin, int64_t p_end, float* buffer, const float* fill) {
  auto st = NewObject<SoaTaps<K, kInterp>>("tap table");
  if (g.channels_last) {
    std::fill(buffer, buffer + g.c, 0.f);
    SamplePoints<K, kInterp>(g, input + n * g.plane * g.c, g.c, buffer, fill, grid, output, n,
                             p_begin, p_end, st.get());
    return;
  }
  const int64_t stride = ChannelsLastStride(g.c);
  float* zeros = buffer + g.plane * stride;
  CopyToChannelsLast(g, input, n, buffer);
  std::fill(zeros, zeros + stride, 0.f);
  SamplePoints<K, kInterp>(g, buffer, stride, zeros, fill, grid, output, n, p_begin, p_end,
                           st.get());
}

}  // namespace

void ForwardTilesF32(const Geometry& g, int64_t interpolation, const float* input,
                     const float* grid, float* output, int64_t n, int64_t p_begin, int64_t p_end) {
  auto buffer = g.channels_last ? NewArray<float>("row of zeros", g.c)
                                : NewArray<float>("channels-last copy of a batch element",
                                                  ViaChannelsLastBufferFloats(g));
  std::unique_ptr<float[]> fill;  // whole vectors of 8 channels
  if (g.fill != nullptr) {
    const int64_t stride = ChannelsLastStride(g.c);
    fill = NewArray<float>("fill values", stride);
    std::copy_n(static_cast<const float*>(g.fill), g.c, fill.get());
    std::fill(fill.get() + g.c, fill.get() + stride, 0.f);
  }
  DispatchKernel(g.k, interpolation, [&](auto k, auto interp) {
    Sample<decltype(k)::value, decltype(interp)::value>(g, input, grid, output, n, p_begin, p_end,
                                                        buffer.get(), fill.get());
  });
}

}  // namespace gs_cpu
