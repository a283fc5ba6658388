// The small operations between a decode layer's linears, one call each instead of torch's several.
//
// A decode step of 1-16 rows does ~150 of them (two RMS norms, RoPE, two K/V writes, SiLU * up and two residual
// adds a layer). Each touches a few kilobytes, so their cost is dispatch: torch's CPU rms_norm alone is six
// operations (pow, mean, add, rsqrt, mul, mul) and took ~4.5 ms of a 40 ms one-row step here (Intel Xeon, 2 cores).
// These run on the calling thread, one pass over each row:
//
// - add_rms_norm(x, d, w, eps): x += d in place (the residual), then RMS-normed x times w (LlamaRMSNorm's
//   arithmetic in float32: mean of squares, rsqrt(mean + eps), x * r, then * w). With d None it only norms.
// - rope_write(qkv, cos, sin, keys, values, slots): RoPE (rotate-half) on the q and k heads of the fused q|k|v
//   output; the rotated k and the v of row b written into pool slot slots[b] (block * block_size + offset) of
//   the layer's blocks, or nowhere where slots[b] < 0; returns q (B, H, D).
// - silu_mul(gu): SiLU(gate) * up of the fused gate|up output (B, 2I) -> (B, I).
// - argmax_rows(logits): each row's first index of its largest value, as torch.argmax (which took 1.2 ms for 8
//   rows of SmolLM2's 49,152 logits here, single-threaded: ~3 ns a value); a NaN counts as the largest, as there.
//
// The sums run in a different order than torch's, so values may differ in the last bits (as any other kernel's
// would); tests/engine/worker/test_layer_ops.py compares them with torch's operations and the lanes stay token-exact.
//
// What they do not do: other dtypes, strided rows, CUDA.
#include <torch/extension.h>

#include <cmath>

#include "vec.h"

static void check_rows(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu() && t.dtype() == torch::kFloat32 && t.dim() == 2 && t.is_contiguous(), name,
              " must be a contiguous float32 (rows, columns) CPU tensor");
}

torch::Tensor add_rms_norm(torch::Tensor x, c10::optional<torch::Tensor> d, torch::Tensor w, double eps) {
  check_rows(x, "x");
  const int64_t B = x.size(0), E = x.size(1);
  TORCH_CHECK(w.dtype() == torch::kFloat32 && w.is_contiguous() && w.numel() == E, "w must be E float32 values");
  float* X = x.data_ptr<float>();
  const float* D = nullptr;
  if (d.has_value()) {
    check_rows(*d, "d");
    TORCH_CHECK(d->sizes() == x.sizes(), "d must have x's shape");
    D = d->data_ptr<float>();
  }
  auto y = torch::empty_like(x);
  const float* W = w.data_ptr<float>();
  float* Y = y.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b) {
    float* xr = X + b * E;
    float acc[16] = {};
    for (int64_t e = 0; e < E; ++e) {
      const float v = D ? xr[e] + D[b * E + e] : xr[e];
      xr[e] = v;
      acc[e % 16] += v * v;
    }
    float sum = 0.f;
    for (float a : acc) sum += a;
    const float r = 1.f / std::sqrt(sum / static_cast<float>(E) + static_cast<float>(eps));
    for (int64_t e = 0; e < E; ++e) Y[b * E + e] = W[e] * (xr[e] * r);
  }
  return y;
}

