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
// (l, l + 2), then (0, 1). The portable form spells out that order, so that
// the AVX2 form (channels_last_backward_avx2.cc) gives bitwise its results.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_CHANNELS_LAST_BACKWARD_H_
#define JAX_GRIDSAMPLE_FFI_CPU_CHANNELS_LAST_BACKWARD_H_

#include <cstdint>
#include <type_traits>

#include "grid_sample_cpu.h"

namespace gs_cpu {

// The arrays of one batch element and channel range [c_begin, c_end)
// (channels last: point / pixel p starts at p * channels): grad_out,
// input and the grad_input accumulator (null when not wanted).
template <typename Fmt>
struct ChannelsLastBlock {
  const typename Fmt::Storage* grad_out;
  const typename Fmt::Storage* input;
  typename Fmt::Compute* gi;
  int64_t channels, c_begin, c_end;
};

// Portable channel runs, any format: grad_out values already in the compute
// type (g), input values loaded from storage.
template <typename Fmt>
struct PortableChannelRun {
  using S = typename Fmt::Storage;
  using T = typename Fmt::Compute;
  static constexpr int kLanes = 8;

  // gi[c] = gi[c] + w * g[c] for c < n.
  static GS_CPU_INLINE void AddScaled(T* gi, T w, const T* g, int64_t n) {
    for (int64_t c = 0; c < n; ++c) gi[c] = gi[c] + w * g[c];
  }

  // Sum over c < n of g[c] * src[c], in the order of the header comment.
  static GS_CPU_INLINE T Dot(const T* g, const S* src, int64_t n) {
    T lane[kLanes] = {};
    int64_t c = 0;
    for (; c + kLanes <= n; c += kLanes) {
      for (int l = 0; l < kLanes; ++l) lane[l] = lane[l] + g[c + l] * Fmt::Load(src[c + l]);
    }
    if (c < n) {
      for (int l = 0; l < kLanes; ++l) {
        const T prod = c + l < n ? g[c + l] * Fmt::Load(src[c + l]) : T(0);
        lane[l] = lane[l] + prod;
      }
    }
    for (int l = 0; l < 4; ++l) lane[l] = lane[l] + lane[l + 4];
    for (int l = 0; l < 2; ++l) lane[l] = lane[l] + lane[l + 2];
    return lane[0] + lane[1];
  }
};

// The block's points b < cnt (point index pidx[b] within the batch element,
// its taps in `tb`): the grad_input scatter (if blk.gi) and, if gacc, the
// grid-gradient sums gacc[b * K + a] += dot(tap t) * tb.gw[b][a][t], taps
// in order. gvals: scratch for c_end - c_begin compute-type values. Run
// supplies AddScaled and Dot (PortableChannelRun, or the AVX2 form).
template <typename Run, typename Fmt, int K, int kInterp>
GS_CPU_INLINE void ChannelsLastPoints(const ChannelsLastBlock<Fmt>& blk,
                                      const TapBlock<typename Fmt::Compute, K, kInterp>& tb,
                                      int cnt, const int64_t* pidx,
                                      typename Fmt::Compute* gvals, typename Fmt::Compute* gacc) {
  using T = typename Fmt::Compute;
  const int64_t channels = blk.channels, cn = blk.c_end - blk.c_begin;
  for (int b = 0; b < cnt; ++b) {
    const auto* go = blk.grad_out + pidx[b] * channels + blk.c_begin;
    const T* g;
    if constexpr (std::is_same_v<typename Fmt::Storage, T>) {
      g = go;
    } else {
      for (int64_t c = 0; c < cn; ++c) gvals[c] = Fmt::Load(go[c]);
      g = gvals;
    }
    const int nt = tb.ntaps[b];
    for (int t = 0; t < nt; ++t) {
      const int64_t off = tb.off[b][t] * channels + blk.c_begin;
      if (blk.gi != nullptr) Run::AddScaled(blk.gi + off, tb.w[b][t], g, cn);
      if (gacc != nullptr) {
        const T dot = Run::Dot(g, blk.input + off, cn);
        for (int a = 0; a < K; ++a) gacc[b * K + a] += dot * tb.gw[b][a][t];
      }
    }
  }
}

// ChannelsLastPoints for float32 with AVX2 + FMA (call only when
// HasAvx2Fma()); bitwise the portable form's results. The target is on this
// first declaration: GCC ignores one added by the later definition of a
// template.
template <int K, int kInterp>
#if GS_CPU_HAVE_AVX2_PATH
__attribute__((target("avx2,fma")))
#endif
void ChannelsLastPointsAvx2F32(const ChannelsLastBlock<gs::F32Format>& blk,
                               const TapBlock<float, K, kInterp>& tb, int cnt,
                               const int64_t* pidx, float* gacc);

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_CHANNELS_LAST_BACKWARD_H_
