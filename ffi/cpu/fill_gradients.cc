// The gradients of "constant" padding's fill term (docs/semantics.md, "The
// fill value"; jax_gridsample/_fill.py) in one pass over grad_output; see
// fill_gradients.h.
//
// Work is split over (batch element, chunk of points); each task writes its
// points' grid gradients and a row of per-channel partial sums, which are
// added in task order afterwards: the same bits on any number of threads.
#include "fill_gradients.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>

#include "../common/grid_sample_math.h"
#include "grid_sample_cpu.h"
#include "parallel.h"

namespace gs_cpu {
namespace {

// One fill axis of `cnt` points (coordinate stride K): its share of weight
// inside (gs::SubtractOutsideWeight), and its derivative times the chain
// factor. Its taps are those of "zeros" (padding and align_corners constants
// here, so that the loop vectorizes across points; I as in TapIndex).
template <typename T, int K, int kInterp, bool kAlign, typename I>
GS_CPU_INLINE void AxisShares(const T* coord, int64_t cnt, int64_t size, T* share, T* dshare) {
  constexpr int kT1 = gs::TapsPerAxis(kInterp);
  for (int64_t b = 0; b < cnt; ++b) {
    gs::AxisTaps<T, kT1, I> t;
    gs::ComputeAxisTaps<kInterp, T, I>(coord[b * K], size, gs::kZeros, kAlign, &t);
    T s = T(1), ds = T(0);
    for (int i = 0; i < kT1; ++i) {
      s = gs::SubtractOutsideWeight(s, t.idx[i], t.w[i]);
      ds = gs::SubtractOutsideWeight(ds, t.idx[i], t.dw[i]);
    }
    share[b] = s;
    dshare[b] = ds * t.dmult;
  }
}

// Task (n, chunk) of the pass for one block of points at a time.
template <typename T, int K, int kInterp>
GS_CPU_INLINE void FillTask(const Geometry& g, const T* grad_output, const T* grid,
                            const T* fill, int64_t n, int64_t p_begin, int64_t p_end,
                            T* grid_grad, bool add_to_grid, T* partial) {
  const int64_t sizes[3] = {g.w, g.h, g.d};
  T outside[kFillBlock], weighted[kFillBlock], dw[K][kFillBlock];
  T share[K][kFillBlock], dshare[K][kFillBlock];
  for (int64_t p0 = p_begin; p0 < p_end; p0 += kFillBlock) {
    const int64_t cnt = std::min(kFillBlock, p_end - p0);
    const T* coords = grid + (n * g.points + p0) * K;
    // W and its derivatives, x first: a fill axis contributes its shares, another 1 and 0.
    for (int a = 0; a < K; ++a) {
      if (!gs::ReadsFill(g.axis_padding[a])) {
        std::fill(share[a], share[a] + cnt, T(1));
        std::fill(dshare[a], dshare[a] + cnt, T(0));
      } else if (sizes[a] <= std::numeric_limits<int32_t>::max()) {
        if (g.align_corners) {
          AxisShares<T, K, kInterp, true, int32_t>(coords + a, cnt, sizes[a], share[a], dshare[a]);
        } else {
          AxisShares<T, K, kInterp, false, int32_t>(coords + a, cnt, sizes[a], share[a], dshare[a]);
        }
      } else if (g.align_corners) {
        AxisShares<T, K, kInterp, true, int64_t>(coords + a, cnt, sizes[a], share[a], dshare[a]);
      } else {
        AxisShares<T, K, kInterp, false, int64_t>(coords + a, cnt, sizes[a], share[a], dshare[a]);
      }
    }
    for (int64_t b = 0; b < cnt; ++b) {
      T inside = T(1);
      for (int a = 0; a < K; ++a) inside = inside * share[a][b];
      outside[b] = T(1) - inside;
      for (int a = 0; a < K; ++a) {
        T others = T(1);
        for (int o = 0; o < K; ++o) others = o == a ? others : others * share[o][b];
        dw[a][b] = others * dshare[a][b];
      }
      weighted[b] = T(0);
    }
    // One pass over the block's grad_output.
    if (!g.channels_last) {
      for (int64_t c = 0; c < g.c; ++c) {
        const T* go = grad_output + (n * g.c + c) * g.points + p0;
        const T f = fill[c];
        if (partial == nullptr) {
          for (int64_t b = 0; b < cnt; ++b) weighted[b] = weighted[b] + f * go[b];
          continue;
        }
        // With kLanes independent sums (point b adds to sum b % kLanes), added in a
        // fixed order: a loop the compiler vectorizes, where one running sum would not;
        // each value of grad_output read once for both sums.
        constexpr int kLanes = 8;
        T lanes[kLanes] = {};
        int64_t b = 0;
        for (; b + kLanes <= cnt; b += kLanes) {
          for (int j = 0; j < kLanes; ++j) {
            weighted[b + j] = weighted[b + j] + f * go[b + j];
            lanes[j] = lanes[j] + go[b + j] * outside[b + j];
          }
        }
        for (; b < cnt; ++b) {
          weighted[b] = weighted[b] + f * go[b];
          lanes[b % kLanes] = lanes[b % kLanes] + go[b] * outside[b];
        }
        T acc = T(0);
        for (int j = 0; j < kLanes; ++j) acc = acc + lanes[j];
        partial[c] = partial[c] + acc;
      }
    } else {
      for (int64_t b = 0; b < cnt; ++b) {
        const T* go = grad_output + (n * g.points + p0 + b) * g.c;
        T s = T(0);
        for (int64_t c = 0; c < g.c; ++c) {
          s = s + fill[c] * go[c];
          if (partial != nullptr) partial[c] = partial[c] + go[c] * outside[b];
        }
        weighted[b] = s;
      }
    }
    if (grid_grad != nullptr) {
      T* out = grid_grad + (n * g.points + p0) * K;
      for (int64_t b = 0; b < cnt; ++b) {
        for (int a = 0; a < K; ++a) {
          const T term = gs::FillTerm(-weighted[b], dw[a][b]);  // 0 where dW is
          out[b * K + a] = add_to_grid ? out[b * K + a] + term : term;
        }
      }
    }
  }
}

#if GS_CPU_HAVE_AVX2_PATH
// The same source compiled for AVX2 + FMA (float32, where the CPU has them):
// the per-point loops vectorize 8 wide. Contraction is off: the same bits.
template <typename T, int K, int kInterp>
__attribute__((target("avx2,fma"))) void FillTaskAvx2(const Geometry& g, const T* grad_output,
                                                      const T* grid, const T* fill, int64_t n,
                                                      int64_t p_begin, int64_t p_end,
                                                      T* grid_grad, bool add_to_grid,
                                                      T* partial) {
  FillTask<T, K, kInterp>(g, grad_output, grid, fill, n, p_begin, p_end, grid_grad, add_to_grid,
                          partial);
}
#endif

// Task (n, chunk), the AVX2 build where it runs.
template <typename T, int K, int kInterp>
void RunFillTask(const Geometry& g, const T* grad_output, const T* grid, const T* fill, int64_t n,
                 int64_t p_begin, int64_t p_end, T* grid_grad, bool add_to_grid, T* partial) {
#if GS_CPU_HAVE_AVX2_PATH
  if (std::is_same_v<T, float> && HasAvx2Fma()) {
    return FillTaskAvx2<T, K, kInterp>(g, grad_output, grid, fill, n, p_begin, p_end, grid_grad,
                                       add_to_grid, partial);
  }
#endif
  FillTask<T, K, kInterp>(g, grad_output, grid, fill, n, p_begin, p_end, grid_grad, add_to_grid,
                          partial);
}

}  // namespace

template <typename T>
void FillGradientsOfPoints(const Geometry& g, int64_t interpolation, const T* grad_output,
                           const T* grid, const T* fill, int64_t n, int64_t p_begin,
                           int64_t p_end, T* grid_grad, bool add_to_grid, T* partial) {
  DispatchKernel(g.k, interpolation, [&](auto k, auto interp) {
    RunFillTask<T, decltype(k)::value, decltype(interp)::value>(
        g, grad_output, grid, fill, n, p_begin, p_end, grid_grad, add_to_grid, partial);
  });
}

template <typename T>
void AddFillPartials(const Geometry& g, const T* partials, T* fill_grad) {
  std::fill(fill_grad, fill_grad + g.c, T(0));
  const int64_t rows = g.n * CeilDiv(g.points, kFillChunk);
  for (int64_t row = 0; row < rows; ++row) {  // in (n, chunk) order
    for (int64_t c = 0; c < g.c; ++c) fill_grad[c] = fill_grad[c] + partials[row * g.c + c];
  }
}

template <typename T>
void FillGradients(ffi::ThreadPool& pool, const Geometry& g, int64_t interpolation,
                   const T* grad_output, const T* grid, const T* fill, T* grid_grad,
                   bool add_to_grid, T* fill_grad) {
  if (g.n == 0 || g.points == 0) {
    if (fill_grad != nullptr) std::fill(fill_grad, fill_grad + g.c, T(0));
    return;
  }
  const int64_t chunks_per_n = CeilDiv(g.points, kFillChunk);
  const int64_t tasks = g.n * chunks_per_n;
  std::unique_ptr<T[]> partials;
  if (fill_grad != nullptr) {
    partials = NewArray<T>("fill-gradient partial sums", tasks * g.c);
    std::fill(partials.get(), partials.get() + tasks * g.c, T(0));
  }
  ParallelFor(pool, tasks, [&](int64_t task) {
    const int64_t n = task / chunks_per_n, p_begin = (task % chunks_per_n) * kFillChunk;
    FillGradientsOfPoints<T>(g, interpolation, grad_output, grid, fill, n, p_begin,
                             std::min(g.points, p_begin + kFillChunk), grid_grad, add_to_grid,
                             partials ? partials.get() + task * g.c : nullptr);
  });
  if (fill_grad != nullptr) AddFillPartials<T>(g, partials.get(), fill_grad);
}

#define GS_FILL_GRADIENTS(T)                                                                 \
  template void FillGradients<T>(ffi::ThreadPool&, const Geometry&, int64_t, const T*, const T*, \
                                 const T*, T*, bool, T*);                                      \
  template void FillGradientsOfPoints<T>(const Geometry&, int64_t, const T*, const T*,         \
                                         const T*, int64_t, int64_t, int64_t, T*, bool, T*);   \
  template void AddFillPartials<T>(const Geometry&, const T*, T*);
GS_FILL_GRADIENTS(float)
GS_FILL_GRADIENTS(double)
#undef GS_FILL_GRADIENTS

}  // namespace gs_cpu
