// Storage <-> compute conversions for the half-precision types.
//
// XLA FFI stores F16 and BF16 as raw uint16_t bit patterns
// (xla::ffi::NativeType<DataType::F16/BF16>); the kernels compute in float.
// The conversions are portable bit manipulation (round to nearest even, NaN
// and infinity preserved), so no compiler support for _Float16 is needed.
#ifndef JAX_GRIDSAMPLE_FFI_COMMON_GRID_SAMPLE_DTYPES_H_
#define JAX_GRIDSAMPLE_FFI_COMMON_GRID_SAMPLE_DTYPES_H_

#include <cstdint>
#include <cstring>

#include "grid_sample_math.h"  // GS_HOST_DEVICE

namespace gs {

GS_HOST_DEVICE inline float BitsToFloat(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

GS_HOST_DEVICE inline uint32_t FloatToBits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// IEEE binary16 -> float (exact).
GS_HOST_DEVICE inline float HalfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return BitsToFloat(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float.
    const float mag = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return BitsToFloat(sign | FloatToBits(mag));
  }
  return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

// float -> IEEE binary16, round to nearest even.
GS_HOST_DEVICE inline uint16_t FloatToHalfBits(float f) {
  const uint32_t x = FloatToBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN (keep NaN quiet and non-zero)
    const uint32_t payload = ax > 0x7f800000u ? (0x200u | ((ax >> 13) & 0x3ffu)) : 0u;
    return static_cast<uint16_t>(sign | 0x7c00u | payload);
  }
  if (ax >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65536
  if (ax >= 0x38800000u) {  // normal half range (rounding may carry to inf)
    const uint32_t m = ax + 0xfffu + ((ax >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((m - 0x38000000u) >> 13));
  }
  // Subnormal half (or zero): value in units of 2^-24.
  const uint32_t e = ax >> 23;
  if (e < 102u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
  const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14 .. 24
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

// bfloat16 -> float (exact).
GS_HOST_DEVICE inline float BFloat16BitsToFloat(uint16_t b) {
  return BitsToFloat(static_cast<uint32_t>(b) << 16);
}

// float -> bfloat16, round to nearest even, NaN stays NaN.
GS_HOST_DEVICE inline uint16_t FloatToBFloat16Bits(float f) {
  const uint32_t x = FloatToBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>(((x >> 16) & 0x8000u) | 0x7fc0u);
  }
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Tags for the storage formats. Kernels are templated on a format, which
// fixes the storage type, the compute type and the conversions.
struct F16Format {
  using Storage = uint16_t;
  using Compute = float;
  GS_HOST_DEVICE static Compute Load(Storage v) { return HalfBitsToFloat(v); }
  GS_HOST_DEVICE static Storage Store(Compute v) { return FloatToHalfBits(v); }
};
struct BF16Format {
  using Storage = uint16_t;
  using Compute = float;
  GS_HOST_DEVICE static Compute Load(Storage v) { return BFloat16BitsToFloat(v); }
  GS_HOST_DEVICE static Storage Store(Compute v) { return FloatToBFloat16Bits(v); }
};
struct F32Format {
  using Storage = float;
  using Compute = float;
  GS_HOST_DEVICE static Compute Load(Storage v) { return v; }
  GS_HOST_DEVICE static Storage Store(Compute v) { return v; }
};
struct F64Format {
  using Storage = double;
  using Compute = double;
  GS_HOST_DEVICE static Compute Load(Storage v) { return v; }
  GS_HOST_DEVICE static Storage Store(Compute v) { return v; }
};

}  // namespace gs

#endif  // JAX_GRIDSAMPLE_FFI_COMMON_GRID_SAMPLE_DTYPES_H_
