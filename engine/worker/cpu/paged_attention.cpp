// Decode attention over the paged KV pool, reading K/V blocks in place through each row's block table.
//
// One query token per row: out[b, h] = softmax(q[b, h] . K[b]^T * scale) V[b] over the row's first lens[b]
// positions, where position t of row b lives in block tables[b, t / bs] at offset t % bs of the layer's pool
// (num_blocks, bs, kv_heads, D). The gather+sdpa path copies every row's blocks into a workspace first (its cost
// grows with rows x context); here each task (a row, or a row's K/V head when rows are fewer than threads) walks its
// blocks where they lie and computes the G = H / kv_heads query heads of each K/V head at once, so each K and V
// vector is read once per step.
// Softmax is the stable one: scores, their max, exp(s - max), then the weighted V sum divided by the exp sum; the
// dot products and V sums run on the CPU's vectors (vec.h) and exp is vec.h's, which vectorizes (with one scalar dot and
// std::exp a task took ~3x as long: 8 rows of 65 positions, 300 us a layer on an Intel Xeon's 2 cores, now ~90).
//
// A packed prefill passes each prompt token as a row of its own (its request's table, length its position + 1),
// its K/V already written: causal attention with no mask. What it does not do: several query tokens sharing a
// row's K/V reads, other dtypes, masks other than a length per row, or CUDA.
#include <torch/extension.h>

#include <vector>

#include "pool.h"
#include "vec.h"

using lanes::vec;
using lanes::WIDTH;

static inline float dot(const float* a, const float* b, int64_t D) {
  vec acc = {};
  int64_t d = 0;
  for (; d + WIDTH <= D; d += WIDTH) acc += lanes::load(a + d) * lanes::load(b + d);
  float s = lanes::sum(acc);
  for (; d < D; ++d) s += a[d] * b[d];
  return s;
}

static inline void add_scaled(float* o, float p, const float* v, int64_t D) {  // o += p * v
  const vec pv = vec{} + p;
  int64_t d = 0;
  for (; d + WIDTH <= D; d += WIDTH) lanes::store(o + d, lanes::load(o + d) + pv * lanes::load(v + d));
  for (; d < D; ++d) o[d] += p * v[d];
}

torch::Tensor paged_decode_attention(torch::Tensor q, torch::Tensor keys, torch::Tensor values,
                                     torch::Tensor tables, torch::Tensor lens, double scale) {
  TORCH_CHECK(q.dtype() == torch::kFloat32 && keys.dtype() == torch::kFloat32 && values.dtype() == torch::kFloat32,
              "float32 only");
  TORCH_CHECK(q.device().is_cpu() && keys.device().is_cpu() && values.device().is_cpu(), "CPU tensors only");
  TORCH_CHECK(q.dim() == 3 && keys.dim() == 4 && values.sizes() == keys.sizes(),
              "q (B, H, D), keys and values (num_blocks, block_size, kv_heads, D)");
  TORCH_CHECK(keys.is_contiguous() && values.is_contiguous(), "the pool's layer views must be contiguous");
  TORCH_CHECK(tables.dim() == 2 && lens.dim() == 1 && tables.size(0) == q.size(0) && lens.size(0) == q.size(0),
              "tables (B, max_blocks), lens (B,)");
  const int64_t B = q.size(0), H = q.size(1), D = q.size(2);
  const int64_t N = keys.size(0), bs = keys.size(1), KV = keys.size(2);
  TORCH_CHECK(keys.size(3) == D && H % KV == 0, "head_dim must match and H a multiple of kv_heads");
  q = q.contiguous();
  auto tab = tables.to(torch::kLong).contiguous();
  auto len = lens.to(torch::kLong).contiguous();
  const int64_t width = tab.size(1), G = H / KV;
  const int64_t* T = tab.data_ptr<int64_t>();
  const int64_t* L = len.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    TORCH_CHECK(L[b] >= 0 && L[b] <= width * bs, "lens[b] must fit in the row's table");
    for (int64_t i = 0; i < (L[b] + bs - 1) / bs; ++i) TORCH_CHECK(T[b * width + i] >= 0 && T[b * width + i] < N,
                                                                  "a block id outside the pool");
  }
  auto out = torch::zeros({B, H, D}, q.options());
  const float* Q = q.data_ptr<float>();
  const float* K = keys.data_ptr<float>();
  const float* V = values.data_ptr<float>();
  float* O = out.data_ptr<float>();
  const float s = static_cast<float>(scale);
  // A task is a row's K/V heads [h0, h0 + span): all of them (span = KV) when there are rows enough for the
  // threads, so each token's K/V (kv_heads x D, adjacent in the pool) is read as one stretch; one head a task
  // (span = 1) when there are fewer rows than threads.
  lanes::SpinPool& pool = lanes::SpinPool::get();
  const int64_t span = B >= pool.threads() ? KV : 1, per_row = KV / span;
  auto attend = [&](int64_t task) {
    const int64_t b = task / per_row, h0 = (task % per_row) * span, n = L[b], GS = G * span;
    if (n == 0) return;
    thread_local std::vector<float> scores;               // (span * G, n), kept between calls
    scores.resize(GS * n);
    float* sc = scores.data();
    const float* qb = Q + (b * H + h0 * G) * D;           // the query heads of these K/V heads, (span * G, D)
    for (int64_t t = 0; t < n; ++t) {
      const float* k = K + ((T[b * width + t / bs] * bs + t % bs) * KV + h0) * D;
      for (int64_t j = 0; j < GS; ++j) sc[j * n + t] = dot(qb + j * D, k + (j / G) * D, D) * s;
    }
    thread_local std::vector<float> total;
    total.resize(GS);
    for (int64_t j = 0; j < GS; ++j) {
      float* row = sc + j * n;
      float top = row[0];
      for (int64_t t = 1; t < n; ++t) top = std::max(top, row[t]);
      for (int64_t t = 0; t < n; ++t) row[t] = lanes::exp(row[t] - top);
      float sum = 0.f;
      for (int64_t t = 0; t < n; ++t) sum += row[t];
      total[j] = sum;
    }
    float* ob = O + (b * H + h0 * G) * D;                 // (span * G, D), zeroed
    for (int64_t t = 0; t < n; ++t) {
      const float* v = V + ((T[b * width + t / bs] * bs + t % bs) * KV + h0) * D;
      for (int64_t j = 0; j < GS; ++j) add_scaled(ob + j * D, sc[j * n + t], v + (j / G) * D, D);
    }
    for (int64_t j = 0; j < GS; ++j)
      for (int64_t d = 0; d < D; ++d) ob[j * D + d] /= total[j];
  };
  pool.run(B * per_row, 1, [&](int64_t first, int64_t last) {
    for (int64_t task = first; task < last; ++task) attend(task);
  });
  return out;
}
