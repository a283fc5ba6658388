// A few-row float32 linear for the decode step on a CPU: y[b, n] = sum_k x[b, k] * w[n, k] for 1-16 rows b.
//
// One decode token per row makes a linear a skinny product: every weight is read once and used by each row. At 1-2
// rows it is bound by how fast the weights stream from memory; from ~6 rows on this 2-core CPU by how many
// multiply-adds a cycle the cores do. oneDNN's and MKL's kernels are good at neither here: 12-17 GB/s for 1-2 rows
// (a plain sum over the same bytes reaches 31-35 GB/s) and, at 8-16 rows, under half the cores' multiply-add rate.
//
// The weights are repacked once (`pack_panels`) into panels of PANEL output columns, each panel K x PANEL floats
// in one stretch of memory: panel p holds w[p * PANEL + j, k] at [p, k, j]. A thread takes whole panels in address
// order (one sequential stream per core for the prefetcher) and, for each k, holds the panel's PANEL weights in
// registers and multiply-adds them into PANEL accumulators per row with x[b, k] broadcast: each weight is loaded
// once for up to CHUNK rows, no accumulator needs a horizontal sum, and the loads stay below one per multiply-add.
// More rows than CHUNK are done CHUNK-ish rows at a time over the same panel (then in L2). The threads are pool.h's.
//
// Measured here (AMD EPYC, 2 cores, AVX-512; every linear of SmolLM2-135M plus its lm_head, 538 MB of weights
// read from memory, one call each): 19.0 / 18.8 / 20.2 / 20.4 / 28.7 ms at 1 / 2 / 4 / 8 / 16 rows; the row-major
// kernel this replaces took 20.2 / 21.3 / 28.6 ms at 1 / 2 / 4 rows and could not do 8. On an Intel Xeon (2 cores,
// AVX-512, ~18-20 GB/s read): 33.3 / 32.6 / 32.1 / 33.8 / 47.4 ms with the prefetch below (29.5 / 29.7 / 34.0 /
// 37.5 / 57.7 without), against a read floor of 27-30 ms.
//
// What it does not do: more than MAX_ROWS rows, other dtypes, or an output size that is not a multiple of PANEL
// (the caller checks, and uses oneDNN then).
#include <torch/extension.h>

#include <array>
#include <utility>

#include "pool.h"
#include "vec.h"

static constexpr int64_t MAX_ROWS = 16;  // cpu_kernels.MAX_ROWS
static constexpr int64_t PANEL = 32;     // cpu_kernels.PANEL: output columns per panel, VECS vectors (below)
// Software prefetch this many floats (16 KB) ahead of the weights being read, on Intel CPUs. Without it the
// hardware prefetcher falls behind once the cores are busy multiplying: at 8 rows the weights streamed 1.3x slower
// than at 1 (Intel Xeon, one core, 295 MB of panels: 16.6-18.3 vs 13.9-14.0 ns a k); with it 12.6-14.0 ns, as at 1
// row. On an AMD EPYC the same prefetch made it slower (every linear at 1 / 8 rows: 19.6 / 21.7 ms, without 18.1 /
// 18.4 in one interleaved run; 1.0-1.2x over five), so there the loop has none.
static constexpr int64_t AHEAD = 4096;
static bool prefetch_ahead() {
  __builtin_cpu_init();  // this runs in a static initializer: make sure the CPU has been identified
  return !__builtin_cpu_is("amd");
}
static const bool PREFETCH = prefetch_ahead();
using lanes::vec;  // the CPU's vector: one zmm register (AVX-512) or one ymm (AVX2)
using lanes::WIDTH;
#ifdef __AVX512F__
#define REGISTER(w) "+v"(w)      // any of the 32 vector registers
static constexpr int CHUNK = 8;  // rows at once: 16 accumulators, 2 weight registers (32 registers of 16 floats)
#else
#define REGISTER(w) "+x"(w)
static constexpr int CHUNK = 2;  // 8 accumulators, 4 weight registers (16 registers of 8 floats)
#endif
static constexpr int VECS = PANEL / WIDTH;  // a panel's row: VECS vectors

// R rows of x (row stride K) against one panel: y[r, 0..PANEL) (row stride N).
template <int R, bool Prefetch>
static void panel_rows(const float* x, int64_t K, const float* panel, float* y, int64_t N) {
  vec acc[R][VECS];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < VECS; ++v) acc[r][v] = vec{};
  for (int64_t k = 0; k < K; ++k) {
    if (Prefetch) {
      __builtin_prefetch(panel + k * PANEL + AHEAD, 0, 3);  // past a panel's end: the thread's next panel, or
      __builtin_prefetch(panel + k * PANEL + AHEAD + 16, 0, 3);  // nothing (a prefetch never faults)
    }
    vec w[VECS];
#pragma GCC unroll 4
    for (int v = 0; v < VECS; ++v) {
      w[v] = lanes::load<vec>(panel + k * PANEL + v * WIDTH);
      asm("" : REGISTER(w[v]));  // keep the weights in registers (x is broadcast from memory instead): without this
    }                        // GCC re-reads the weights for every row, and 4-8 rows took 1.5x as long
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const float s = x[r * K + k];
#pragma GCC unroll 4
      for (int v = 0; v < VECS; ++v) acc[r][v] += w[v] * s;  // fused multiply-adds (-ffp-contract=fast)
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < VECS; ++v) lanes::store(y + r * N + v * WIDTH, acc[r][v]);
}

