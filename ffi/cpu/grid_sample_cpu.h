// Pieces shared by the CPU forward and backward handlers: argument
// validation, the problem geometry, per-block tap tables and the single
// dtype / rank / mode / layout dispatch point.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_GRID_SAMPLE_CPU_H_
#define JAX_GRIDSAMPLE_FFI_CPU_GRID_SAMPLE_CPU_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <type_traits>

#include "../common/grid_sample_dtypes.h"
#include "../common/grid_sample_math.h"
#include "../common/grid_sample_validate.h"
#include "../common/handler_exceptions.h"
#include "parallel.h"
#include "xla/ffi/api/ffi.h"

// x86-64 with GCC or Clang: functions with __attribute__((target("avx2,fma")))
// are compiled next to the x86-64-v2 baseline and chosen at run time.
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define GS_CPU_HAVE_AVX2_PATH 1
#define GS_CPU_INLINE __attribute__((always_inline)) inline
#define GS_CPU_INLINE_LAMBDA __attribute__((always_inline))
#else
#define GS_CPU_HAVE_AVX2_PATH 0
#define GS_CPU_INLINE inline
#define GS_CPU_INLINE_LAMBDA
#endif
// Before a per-point coordinate loop: clang's cost model finds some of them
// (reflection's division and floor) not worth vectorizing, where GCC's does,
// and scalar they cost several times more.
#if defined(__clang__)
#define GS_CPU_VECTORIZE_LOOP _Pragma("clang loop vectorize(enable)")
#else
#define GS_CPU_VECTORIZE_LOOP
#endif
#if defined(__GNUC__) || defined(__clang__)
#define GS_CPU_NOINLINE __attribute__((noinline))
#else
#define GS_CPU_NOINLINE
#endif
// The target of the vector kernels (vec8.h): AVX2 + FMA on x86-64, where
// they run only once HasAvx2Fma() said so; the baseline elsewhere (aarch64:
// NEON, whose fused multiply-add every core has).
#if GS_CPU_HAVE_AVX2_PATH
#define GS_CPU_VECTOR __attribute__((target("avx2,fma")))
#define GS_CPU_VECTOR_INLINE __attribute__((target("avx2,fma"), always_inline)) inline
#else
#define GS_CPU_VECTOR
#define GS_CPU_VECTOR_INLINE inline
#endif

namespace gs_cpu {

namespace ffi = xla::ffi;

// Whether this CPU has AVX2 and FMA (false on other architectures).
bool HasAvx2Fma();

// Whether the vector kernels (vec8.h) run here: x86-64 with AVX2 + FMA, or
// aarch64.
inline bool HasVectorKernels() {
#if defined(__aarch64__)
  return true;
#else
  return HasAvx2Fma();
#endif
}

// "avx2", "neon" or "baseline": the instruction set the float32 kernels use
// here.
inline const char* KernelInstructionSet() {
  return HasAvx2Fma() ? "avx2" : HasVectorKernels() ? "neon" : "baseline";
}

static_assert(std::is_same_v<ffi::NativeType<ffi::DataType::F16>, gs::F16Format::Storage>);
static_assert(std::is_same_v<ffi::NativeType<ffi::DataType::BF16>, gs::BF16Format::Storage>);
static_assert(std::is_same_v<ffi::NativeType<ffi::DataType::F32>, float>);
static_assert(std::is_same_v<ffi::NativeType<ffi::DataType::F64>, double>);

// Validation and geometry are shared with the other platforms' handlers
// (ffi/common/grid_sample_validate.h); errors start with "grid_sample (cpu): ".
inline constexpr const char* kPlatform = "cpu";
using gs_ffi::DTypeName;
using gs_ffi::Geometry;

// Whether every plane offset and axis size of g fits int32 (the vector
// kernels' tables).
inline bool FitsInt32Offsets(const Geometry& g) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  return g.plane <= kMax && g.d <= kMax && g.h <= kMax && g.w <= kMax;
}

inline ffi::Error InvalidArgument(const std::string& msg) {
  return gs_ffi::InvalidArgument(kPlatform, msg);
}

using gs_ffi::AllocationFailure;

// `count` (at least 1) default-initialized (not zeroed) values of T, or
// AllocationFailure naming `buffer`; NewObject: one T.
template <typename T>
std::unique_ptr<T[]> NewArray(const char* buffer, int64_t count) {
  const auto n = static_cast<uint64_t>(std::max<int64_t>(1, count));
  T* p = new (std::nothrow) T[n];
  if (p == nullptr) throw AllocationFailure{buffer, n * sizeof(T)};
  return std::unique_ptr<T[]>(p);
}

