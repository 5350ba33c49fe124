// TapRow<T, N>: N contiguous values (one row of a point's taps along x) held
// in a vector register, with the three operations the backward's inner loop
// needs: load, store and `row += s * other`.
//
// Why: the backward of a point updates grad_input at its taps, which come in
// runs of N = 1, 2 or 4 neighbours along x. Moving a run as one vector access
// instead of N scalar read-modify-writes makes the scatter much faster (fewer
// memory operations, no scalar store-to-load chains). Written once with GCC /
// Clang vector extensions: SSE on x86-64, NEON on aarch64, each lane one
// multiply and one add, so every target computes the same bits.
#ifndef JAX_GRIDSAMPLE_FFI_CPU_TAP_ROW_H_
#define JAX_GRIDSAMPLE_FFI_CPU_TAP_ROW_H_

#include <cstring>

namespace gs_cpu {

template <typename T, int N>
struct TapRow {
  typedef T V __attribute__((vector_size(sizeof(T) * N)));
  V v;
  static TapRow Load(const T* p) {
    TapRow r;
    std::memcpy(&r.v, p, sizeof r.v);
    return r;
  }
  void Store(T* p) const { std::memcpy(p, &v, sizeof v); }
  // *this += s * x, lane by lane (a multiply, then an add).
  void AddScaled(T s, const TapRow& x) { v = v + s * x.v; }
};

// Two rows of two taps (bilinear): rows at p0 and p1 in the input, held as
// one four-lane value; its weights and sums are four contiguous values.
template <typename T>
struct TapRowPair {
  typedef T V __attribute__((vector_size(sizeof(T) * 4)));
  V v;
  static TapRowPair Load(const T* p0, const T* p1) {
    TapRowPair r;
    std::memcpy(&r.v, p0, 2 * sizeof(T));
    std::memcpy(reinterpret_cast<char*>(&r.v) + 2 * sizeof(T), p1, 2 * sizeof(T));
    return r;
  }
  static TapRowPair Load(const T* p) { return Load(p, p + 2); }
  void Store(T* p0, T* p1) const {
    std::memcpy(p0, &v, 2 * sizeof(T));
    std::memcpy(p1, reinterpret_cast<const char*>(&v) + 2 * sizeof(T), 2 * sizeof(T));
  }
  void Store(T* p) const { Store(p, p + 2); }
  void AddScaled(T s, const TapRowPair& x) { v = v + s * x.v; }
};

}  // namespace gs_cpu

#endif  // JAX_GRIDSAMPLE_FFI_CPU_TAP_ROW_H_
