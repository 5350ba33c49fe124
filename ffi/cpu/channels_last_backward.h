// The CPU backward's channel loops for channels-last data: per point of a
// block and per in-range tap (from FillTaps), grad_input[tap][c] +=
// weight * grad_out[c] over the task's channels, and, for the grid gradient,
// the dot product over those channels of grad_out with the input at the tap.
//
// Why: channels are contiguous here, so both loops vectorize across
// channels, except that a dot product summed channel by channel is one
// chain of dependent adds, which would make the channels-last backward
// slower than the channels-first one. The dot product is therefore summed in
// kLanes lanes (lane l takes channels l, l + kLanes, ...; channels past the
// end add 0 * 0) and the lanes are then added pairwise: (l, l + 4), then
// (l, l + 2), then (0, 1), an order the code spells out, so that every
// vector width computes the same bits.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_CHANNELS_LAST_BACKWARD_H_
#define JAX_GRIDSAMPLE_FFI_CPU_CHANNELS_LAST_BACKWARD_H_

#include <cstdint>

#include "grid_sample_cpu.h"

namespace gs_cpu {

// The arrays of one batch element and channel range [c_begin, c_end)
// (channels last: point / pixel p starts at p * channels): grad_out,
// input and the grad_input accumulator (null when not wanted).
template <typename T>
struct ChannelsLastBlock {
  const T* grad_out;
  const T* input;
  T* gi;
  int64_t channels, c_begin, c_end;
};

// Lanes of the dot product (see the header comment).
inline constexpr int kChannelLanes = 8;

// gi[c] = gi[c] + w * g[c] for c < n, kChannelLanes at a time (no alias
// checks or peeling: the runs are short).
template <typename T>
GS_CPU_INLINE void AddScaledRun(T* __restrict gi, T w, const T* __restrict g, int64_t n) {
  constexpr int kL = kChannelLanes;
  int64_t c = 0;
  for (; c + kL <= n; c += kL) {
    for (int l = 0; l < kL; ++l) gi[c + l] = gi[c + l] + w * g[c + l];
  }
  for (; c < n; ++c) gi[c] = gi[c] + w * g[c];
}

// Sum over c < n of g[c] * src[c], in the order of the header comment.
template <typename T>
GS_CPU_INLINE T DotRun(const T* __restrict g, const T* __restrict src, int64_t n) {
  constexpr int kL = kChannelLanes;
  T lane[kL] = {};
  int64_t c = 0;
  for (; c + kL <= n; c += kL) {
    for (int l = 0; l < kL; ++l) lane[l] = lane[l] + g[c + l] * src[c + l];
  }
  if (c < n) {
    for (int l = 0; l < kL; ++l) lane[l] = lane[l] + (c + l < n ? g[c + l] * src[c + l] : T(0));
  }
  for (int l = 0; l < 4; ++l) lane[l] = lane[l] + lane[l + 4];
  for (int l = 0; l < 2; ++l) lane[l] = lane[l] + lane[l + 2];
  return lane[0] + lane[1];
}

// The block's points b < cnt (point index pidx[b] within the batch element,
// its taps in `tb`): the grad_input scatter (if blk.gi) and, if gacc, the
// grid-gradient sums gacc[b * K + a] += dot(tap t) * tb.gw[b][a][t], taps
// in order.
template <typename T, int K, int kInterp>
GS_CPU_INLINE void ChannelsLastPoints(const ChannelsLastBlock<T>& blk,
                                      const TapBlock<T, K, kInterp>& tb, int cnt,
                                      const int64_t* pidx, T* gacc) {
  const int64_t channels = blk.channels, cn = blk.c_end - blk.c_begin;
  for (int b = 0; b < cnt; ++b) {
    const T* g = blk.grad_out + pidx[b] * channels + blk.c_begin;
    for (int t = 0; t < tb.ntaps[b]; ++t) {
      const int64_t off = tb.off[b][t] * channels + blk.c_begin;
      if (blk.gi != nullptr) AddScaledRun(blk.gi + off, tb.w[b][t], g, cn);
      if (gacc != nullptr) {
        const T dot = DotRun(g, blk.input + off, cn);
        for (int a = 0; a < K; ++a) gacc[b * K + a] += dot * tb.gw[b][a][t];
      }
    }
  }
}

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_CHANNELS_LAST_BACKWARD_H_