template <typename T>
std::unique_ptr<T> NewObject(const char* buffer) {
  T* p = new (std::nothrow) T;
  if (p == nullptr) throw AllocationFailure{buffer, sizeof(T)};
  return std::unique_ptr<T>(p);
}

// Taps of a block of output points: the in-range taps of each point (tensor
// product of the axes' taps, out-of-range ones left out, order kept) as
// offsets into one input plane, their weights, and for the grid gradient the
// per-axis weight derivatives and the per-axis coordinate chain factor.
// Points whose taps are all in range, with each run of kT1 taps along x
// contiguous in memory, are listed in `full`, the others in `part` (by tap
// count), so that the channel loops need no per-tap branch. Blocks are large
// because channel loops visit a whole input plane once per block.
constexpr int BlockPoints(int taps) { return std::clamp(8192 / taps, 16, 2048); }

template <typename T, int K, int kInterp>
struct TapBlock {
  static constexpr int kT1 = gs::TapsPerAxis(kInterp);
  static constexpr int kTaps = K == 2 ? kT1 * kT1 : kT1 * kT1 * kT1;
  static constexpr int kBlock = BlockPoints(kTaps);
  // Pass 1 of FillTaps, per axis a, tap i, point b: index (-1: out of
  // range), weight, its derivative, and the coordinate chain factor
  // d(padded coordinate)/d(normalized coordinate).
  int64_t aidx[K][kT1][kBlock];
  T aw[K][kT1][kBlock];
  T adw[K][kT1][kBlock];
  T adm[K][kBlock];
  // Pass 2, per point b and tap t (in-range taps first for `part` points).
  int64_t off[kBlock][kTaps];
  T w[kBlock][kTaps];
  T gw[kBlock][K][kTaps];     // d(weight)/d(padded coordinate of axis a)
  int ntaps[kBlock];          // in-range taps of each point
  int full[kBlock];           // points with all kTaps taps in range, x-runs contiguous
  int part[kBlock];           // the other points, by increasing tap count
  int part_begin[kTaps + 2];  // part[part_begin[n] .. part_begin[n + 1]): n taps
  int n_full;
  T outside[kBlock];  // the forward's, with a fill value: each point's 1 - W (FillWeights)
};

// With a "constant" axis (g.fill): per point b < count, the weight of the
// fill value, 1 - W (gs::SubtractOutsideWeight), from per-axis taps of pass 1:
// idx[a][i][b] (-1: outside) and w[a][i][b] of tap i of axis a.
template <int K, int kT1, typename T, typename Indices, typename Weights>
GS_CPU_INLINE void FillWeights(const Geometry& g, int64_t count, const Indices& idx,
                               const Weights& w, T* outside) {
  for (int64_t b = 0; b < count; ++b) outside[b] = T(1);  // W so far
  for (int a = 0; a < K; ++a) {
    if (!gs::ReadsFill(g.axis_padding[a])) continue;
    for (int64_t b = 0; b < count; ++b) {
      T s = T(1);
      for (int i = 0; i < kT1; ++i) s = gs::SubtractOutsideWeight(s, idx[a][i][b], w[a][i][b]);
      outside[b] = outside[b] * s;
    }
  }
  for (int64_t b = 0; b < count; ++b) outside[b] = T(1) - outside[b];
}

// Pass 1 of FillTaps: the taps of one axis for `count` points (coordinate
// stride K), stored axis-major so that the loop vectorizes across points.
// I is the index type of the math (int32 when the axis size allows it, which
// vectorizes); indices are stored as int64.
// `pad` and `align` are constants where the caller is inlined into a
// per-constant instantiation (float32), run-time values otherwise.
template <typename T, int K, int kInterp, typename I, typename TB>
GS_CPU_INLINE void AxisTapsSoa(const T* coord, int64_t count, int64_t size, int64_t pad, bool align,
                               int axis, TB* tb) {
  constexpr int kT1 = TB::kT1;
  int64_t (*idx)[TB::kBlock] = tb->aidx[axis];
  T(*w)[TB::kBlock] = tb->aw[axis];
  T(*dw)[TB::kBlock] = tb->adw[axis];
  T* dmult = tb->adm[axis];
  for (int64_t b = 0; b < count; ++b) {
    gs::AxisTaps<T, kT1, I> t;
    gs::ComputeAxisTaps<kInterp, T, I>(coord[b * K], size, pad, align, &t);
    for (int i = 0; i < kT1; ++i) {
      idx[i][b] = t.idx[i];
      w[i][b] = t.w[i];
      dw[i][b] = t.dw[i];
    }
    dmult[b] = t.dmult;
  }
}

