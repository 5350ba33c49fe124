// TapRow<T, N>: N contiguous values (one row of a point's taps along x) held
// in registers, with the three operations the backward's inner loop needs:
// load, store and `row += s * other`.
//
// Why: the backward of a point updates grad_input at its taps, which come in
// runs of N = 1, 2 or 4 neighbours along x. Moving a run as one SSE access
// instead of N scalar read-modify-writes makes the scatter much faster on
// x86 (fewer memory operations, no scalar store-to-load chains).
// Other architectures use the plain-array form, which computes the same
// values: every lane is one multiply and one add, in the same order.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_TAP_ROW_H_
#define JAX_GRIDSAMPLE_FFI_CPU_TAP_ROW_H_

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#define GS_TAP_ROW_SSE2 1
#else
#define GS_TAP_ROW_SSE2 0
#endif

namespace gs_cpu {

// Portable form: any T and N.
template <typename T, int N>
struct TapRow {
  T v[N];
  static TapRow Load(const T* p) {
    TapRow r;
    for (int i = 0; i < N; ++i) r.v[i] = p[i];
    return r;
  }
  void Store(T* p) const {
    for (int i = 0; i < N; ++i) p[i] = v[i];
  }
  // *this += s * x, lane by lane (a multiply, then an add).
  void AddScaled(T s, const TapRow& x) {
    for (int i = 0; i < N; ++i) v[i] = v[i] + s * x.v[i];
  }
};

// Two rows of two taps (bilinear): rows at p0 and p1 in the input, held as
// one four-lane value; its weights and sums are four contiguous values.
template <typename T>
struct TapRowPair {
  TapRow<T, 2> lo, hi;
  static TapRowPair Load(const T* p0, const T* p1) {
    return {TapRow<T, 2>::Load(p0), TapRow<T, 2>::Load(p1)};
  }
  static TapRowPair Load(const T* p) { return Load(p, p + 2); }
  void Store(T* p0, T* p1) const {
    lo.Store(p0);
    hi.Store(p1);
  }
  void Store(T* p) const { Store(p, p + 2); }
  void AddScaled(T s, const TapRowPair& x) {
    lo.AddScaled(s, x.lo);
    hi.AddScaled(s, x.hi);
  }
};

#if GS_TAP_ROW_SSE2
template <>
struct TapRowPair<float> {
  __m128 v;
  static TapRowPair Load(const float* p0, const float* p1) {
    const __m128 lo = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p0)));
    return {_mm_castpd_ps(_mm_loadh_pd(_mm_castps_pd(lo), reinterpret_cast<const double*>(p1)))};
  }
  static TapRowPair Load(const float* p) { return {_mm_loadu_ps(p)}; }
  void Store(float* p0, float* p1) const {
    _mm_store_sd(reinterpret_cast<double*>(p0), _mm_castps_pd(v));
    _mm_storeh_pd(reinterpret_cast<double*>(p1), _mm_castps_pd(v));
  }
  void Store(float* p) const { _mm_storeu_ps(p, v); }
  void AddScaled(float s, const TapRowPair& x) {
    v = _mm_add_ps(v, _mm_mul_ps(_mm_set1_ps(s), x.v));
  }
};

template <>
struct TapRow<float, 2> {
  __m128 v;  // lanes 0-1 used
  static TapRow Load(const float* p) {
    return {_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p)))};
  }
  void Store(float* p) const { _mm_store_sd(reinterpret_cast<double*>(p), _mm_castps_pd(v)); }
  void AddScaled(float s, const TapRow& x) { v = _mm_add_ps(v, _mm_mul_ps(_mm_set1_ps(s), x.v)); }
};

template <>
struct TapRow<float, 4> {
  __m128 v;
  static TapRow Load(const float* p) { return {_mm_loadu_ps(p)}; }
  void Store(float* p) const { _mm_storeu_ps(p, v); }
  void AddScaled(float s, const TapRow& x) { v = _mm_add_ps(v, _mm_mul_ps(_mm_set1_ps(s), x.v)); }
};

template <>
struct TapRow<double, 2> {
  __m128d v;
  static TapRow Load(const double* p) { return {_mm_loadu_pd(p)}; }
  void Store(double* p) const { _mm_storeu_pd(p, v); }
  void AddScaled(double s, const TapRow& x) {
    v = _mm_add_pd(v, _mm_mul_pd(_mm_set1_pd(s), x.v));
  }
};

template <>
struct TapRow<double, 4> {
  __m128d lo, hi;
  static TapRow Load(const double* p) { return {_mm_loadu_pd(p), _mm_loadu_pd(p + 2)}; }
  void Store(double* p) const {
    _mm_storeu_pd(p, lo);
    _mm_storeu_pd(p + 2, hi);
  }
  void AddScaled(double s, const TapRow& x) {
    const __m128d sv = _mm_set1_pd(s);
    lo = _mm_add_pd(lo, _mm_mul_pd(sv, x.lo));
    hi = _mm_add_pd(hi, _mm_mul_pd(sv, x.hi));
  }
};
#endif  // GS_TAP_ROW_SSE2

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_TAP_ROW_H_
