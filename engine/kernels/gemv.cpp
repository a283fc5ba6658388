// A few-row float32 linear for the decode step on a CPU: y[b, n] = sum_k x[b, k] * w[n, k] for 1-6 rows b.
//
// One decode token per row makes a linear a matrix-vector product that reads every weight once and does one
// multiply-add per weight: it is bound by how fast the weights stream from memory. oneDNN's and MKL's kernels
// read them at 12-17 GB/s for 1-2 rows on this 2-core CPU, about half of what a plain sum over the same bytes
// reaches (31-35 GB/s). Here each thread walks whole weight rows in address order, one row at a time, with
// four independent accumulators per input row, so the prefetcher sees one sequential stream per core; the threads
// are pool.h's.
//
// Each weight row is summed against every input row while it is in L1: 1-6 rows cost about what one costs (3072 x 576
// weights: 240-350 us at 1-6 rows here, oneDNN's packed kernel 380-450); from 8 rows oneDNN is faster.
//
// What it does not do: more than 6 rows, other dtypes, or any shape whose K is not a multiple of 32 (the caller
// checks, and uses oneDNN then).
#include <torch/extension.h>
#include <immintrin.h>

#include "pool.h"

static constexpr int64_t MAX_ROWS = 6;  // cpu_kernels.MAX_ROWS

static inline float horizontal_sum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_hadd_ps(lo, lo);
  lo = _mm_hadd_ps(lo, lo);
  return _mm_cvtss_f32(lo);
}

// y[b, n] for one weight row and one input row, four accumulators: at 1-3 rows the weights' stream sets the pace.
static inline float row_dot(const float* row, const float* xb, int64_t K) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; k += 32) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(row + k), _mm256_loadu_ps(xb + k), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(row + k + 8), _mm256_loadu_ps(xb + k + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(row + k + 16), _mm256_loadu_ps(xb + k + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(row + k + 24), _mm256_loadu_ps(xb + k + 24), a3);
  }
  return horizontal_sum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

torch::Tensor few_row_linear(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.dtype() == torch::kFloat32 && w.dtype() == torch::kFloat32, "float32 only");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "x (B, K) and w (N, K)");
  TORCH_CHECK(x.size(0) >= 1 && x.size(0) <= MAX_ROWS && x.size(1) % 32 == 0, "1-6 rows, K a multiple of 32");
  x = x.contiguous();
  TORCH_CHECK(w.is_contiguous(), "w must be contiguous");
  const int64_t B = x.size(0), K = x.size(1), N = w.size(0);
  auto y = torch::empty({B, N}, x.options());
  const float* X = x.data_ptr<float>();
  const float* W = w.data_ptr<float>();
  float* Y = y.data_ptr<float>();
  lanes::SpinPool& pool = lanes::SpinPool::get();  // chunks of a quarter of a thread's share: a late helper's work
  pool.run(N, std::max<int64_t>(64, N / (4 * pool.threads())), [&](int64_t begin, int64_t end) {  // is shared
    for (int64_t n = begin; n < end; ++n) {
      const float* row = W + n * K;
      for (int64_t b = 0; b < B; ++b) Y[b * N + n] = row_dot(row, X + b * K, K);
    }
  });
  return y;
}

torch::Tensor paged_decode_attention(torch::Tensor q, torch::Tensor keys, torch::Tensor values,
                                     torch::Tensor tables, torch::Tensor lens, double scale);  // paged_attention.cpp

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  lanes::SpinPool::get();  // the helpers start now, sized by torch's threads (fast_decode may lower those later)
  m.def("few_row_linear", &few_row_linear, "y = x @ w.T for 1-6 float32 rows (x (B, K), w (N, K))");
  m.def("paged_decode_attention", &paged_decode_attention,
        "one-token attention (B, H, D) reading K/V blocks (num_blocks, block_size, kv_heads, D) through tables");
}