// Axes too long for int32 index math, compiled once per (T, K, kInterp) with
// run-time padding and align_corners.
template <typename T, int K, int kInterp, typename TB>
GS_CPU_NOINLINE void AxisTapsInt64(const T* coord, int64_t count, int64_t size, int64_t pad,
                                   bool align, int axis, TB* tb) {
  AxisTapsSoa<T, K, kInterp, int64_t>(coord, count, size, pad, align, axis, tb);
}

// Pass 1 for axis `axis` (0 = x) of size `size`: the vectorized int32 loop
// when the axis allows it, else AxisTapsInt64.
template <typename T, int K, int kInterp, typename TB>
GS_CPU_INLINE void AxisTaps(const T* grid, int64_t count, int64_t size, int64_t pad, bool align,
                            int axis, TB* tb) {
  if (size <= std::numeric_limits<int32_t>::max()) {
    AxisTapsSoa<T, K, kInterp, int32_t>(grid + axis, count, size, pad, align, axis, tb);
  } else {
    AxisTapsInt64<T, K, kInterp>(grid + axis, count, size, pad, align, axis, tb);
  }
}

// Pass 2 of FillTaps for point b: the tensor product of the axes' taps, in
// tap order, out-of-range taps with offset -1. Returns whether the point is
// full: every tap in range and each x-run of kT1 taps contiguous in memory
// (bicubic border / reflection taps may repeat near the edges, wrap taps at
// the seam are not), and for bilinear its two rows distinct.
template <typename T, int K, int kInterp>
GS_CPU_INLINE bool ProductTaps(const Geometry& g, bool need_grad, int64_t b,
                               TapBlock<T, K, kInterp>* tb) {
  constexpr int kT1 = TapBlock<T, K, kInterp>::kT1;
  constexpr int kTz = K == 3 ? kT1 : 1;
  const int64_t h = g.h, w = g.w;
  int64_t ix[kT1], iy[kT1], iz[kTz];
  T wx[kT1], wy[kT1], wz[kTz];
  for (int i = 0; i < kT1; ++i) {
    ix[i] = tb->aidx[0][i][b];
    iy[i] = tb->aidx[1][i][b];
    wx[i] = tb->aw[0][i][b];
    wy[i] = tb->aw[1][i][b];
  }
  for (int l = 0; l < kTz; ++l) {
    iz[l] = K == 3 ? tb->aidx[K - 1][l][b] : int64_t{0};
    wz[l] = K == 3 ? tb->aw[K - 1][l][b] : T(1);
  }
  bool full = ix[0] >= 0;
  for (int i = 1; i < kT1; ++i) full &= ix[i] == ix[0] + i;
  for (int j = 0; j < kT1; ++j) full &= iy[j] >= 0;
  // Bilinear reads and writes its two rows together (TapRowPair): they must be two rows
  // (wrap on an axis of size 1 gives one row twice).
  if constexpr (kT1 == 2) full &= iy[0] != iy[1];
  for (int l = 0; l < kTz; ++l) full &= iz[l] >= 0;
  for (int l = 0; l < kTz; ++l) {
    for (int j = 0; j < kT1; ++j) {
      for (int i = 0; i < kT1; ++i) {
        const int t = (l * kT1 + j) * kT1 + i;
        const bool valid = (ix[i] >= 0) & (iy[j] >= 0) & (iz[l] >= 0);
        tb->off[b][t] = valid ? (iz[l] * h + iy[j]) * w + ix[i] : int64_t{-1};
        tb->w[b][t] = K == 3 ? wx[i] * wy[j] * wz[l] : wx[i] * wy[j];
        if (!need_grad) continue;
        if (K == 3) {
          tb->gw[b][0][t] = tb->adw[0][i][b] * wy[j] * wz[l];
          tb->gw[b][1][t] = wx[i] * tb->adw[1][j][b] * wz[l];
          tb->gw[b][K - 1][t] = wx[i] * wy[j] * tb->adw[K - 1][l][b];
        } else {
          tb->gw[b][0][t] = tb->adw[0][i][b] * wy[j];
          tb->gw[b][1][t] = wx[i] * tb->adw[1][j][b];
        }
      }
    }
  }
  return full;
}