torch::Tensor rope_write(torch::Tensor qkv, torch::Tensor cos, torch::Tensor sin, torch::Tensor keys,
                         torch::Tensor values, torch::Tensor slots, int64_t heads) {
  check_rows(qkv, "qkv");
  check_rows(cos, "cos");
  check_rows(sin, "sin");
  TORCH_CHECK(keys.dim() == 4 && keys.sizes() == values.sizes() && keys.is_contiguous() && values.is_contiguous() &&
                  keys.dtype() == torch::kFloat32 && values.dtype() == torch::kFloat32,
              "keys, values: contiguous float32 (num_blocks, block_size, kv_heads, D) pool views");
  TORCH_CHECK(slots.dtype() == torch::kLong && slots.dim() == 1 && slots.is_contiguous(), "slots: (B,) int64");
  const int64_t B = qkv.size(0), KV = keys.size(2), Dh = keys.size(3), half = Dh / 2;
  const int64_t capacity = keys.size(0) * keys.size(1);
  TORCH_CHECK(Dh % 2 == 0 && qkv.size(1) == (heads + 2 * KV) * Dh && cos.sizes() == sin.sizes() &&
                  cos.size(0) == B && cos.size(1) == Dh && slots.size(0) == B,
              "qkv (B, (H + 2 KV) D), cos and sin (B, D), slots (B,)");
  auto q = torch::empty({B, heads, Dh}, qkv.options());
  const float *QKV = qkv.data_ptr<float>(), *C = cos.data_ptr<float>(), *S = sin.data_ptr<float>();
  const int64_t* slot = slots.data_ptr<int64_t>();
  float *Q = q.data_ptr<float>(), *K = keys.data_ptr<float>(), *V = values.data_ptr<float>();
  const int64_t width = (heads + 2 * KV) * Dh;
  for (int64_t b = 0; b < B; ++b) {
    TORCH_CHECK(slot[b] < capacity, "slot ", slot[b], " is outside the pool's ", capacity);
    const float *row = QKV + b * width, *c = C + b * Dh, *s = S + b * Dh;
    const int64_t rotated = slot[b] >= 0 ? heads + KV : heads;  // q heads, then k heads where the row writes
    for (int64_t h = 0; h < rotated; ++h) {
      float* out = h < heads ? Q + (b * heads + h) * Dh : K + (slot[b] * KV + h - heads) * Dh;
      const float* x = row + h * Dh;
      for (int64_t j = 0; j < half; ++j) out[j] = x[j] * c[j] + (-x[j + half]) * s[j];
      for (int64_t j = half; j < Dh; ++j) out[j] = x[j] * c[j] + x[j - half] * s[j];
    }
    if (slot[b] >= 0) std::copy(row + (heads + KV) * Dh, row + width, V + slot[b] * KV * Dh);
  }
  return q;
}

torch::Tensor silu_mul(torch::Tensor gu) {
  check_rows(gu, "gu");
  TORCH_CHECK(gu.size(1) % 2 == 0, "gu must be (B, 2 I)");
  const int64_t B = gu.size(0), I = gu.size(1) / 2;
  auto y = torch::empty({B, I}, gu.options());
  const float* G = gu.data_ptr<float>();
  float* Y = y.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < I; ++i) {
      const float g = G[b * 2 * I + i];
      Y[b * I + i] = g / (1.f + lanes::exp(-g)) * G[b * 2 * I + I + i];
    }
  return y;
}

torch::Tensor argmax_rows(torch::Tensor logits) {
  check_rows(logits, "logits");
  const int64_t B = logits.size(0), V = logits.size(1);
  TORCH_CHECK(V >= 1, "logits must have a column");
  auto out = torch::empty({B}, logits.options().dtype(torch::kLong));
  const float* X = logits.data_ptr<float>();
  int64_t* O = out.data_ptr<int64_t>();
  using lanes::vec;
  using lanes::WIDTH;
  typedef int32_t mask __attribute__((vector_size(sizeof(vec))));
  for (int64_t b = 0; b < B; ++b) {
    const float* x = X + b * V;
    vec top = vec{} + x[0];
    mask nan = {};
    int64_t v = 0;
    for (; v + WIDTH <= V; v += WIDTH) {
      const vec y = lanes::load(x + v);
      top = y > top ? y : top;
      nan |= y != y;
    }
    float best = x[0];
    bool any_nan = x[0] != x[0];
    for (int i = 0; i < WIDTH; ++i) best = std::max(best, top[i]), any_nan |= nan[i] != 0;
    for (; v < V; ++v) best = std::max(best, x[v]), any_nan |= x[v] != x[v];
    int64_t at = 0;
    if (any_nan)  // torch.argmax counts NaN as the largest: the first NaN
      while (x[at] == x[at]) ++at;
    else
      while (x[at] != best) ++at;  // the first index holding the largest value, as torch's
    O[b] = at;
  }
  return out;
}
