// Per-axis coordinate math of grid_sample, shared by every native kernel.
//
// This header is the single implementation of docs/semantics.md: unnormalize,
// the non-finite/huge guard (step 2), border / reflection / wrap padding with
// their derivatives, and per-axis tap generation for bilinear, nearest and
// bicubic. Each axis has its own padding mode. "constant" is "zeros" here: the
// fill value is a term added around the kernels (jax_gridsample/_fill.py).
// It has no dependency besides <cmath>/<cstdint> and compiles unchanged as C++
// and as CUDA (functions are __host__ __device__ under __CUDACC__).
//
// Template parameter T is the compute type: float for f16/bf16/f32 and double
// for f64.
#ifndef JAX_GRIDSAMPLE_FFI_COMMON_GRID_SAMPLE_MATH_H_
#define JAX_GRIDSAMPLE_FFI_COMMON_GRID_SAMPLE_MATH_H_

#include <cmath>
#include <cstdint>

// Host functions here are forced inline: callers pass the padding mode and
// align_corners as constants, and inlining folds those branches away (nvcc
// inlines device functions on its own).
#ifdef __CUDACC__
#define GS_HOST_DEVICE __host__ __device__
#define GS_MATH(fn) ::fn
#elif defined(__GNUC__) || defined(__clang__)
#define GS_HOST_DEVICE __attribute__((always_inline))
#define GS_MATH(fn) std::fn
#else
#define GS_HOST_DEVICE
#define GS_MATH(fn) std::fn
#endif

namespace gs {

// Attribute values (shared with the Python side; 0-2 are the aclnn API's).
enum Interpolation : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2, kConstant = 3, kWrap = 4 };

// Whether a tap outside the input reads nothing (the fill value, added by the
// caller) along an axis of this padding.
GS_HOST_DEVICE constexpr bool ReadsFill(int64_t padding) {
  return padding == kZeros || padding == kConstant;
}

// Number of taps per axis for each interpolation mode.
GS_HOST_DEVICE constexpr int TapsPerAxis(int interpolation) {
  return interpolation == kBilinear ? 2 : (interpolation == kNearest ? 1 : 4);
}

// Number of taps per point for spatial rank k (2 or 3).
GS_HOST_DEVICE constexpr int TapsPerPoint(int k, int interpolation) {
  const int t1 = TapsPerAxis(interpolation);
  return k == 3 ? t1 * t1 * t1 : t1 * t1;
}

// Cubic convolution constant (Keys), as PyTorch / OpenCV use.
template <typename T>
GS_HOST_DEVICE constexpr T CubicA() {
  return T(-0.75);
}

// Step 1: normalized coordinate c in [-1, 1] -> pixel coordinate u.
// *du receives du/dc.
template <typename T>
GS_HOST_DEVICE inline T Unnormalize(T c, int64_t size, bool align_corners,
                                    T* du) {
  if (align_corners) {
    *du = T(size - 1) / T(2);
    return (c + T(1)) / T(2) * T(size - 1);
  }
  *du = T(size) / T(2);
  return ((c + T(1)) * T(size) - T(1)) / T(2);
}

// From this magnitude on, a T has no fractional bits: 2^23 (float), 2^52
// (double).
template <typename T>
inline constexpr T kNoFractionFrom = sizeof(T) == 4 ? T(8388608.0) : T(4503599627370496.0);

// Step 2: the guard. Replaces NaN / infinite / huge u before any index is
// formed; *dg is 1 when u passes through and 0 when it was replaced.
template <typename T>
GS_HOST_DEVICE inline T Guard(T u, int64_t size, int64_t padding, bool align_corners, T* dg) {
  // Written with selects rather than branches: coordinates are data, and
  // mispredicted branches would dominate the per-point cost.
  const T s = T(size);
  if (ReadsFill(padding)) {
    const bool keep = GS_MATH(fabs)(u) <= s + T(8);  // false for NaN
    *dg = keep ? T(1) : T(0);
    return keep ? u : T(-8);
  }
  if (padding == kBorder) {
    // NaN counts as -inf.
    const bool keep = (u >= T(-8)) & (u <= s + T(8));  // false for NaN
    const T v = u >= T(-8) ? u : T(-8);
    *dg = keep ? T(1) : T(0);
    return v > s + T(8) ? s + T(8) : v;
  }
  // reflection and wrap: a u without fractional bits (or NaN, or infinite)
  // counts as the normalized coordinate -1, whose u is 0 or -0.5.
  const bool keep = GS_MATH(fabs)(u) < kNoFractionFrom<T>;  // false for NaN
  *dg = keep ? T(1) : T(0);
  return keep ? u : (align_corners ? T(0) : T(-0.5));
}