// Moves the in-range taps of point b to the front, order kept; returns
// their count.
template <typename T, int K, int kInterp>
GS_CPU_INLINE int CompactTaps(bool need_grad, int64_t b, TapBlock<T, K, kInterp>* tb) {
  int n = 0;
  for (int t = 0; t < TapBlock<T, K, kInterp>::kTaps; ++t) {
    if (tb->off[b][t] < 0) continue;
    tb->off[b][n] = tb->off[b][t];
    tb->w[b][n] = tb->w[b][t];
    if (need_grad) {
      for (int a = 0; a < K; ++a) tb->gw[b][a][n] = tb->gw[b][a][t];
    }
    ++n;
  }
  return n;
}

// The padding of axis `axis` (0 = x) under a dispatched `pad`
// (DispatchPadding): pad itself, or the axis's own where pad is kPerAxis.
GS_CPU_INLINE int64_t AxisPadding(int64_t pad, const Geometry& g, int axis) {
  return pad == gs_ffi::kPerAxis ? g.axis_padding[axis] : pad;
}

// AxisTaps for axis `axis` under a dispatched `pad`. Where the axes' modes
// differ (kPerAxis) in the float32 build (kSpecializedTaps), the axis's own
// mode as a constant too, so that its loop vectorizes as a uniform call's.
template <typename T, int K, int kInterp, typename TB>
GS_CPU_INLINE void AxisTapsUnder(const T* grid, int64_t count, const Geometry& g, int64_t pad,
                                 bool align, int axis, TB* tb) {
  const int64_t size = axis == 0 ? g.w : axis == 1 ? g.h : g.d;
  if (!std::is_same_v<T, float> || pad != gs_ffi::kPerAxis) {
    return AxisTaps<T, K, kInterp>(grid, count, size, AxisPadding(pad, g, axis), align, axis, tb);
  }
  switch (g.axis_padding[axis]) {
    case gs::kZeros:
    case gs::kConstant:  // its taps are those of zeros
      return AxisTaps<T, K, kInterp>(grid, count, size, gs::kZeros, align, axis, tb);
    case gs::kBorder:
      return AxisTaps<T, K, kInterp>(grid, count, size, gs::kBorder, align, axis, tb);
    case gs::kReflection:
      return AxisTaps<T, K, kInterp>(grid, count, size, gs::kReflection, align, axis, tb);
    default:
      return AxisTaps<T, K, kInterp>(grid, count, size, gs::kWrap, align, axis, tb);
  }
}

// Pass 1 of the tap tables: every axis's taps, vectorized (see AxisTapsSoa
// for `pad` and `align`).
template <typename T, int K, int kInterp>
GS_CPU_INLINE void AllAxisTaps(const T* grid, int64_t count, const Geometry& g, int64_t pad,
                               bool align, TapBlock<T, K, kInterp>* tb) {
  for (int a = 0; a < K; ++a) AxisTapsUnder<T, K, kInterp>(grid, count, g, pad, align, a, tb);
}

// FillTaps with the padding and align_corners values `pad`, `align`.
template <typename T, int K, int kInterp>
GS_CPU_INLINE void FillTapsFor(const T* grid, int64_t count, const Geometry& g, int64_t pad,
                               bool align, bool need_grad, TapBlock<T, K, kInterp>* tb,
                               int64_t band_lo, int64_t band_hi) {
  using TB = TapBlock<T, K, kInterp>;
  constexpr int kTaps = TB::kTaps;
  AllAxisTaps<T, K, kInterp>(grid, count, g, pad, align, tb);
  // The band restriction on the last axis.
  for (int i = 0; i < TB::kT1; ++i) {
    int64_t* last = tb->aidx[K - 1][i];
    for (int64_t b = 0; b < count; ++b) {
      const bool in_band = (last[b] >= band_lo) & (last[b] < band_hi);
      last[b] = in_band ? last[b] : -1;
    }
  }
  // Pass 2: per point.
  int n_full = 0, n_part = 0;
  for (int64_t b = 0; b < count; ++b) {
    if (ProductTaps(g, need_grad, b, tb)) {
      tb->ntaps[b] = kTaps;
      tb->full[n_full++] = static_cast<int>(b);
    } else {
      tb->part[n_part++] = static_cast<int>(b);
      tb->ntaps[b] = CompactTaps(need_grad, b, tb);
    }
  }
  tb->n_full = n_full;
  // Stable counting sort of `part` by tap count, so that consumers can loop
  // over points with the same (predictable) number of taps.
  int start[kTaps + 2] = {};
  for (int i = 0; i < n_part; ++i) ++start[tb->ntaps[tb->part[i]] + 1];
  for (int n = 0; n <= kTaps; ++n) start[n + 1] += start[n];
  for (int n = 0; n <= kTaps + 1; ++n) tb->part_begin[n] = start[n];
  int sorted[TB::kBlock];
  for (int i = 0; i < n_part; ++i) sorted[start[tb->ntaps[tb->part[i]]]++] = tb->part[i];
  std::copy(sorted, sorted + n_part, tb->part);
}

