// What our CPU kernels share: a 16-float vector (GCC's generic vector type: one zmm register with AVX-512, two ymm
// with AVX2) and an exp that the compiler vectorizes.
#pragma once
#include <cstdint>
#include <cstring>

namespace lanes {

typedef float vec16 __attribute__((vector_size(64), aligned(4)));
typedef float vec8 __attribute__((vector_size(32), aligned(4)));
typedef float vec4 __attribute__((vector_size(16), aligned(4)));

template <class V = vec16>  // a 16-float vector unless asked for another (gemv.cpp's 8-float one on AVX2)
static inline V load(const float* p) { return *reinterpret_cast<const V*>(p); }
template <class V>
static inline void store(float* p, V v) { *reinterpret_cast<V*>(p) = v; }

static inline float sum(vec16 v) {  // halves added in a tree (a loop over the 16 lanes took ~3x as long here)
  const vec8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                 __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const vec4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  return (b[0] + b[2]) + (b[1] + b[3]);
}

// e^x in float32 to within ~2 ulp (Cephes' expf: x = n ln 2 + r with |r| <= ln 2 / 2, a degree-6 polynomial in r,
// then 2^n put into the exponent bits). Branch-free, so a loop over it vectorizes (glibc's expf does not here, and
// std::exp in a loop took ~8 ns an element). x is clamped to [-87.3, 88]: below, ~1e-38 rather than 0; above,
// e^88 = 1.7e38 rather than infinity.
static inline float exp(float x) {
  x = x < -87.33654f ? -87.33654f : (x > 88.f ? 88.f : x);
  const float round = 12582912.f;                    // 1.5 * 2^23: adding and subtracting it rounds to an integer
  const float n = (x * 1.44269504088896341f + round) - round;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;  // ln 2 in two parts (Cody and Waite)
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

}  // namespace lanes