// Border clip to [0, size - 1]; *d is 1 strictly inside, 0 at or beyond ends.
template <typename T>
GS_HOST_DEVICE inline T ClipWithGrad(T u, int64_t size, T* d) {
  const T hi = T(size - 1);
  *d = ((u > T(0)) & (u < hi)) ? T(1) : T(0);
  const T v = u <= T(0) ? T(0) : u;
  return v >= hi ? hi : v;
}

// a mod m, in [0, m), for |a| < 2 kNoFractionFrom<T> and an integer m > 0
// (for a >= 0, bitwise the library's fmod): q = floor(a / m) is exact or one
// too large, m * q is then an exact integer, and a - m * q a multiple of
// ulp(a) no larger than a in magnitude, so every step is exact (contracted
// into a fused multiply-add too).
template <typename T>
GS_HOST_DEVICE inline T ExactFmod(T a, T m) {
  const T r = a - m * GS_MATH(floor)(a / m);
  return r < T(0) ? r + m : r;
}

// Reflection about lo = twice_lo / 2 and hi = twice_hi / 2, for |u| below
// kNoFractionFrom<T> + 2 (what the guard keeps, and bicubic's taps around it).
// *d is +-1 (0 for the degenerate span).
// The parity of the number of flips is whether a mod (2 span) is past span:
// exact, unlike floor(a / span), which depends on how a division rounds (the
// reference's, compiled by XLA, was a multiplication by 1 / span).
template <typename T>
GS_HOST_DEVICE inline T ReflectWithGrad(T u, T twice_lo, T twice_hi, T* d) {
  if (twice_lo == twice_hi) {
    *d = T(0);
    return T(0);
  }
  const T lo = twice_lo / T(2);
  const T span = (twice_hi - twice_lo) / T(2);
  // Selects, not branches: the sign and parity are data (random for random
  // grids), and mispredicted branches cost more than the whole computation.
  const T diff = u - lo;
  const T sign = diff < T(0) ? T(-1) : T(1);
  const T r = ExactFmod(GS_MATH(fabs)(diff), twice_hi - twice_lo);
  const bool even = r < span;
  const T extra = even ? r : r - span;  // exact: span <= r < 2 span
  *d = even ? sign : -sign;
  return even ? extra + lo : span - extra + lo;
}

// Step 3: padding of a coordinate (bilinear, nearest) or of a tap (bicubic).
// *d receives the derivative of the result with respect to u. Wrap leaves u
// as it is: its taps are wrapped (TapIndexAfterPadding).
template <typename T>
GS_HOST_DEVICE inline T PadWithGrad(T u, int64_t size, int64_t padding,
                                    bool align_corners, T* d) {
  if (padding == kBorder) return ClipWithGrad(u, size, d);
  if (padding == kReflection) {
    T d_reflect;
    T r = align_corners
              ? ReflectWithGrad(u, T(0), T(2 * (size - 1)), &d_reflect)
              : ReflectWithGrad(u, T(-1), T(2 * size - 1), &d_reflect);
    T d_clip;
    r = ClipWithGrad(r, size, &d_clip);
    *d = d_reflect * d_clip;
    return r;
  }
  *d = T(1);
  return u;
}

template <typename T>
GS_HOST_DEVICE inline T Pad(T u, int64_t size, int64_t padding,
                            bool align_corners) {
  T unused;
  return PadWithGrad(u, size, padding, align_corners, &unused);
}