// Calls f(pad, align) with `padding` (a validated code, or kPerAxis) and
// `align` as std::integral_constant values.
template <typename F>
void DispatchPaddingCode(int64_t padding, bool align, F&& f) {
  auto with_align = [&](auto pad) {
    if (align) {
      f(pad, std::true_type{});
    } else {
      f(pad, std::false_type{});
    }
  };
  switch (padding) {
    case gs::kZeros:
    case gs::kConstant:  // its taps are those of zeros (the fill value is added later)
      return with_align(std::integral_constant<int64_t, gs::kZeros>{});
    case gs::kBorder: return with_align(std::integral_constant<int64_t, gs::kBorder>{});
    case gs::kReflection: return with_align(std::integral_constant<int64_t, gs::kReflection>{});
    case gs::kWrap: return with_align(std::integral_constant<int64_t, gs::kWrap>{});
    default: return with_align(std::integral_constant<int64_t, gs_ffi::kPerAxis>{});
  }
}

// DispatchPadding with g.padding (kPerAxis where the axes differ: the
// callee then reads each axis's, AxisPadding) and g.align_corners.
template <typename F>
void DispatchPadding(const Geometry& g, F&& f) {
  DispatchPaddingCode(g.padding, g.align_corners, std::forward<F>(f));
}

// Whether the per-point tap loops of dtype T (FillTaps, BuildBandLists)
// are compiled once per padding mode and align_corners, and on x86-64 for
// AVX2 + FMA: float32 only, the dtype the fast paths serve. Everything else
// (float64, float32 on x86-64 CPUs without AVX2) takes one build
// with both as run-time values: the same results (the same IEEE operations,
// no contraction), a fraction of the compile time.
template <typename T>
inline constexpr bool kSpecializedTaps = std::is_same_v<T, float>;

// Calls f(pad, align) with g.padding and g.align_corners, constants where
// kSpecializedTaps<T>. The target is set on the lambdas, since lambdas do not
// inherit their function's; f must be forced inline for the constant to
// reach its loops.
template <typename T, typename F>
void WithTapConstants(const Geometry& g, F&& f) {
  if constexpr (kSpecializedTaps<T>) {
#if GS_CPU_HAVE_AVX2_PATH
    if (!HasAvx2Fma()) return f(g.padding, g.align_corners);
#define GS_CPU_TAPS_TARGET __attribute__((target("avx2,fma")))
#else
#define GS_CPU_TAPS_TARGET
#endif
    return DispatchPadding(g, [&](auto pad, auto align) GS_CPU_TAPS_TARGET {
      f(decltype(pad)::value, decltype(align)::value);
    });
#undef GS_CPU_TAPS_TARGET
  }
  f(g.padding, g.align_corners);
}

// Fills `tb` for `count` (<= kBlock) points whose coordinates start at
// `grid` (k values per point, x first), with the `full` and `part` lists and
// each part point's in-range taps first. Taps whose index along the last axis
// (y in 2D, z in 3D) is outside [band_lo, band_hi) count as out of range:
// the backward uses this to keep a task within the grad_input band it owns.
template <typename T, int K, int kInterp>
void FillTaps(const T* grid, int64_t count, const Geometry& g, bool need_grad,
              TapBlock<T, K, kInterp>* tb, int64_t band_lo = 0,
              int64_t band_hi = std::numeric_limits<int64_t>::max()) {
  WithTapConstants<T>(g, [&](int64_t pad, bool align) GS_CPU_INLINE_LAMBDA {
    FillTapsFor<T, K, kInterp>(grid, count, g, pad, align, need_grad, tb, band_lo, band_hi);
  });
}