using PanelRows = void (*)(const float*, int64_t, const float*, float*, int64_t);
template <bool Prefetch, int... R>
static constexpr std::array<PanelRows, sizeof...(R) + 1> table(std::integer_sequence<int, R...>) {
  return {nullptr, panel_rows<R + 1, Prefetch>...};
}
static constexpr std::array<std::array<PanelRows, CHUNK + 1>, 2> PANEL_ROWS = {  // [prefetch][r]: r rows at once
    table<false>(std::make_integer_sequence<int, CHUNK>{}), table<true>(std::make_integer_sequence<int, CHUNK>{})};

torch::Tensor pack_panels(torch::Tensor w) {
  TORCH_CHECK(w.dtype() == torch::kFloat32 && w.dim() == 2 && w.size(0) % PANEL == 0,
              "w (N, K) float32 with N a multiple of ", PANEL);
  const int64_t N = w.size(0), K = w.size(1);
  return w.reshape({N / PANEL, PANEL, K}).transpose(1, 2).contiguous();  // (N / PANEL, K, PANEL)
}

torch::Tensor few_row_linear(torch::Tensor x, torch::Tensor panels) {
  TORCH_CHECK(x.dtype() == torch::kFloat32 && panels.dtype() == torch::kFloat32, "float32 only");
  TORCH_CHECK(x.dim() == 2 && panels.dim() == 3 && panels.size(2) == PANEL && x.size(1) == panels.size(1),
              "x (B, K) and panels (N / ", PANEL, ", K, ", PANEL, ") from pack_panels");
  TORCH_CHECK(x.size(0) >= 1 && x.size(0) <= MAX_ROWS, "1-", MAX_ROWS, " rows");
  TORCH_CHECK(panels.is_contiguous(), "panels must be contiguous");
  x = x.contiguous();
  const int64_t B = x.size(0), K = x.size(1), P = panels.size(0), N = P * PANEL;
  auto y = torch::empty({B, N}, x.options());
  const float* X = x.data_ptr<float>();
  const float* W = panels.data_ptr<float>();
  float* Y = y.data_ptr<float>();
  const int64_t chunks = (B + CHUNK - 1) / CHUNK;
  const auto& rows_of = PANEL_ROWS[PREFETCH];
  lanes::SpinPool& pool = lanes::SpinPool::get();  // chunks of a quarter of a thread's share: a late helper's work
  pool.run(P, std::max<int64_t>(1, P / (4 * pool.threads())), [&](int64_t begin, int64_t end) {  // is shared
    for (int64_t p = begin; p < end; ++p) {
      for (int64_t c = 0, b = 0; c < chunks; ++c) {  // B rows in `chunks` near-equal parts
        const int64_t rows = (B - b) / (chunks - c);
        rows_of[rows](X + b * K, K, W + p * K * PANEL, Y + b * N + p * PANEL, N);
        b += rows;
      }
    }
  });
  return y;
}

torch::Tensor paged_decode_attention(torch::Tensor q, torch::Tensor keys, torch::Tensor values,
                                     torch::Tensor tables, torch::Tensor lens, double scale);  // paged_attention.cpp
torch::Tensor add_rms_norm(torch::Tensor x, c10::optional<torch::Tensor> d, torch::Tensor w, double eps);  // layer_ops
torch::Tensor rope_write(torch::Tensor qkv, torch::Tensor cos, torch::Tensor sin, torch::Tensor keys,
                         torch::Tensor values, torch::Tensor slots, int64_t heads);
torch::Tensor silu_mul(torch::Tensor gu);
torch::Tensor argmax_rows(torch::Tensor logits);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  lanes::SpinPool::get();  // the helpers start now, sized by torch's threads (fast_decode may lower those later)
  m.def("pack_panels", &pack_panels, "w (N, K) repacked as (N / 32, K, 32) panels for few_row_linear");
  m.def("few_row_linear", &few_row_linear, "y = x @ w.T for 1-16 float32 rows (x (B, K), w as pack_panels(w))");
  m.def("paged_decode_attention", &paged_decode_attention,
        "one-token attention (B, H, D) reading K/V blocks (num_blocks, block_size, kv_heads, D) through tables");
  m.def("add_rms_norm", &add_rms_norm, "x += d (in place, d may be None), then RMSNorm(x) * w: (B, E)");
  m.def("rope_write", &rope_write, "RoPE on q|k of qkv (B, (H + 2 KV) D); k, v written to pool slots; q (B, H, D)");
  m.def("silu_mul", &silu_mul, "SiLU(gate) * up of gu (B, 2 I): (B, I)");
  m.def("argmax_rows", &argmax_rows, "each row's first index of its largest value (B, V) -> (B,)");
}