// Step 5: the in-range check, done in floating point before converting to an
// integer. Returns the index, or -1 when the tap is outside [0, size - 1].
// The integer comparison after the conversion protects against T(size - 1)
// rounding up for sizes beyond the float mantissa.
//
// I is the index type: int64_t, or int32_t where the caller has checked that
// size <= INT32_MAX (kernels that batch points use it to vectorize).
template <typename I = int64_t, typename T>
GS_HOST_DEVICE inline I TapIndex(T x, int64_t size) {
  if constexpr (sizeof(I) < sizeof(int64_t)) {
    // Float selects only (no `&&`-like control flow, no bool masks), so that
    // loops over points vectorize in 32-bit lanes; size fits I (see above).
    const T lo = x >= T(0) ? x : T(-1);  // -1 for NaN
    const I i = static_cast<I>(lo <= T(size - 1) ? lo : T(-1));
    return i < static_cast<I>(size) ? i : I(-1);  // T(size - 1) may round up
  } else {
    const bool in = (x >= T(0)) & (x <= T(size - 1));  // false for NaN
    const I i = static_cast<I>(in ? x : T(0));
    // This form keeps the scalar (per-point) code branch-free.
    return (in & (static_cast<int64_t>(i) < size)) ? i : I(-1);
  }
}

// TapIndex of an x known to be >= 0 (so not NaN), as border and reflection
// padding leave coordinates and their floor: the same index, without the
// check against 0 (two selects fewer per tap in the vectorized CPU loops).
template <typename I = int64_t, typename T>
GS_HOST_DEVICE inline I PaddedTapIndex(T x, int64_t size) {
  if constexpr (sizeof(I) < sizeof(int64_t)) {
    const I i = static_cast<I>(x <= T(size - 1) ? x : T(-1));
    return i < static_cast<I>(size) ? i : I(-1);
  } else {
    const bool in = x <= T(size - 1);
    const I i = static_cast<I>(in ? x : T(0));
    return (in & (static_cast<int64_t>(i) < size)) ? i : I(-1);
  }
}

// The index of tap x (an integer) of a coordinate after padding `padding`:
// wrap takes it modulo size.
template <typename I, typename T>
GS_HOST_DEVICE inline I TapIndexAfterPadding(T x, int64_t size, int64_t padding) {
  if (ReadsFill(padding)) return TapIndex<I>(x, size);
  if (padding == kWrap) return PaddedTapIndex<I>(ExactFmod(x, T(size)), size);
  return PaddedTapIndex<I>(x, size);
}

// Cubic convolution weights of the four taps x0-1 .. x0+2 for t = u - x0.
template <typename T>
GS_HOST_DEVICE inline T CubicInner(T x) {  // |x| <= 1
  const T A = CubicA<T>();
  return ((A + T(2)) * x - (A + T(3))) * x * x + T(1);
}
template <typename T>
GS_HOST_DEVICE inline T CubicOuter(T x) {  // 1 < |x| < 2
  const T A = CubicA<T>();
  return ((A * x - T(5) * A) * x + T(8) * A) * x - T(4) * A;
}
// Derivatives of the above with respect to x.
template <typename T>
GS_HOST_DEVICE inline T CubicInnerGrad(T x) {
  const T A = CubicA<T>();
  return (T(3) * (A + T(2)) * x - T(2) * (A + T(3))) * x;
}
template <typename T>
GS_HOST_DEVICE inline T CubicOuterGrad(T x) {
  const T A = CubicA<T>();
  return (T(3) * A * x - T(10) * A) * x + T(8) * A;
}

template <typename T>
GS_HOST_DEVICE inline void CubicWeights(T t, T w[4]) {
  w[0] = CubicOuter(t + T(1));
  w[1] = CubicInner(t);
  w[2] = CubicInner(T(1) - t);
  w[3] = CubicOuter(T(2) - t);
}
// d w_i / d t.
template <typename T>
GS_HOST_DEVICE inline void CubicWeightGrads(T t, T dw[4]) {
  dw[0] = CubicOuterGrad(t + T(1));
  dw[1] = CubicInnerGrad(t);
  dw[2] = -CubicInnerGrad(T(1) - t);
  dw[3] = -CubicOuterGrad(T(2) - t);
}