// The forward's tables: every tap in its place (offset -1 out of range), no
// lists, no weight derivatives; with a fill value, its weights (outside).
template <typename T, int K, int kInterp>
void FillTapTable(const T* grid, int64_t count, const Geometry& g, TapBlock<T, K, kInterp>* tb) {
  WithTapConstants<T>(g, [&](int64_t pad, bool align) GS_CPU_INLINE_LAMBDA {
    AllAxisTaps<T, K, kInterp>(grid, count, g, pad, align, tb);
    for (int64_t b = 0; b < count; ++b) ProductTaps(g, false, b, tb);
  });
  if (g.fill != nullptr) {
    FillWeights<K, TapBlock<T, K, kInterp>::kT1>(g, count, tb->aidx, tb->aw, tb->outside);
  }
}

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ParallelFor over chunks of `per_chunk` points of each batch element of g:
// f(n, p_begin, p_end) for every one.
template <typename F>
void ParallelForPoints(ffi::ThreadPool& pool, const Geometry& g, int64_t per_chunk, F&& f) {
  const int64_t chunks_per_n = CeilDiv(g.points, per_chunk);
  ParallelFor(pool, g.n * chunks_per_n, [&](int64_t chunk) {
    const int64_t n = chunk / chunks_per_n, p_begin = (chunk % chunks_per_n) * per_chunk;
    f(n, p_begin, std::min(g.points, p_begin + per_chunk));
  });
}

// Whether one task per batch element keeps `threads` threads busy: rounds
// of one element per thread at least 3/4 full.
inline bool ElementsKeepThreadsBusy(int64_t threads, const Geometry& g) {
  threads = std::max<int64_t>(1, threads);
  return g.n >= threads && g.n * 4 >= 3 * threads * CeilDiv(g.n, threads);
}

// Points per parallel chunk: about `target` units of work (taps x channels)
// per chunk, a multiple of the block size. Depends on shapes only.
inline int64_t PointsPerChunk(int64_t points, int64_t channels, int taps, int block,
                              int64_t target = 262144) {
  const int64_t per_point = std::max<int64_t>(1, channels) * taps;
  int64_t pts = CeilDiv(std::max<int64_t>(1, target / per_point), block) * block;
  const int64_t all = CeilDiv(std::max<int64_t>(points, 1), block) * block;
  return std::min(pts, all);
}

// Calls f(integral_constant<int, K>, integral_constant<int, Interp>) for
// spatial rank k and `interpolation`, both validated by MakeGeometry (2 or
// 3; bicubic is the last mode), and returns its result.
template <typename F>
auto DispatchKernel(int k, int64_t interpolation, F&& f) {
  auto with_k = [&](auto kc) {
    switch (interpolation) {
      case gs::kBilinear: return f(kc, std::integral_constant<int, gs::kBilinear>{});
      case gs::kNearest: return f(kc, std::integral_constant<int, gs::kNearest>{});
      default: return f(kc, std::integral_constant<int, gs::kBicubic>{});
    }
  };
  if (k == 2) return with_k(std::integral_constant<int, 2>{});
  return with_k(std::integral_constant<int, 3>{});
}

// The one dispatch point of the kernels' templates: dtype (float32 or
// float64: the half types run the float32 kernels, half_precision.h) x
// spatial rank x interpolation x layout. `f` is called as f(T{},
// integral_constant<int, K>, integral_constant<int, Interp>,
// integral_constant<bool, ChannelsLast>) and returns ffi::Error.
template <typename F>
ffi::Error Dispatch(ffi::DataType dt, int k, int64_t interpolation, bool channels_last, F&& f) {
  auto with_type = [&](auto type) {
    return DispatchKernel(k, interpolation, [&](auto kc, auto ic) -> ffi::Error {
      if (channels_last) return f(type, kc, ic, std::true_type{});
      return f(type, kc, ic, std::false_type{});
    });
  };
  switch (dt) {
    case ffi::DataType::F32: return with_type(float{});
    case ffi::DataType::F64: return with_type(double{});
    default: return InvalidArgument("unsupported dtype");
  }
}

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_GRID_SAMPLE_CPU_H_
