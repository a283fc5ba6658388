// What our CPU kernels share: the CPU's own vector (GCC's generic vector type: 16 floats, one zmm register, with
// AVX-512; 8 floats, one ymm register, with AVX2) and an exp that the compiler vectorizes.
//
// A 16-float vector on a CPU without AVX-512 is two ymm registers, and GCC moves it through the stack: an
// accumulator of one stored and reloaded every iteration made each of our kernels 5-25x slower on an AVX2 AMD EPYC.
// So the kernels compute on `vec`, WIDTH floats, never on vec16 by name.
#pragma once
#include <cstdint>
#include <cstring>

namespace lanes {

typedef float vec16 __attribute__((vector_size(64), aligned(4)));
typedef float vec8 __attribute__((vector_size(32), aligned(4)));
typedef float vec4 __attribute__((vector_size(16), aligned(4)));

#ifdef __AVX512F__
using vec = vec16;
#else
using vec = vec8;
#endif
static constexpr int WIDTH = sizeof(vec) / sizeof(float);

// Unaligned loads and stores (memcpy compiles to one vmovups). Not a cast to V*: a template argument drops the
// typedefs' aligned(4), so the cast promised 32/64-byte alignment and GCC emitted vmovaps, which faults on a row
// that starts mid-vector (argmax over 9 columns did).
template <class V = vec>
static inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <class V>
static inline void store(float* p, V v) { std::memcpy(p, &v, sizeof(V)); }

static inline float sum(vec8 a) {  // halves added in a tree (a loop over the lanes took ~3x as long here)
  const vec4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  return (b[0] + b[2]) + (b[1] + b[3]);
}
#ifdef __AVX512F__
static inline float sum(vec16 v) {
  return sum(vec8(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                  __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15)));
}
#endif

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