// Taps of one spatial axis for one coordinate.
//   idx[i]: input index of tap i, or -1 when it reads nothing;
//   w[i]:   interpolation weight;
//   dw[i]:  d w[i] / d(padded coordinate);
//   dmult:  d(padded coordinate) / d(normalized coordinate), i.e. the chain of
//           unnormalize, guard and padding derivatives (0 for nearest).
//   I:      the index type (see TapIndex).
template <typename T, int kTaps, typename I = int64_t>
struct AxisTaps {
  I idx[kTaps];
  T w[kTaps];
  T dw[kTaps];
  T dmult;
};

template <int kInterp, typename T, typename I = int64_t>
GS_HOST_DEVICE inline void ComputeAxisTaps(
    T c, int64_t size, int64_t padding, bool align_corners,
    AxisTaps<T, TapsPerAxis(kInterp), I>* out) {
  T du, dg;
  T u = Unnormalize(c, size, align_corners, &du);
  u = Guard(u, size, padding, align_corners, &dg);
  if (kInterp == kBilinear) {
    T dp;
    const T p = PadWithGrad(u, size, padding, align_corners, &dp);
    const T x0 = GS_MATH(floor)(p);
    const T x1 = x0 + T(1);
    out->idx[0] = TapIndexAfterPadding<I>(x0, size, padding);
    out->idx[1] = TapIndexAfterPadding<I>(x1, size, padding);
    out->w[0] = x1 - p;
    out->w[1] = p - x0;
    out->dw[0] = T(-1);
    out->dw[1] = T(1);
    out->dmult = du * dg * dp;
  } else if (kInterp == kNearest) {
    const T p = Pad(u, size, padding, align_corners);
    out->idx[0] = TapIndexAfterPadding<I>(GS_MATH(nearbyint)(p), size, padding);
    out->w[0] = T(1);
    out->dw[0] = T(0);
    out->dmult = T(0);
  } else {
    const T x0 = GS_MATH(floor)(u);
    const T t = u - x0;
    T w[4], dw[4];
    CubicWeights(t, w);
    CubicWeightGrads(t, dw);
    for (int i = 0; i < 4; ++i) {
      const T tap = Pad(x0 + T(i - 1), size, padding, align_corners);
      out->idx[i] = TapIndexAfterPadding<I>(tap, size, padding);
      out->w[i] = w[i];
      out->dw[i] = dw[i];
    }
    out->dmult = du * dg;
  }
}

// "constant" padding (docs/semantics.md, "The fill value"): a point's output
// is its "zeros" sum plus FillTerm(fill, 1 - W), W the product over the fill
// axes, x first, of each axis's share of weight inside: 1 minus the weights
// of its taps outside, subtracted in tap order with this step (a tap with
// index -1 is outside). An axis with no tap outside gives exactly 1, so a
// point that reads no fill value gets exactly W = 1. Its derivative is
// formed the same way from 0 with the taps' dw. Every kernel forms W in this
// order and adds the term last, so all form the same term.
template <typename T, typename I>
GS_HOST_DEVICE inline T SubtractOutsideWeight(T rest, I idx, T w) {
  return rest - (idx >= 0 ? T(0) : w);
}

// The fill term of a point whose taps outside weigh `outside` (1 - W) in all:
// 0 where they weigh 0, so that a point that reads no fill value stays
// independent of it, a NaN or infinite one included. The grid gradient's
// fill part is formed the same way, from -sum_c fill[c] grad_out[c] and dW.
template <typename T>
GS_HOST_DEVICE inline T FillTerm(T fill, T outside) {
  return outside == T(0) ? T(0) : fill * outside;
}

}  // namespace gs

#endif  // JAX_GRIDSAMPLE_FFI_COMMON_GRID_SAMPLE_MATH_H_
