// A few-row float32 linear for the decode step on a CPU: y[b, n] = sum_k x[b, k] * w[n, k] for 1-4 rows b.
//
// One decode token per row makes a linear a matrix-vector product that reads every weight once and does one
// multiply-add per weight: it is bound by how fast the weights stream from memory. oneDNN's and MKL's kernels
// read them at 12-17 GB/s for 1-2 rows on this 2-core CPU, about half of what a plain sum over the same bytes
// reaches (31-35 GB/s). Here each thread walks whole weight rows in address order, one row at a time, with
// four independent accumulators per input row, so the prefetcher sees one sequential stream per core.
//
// What it does not do: more than 4 rows (the packed oneDNN kernels do as well from 4 on), other dtypes, or any
// shape whose K is not a multiple of 32 (the caller checks, and uses oneDNN then).
#include <torch/extension.h>
#include <immintrin.h>

static inline float horizontal_sum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_hadd_ps(lo, lo);
  lo = _mm_hadd_ps(lo, lo);
  return _mm_cvtss_f32(lo);
}

torch::Tensor few_row_linear(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.dtype() == torch::kFloat32 && w.dtype() == torch::kFloat32, "float32 only");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "x (B, K) and w (N, K)");
  TORCH_CHECK(x.size(0) >= 1 && x.size(0) <= 4 && x.size(1) % 32 == 0, "1-4 rows, K a multiple of 32");
  x = x.contiguous();
  TORCH_CHECK(w.is_contiguous(), "w must be contiguous");
  const int64_t B = x.size(0), K = x.size(1), N = w.size(0);
  auto y = torch::empty({B, N}, x.options());
  const float* X = x.data_ptr<float>();
  const float* W = w.data_ptr<float>();
  float* Y = y.data_ptr<float>();
  at::parallel_for(0, N, 64, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const float* row = W + n * K;
      for (int64_t b = 0; b < B; ++b) {
        const float* xb = X + b * K;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        for (int64_t k = 0; k < K; k += 32) {
          a0 = _mm256_fmadd_ps(_mm256_loadu_ps(row + k), _mm256_loadu_ps(xb + k), a0);
          a1 = _mm256_fmadd_ps(_mm256_loadu_ps(row + k + 8), _mm256_loadu_ps(xb + k + 8), a1);
          a2 = _mm256_fmadd_ps(_mm256_loadu_ps(row + k + 16), _mm256_loadu_ps(xb + k + 16), a2);
          a3 = _mm256_fmadd_ps(_mm256_loadu_ps(row + k + 24), _mm256_loadu_ps(xb + k + 24), a3);
        }
        Y[b * N + n] = horizontal_sum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
      }
    }
  });
  return y;
}

torch::Tensor paged_decode_attention(torch::Tensor q, torch::Tensor keys, torch::Tensor values,
                                     torch::Tensor tables, torch::Tensor lens, double scale);  // paged_attention.cpp

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("few_row_linear", &few_row_linear, "y = x @ w.T for 1-4 float32 rows (x (B, K), w (N, K))");
  m.def("paged_decode_attention", &paged_decode_attention,
        "one-token attention (B, H, D) reading K/V blocks (num_blocks, block_size, kv_heads, D) through tables");
}
