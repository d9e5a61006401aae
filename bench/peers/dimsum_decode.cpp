// Incremental decoding of the seed-000 attention layer, the dimsum entry of
// `bench/compare --decode`: the P positions of x are fed one at a time, and
// each step's output row is the layer's output at that position.
//   cache      the step projects the new position only, appends its key and
//              value to a kv_cache and attends its query against the cache
//              (the fused kernel's few-rows path): O(t) attention work at step t;
//   recompute  the step runs the whole layer over positions [0, t] (causal
//              attention, fused) and keeps the last row, as a model without
//              a cache does.
//
//   dimsum_decode cache|recompute B P M H D [reps] [--out file.f32]
//
// (B must be 1.) Prints peak_extra_mib and median_ms; --out writes the
// output (b, p, m) as raw float32.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include <dimsum/dimsum.hpp>
#include <dimsum/ops/kv_cache.hpp>
#include <dimsum/ops/window_mask.hpp>

#include "inputs.hpp"

using dimsum::einsum;
using dimsum::rename;
using dimsum::tensor;

DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_model);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  const bench::peer_args args = bench::parse_args(argc - 1, argv + 1);
  if (!args.ok || args.shape.b != 1) return 2;
  const bench::attention_shape s = args.shape;
  std::printf("kernel=dimsum %s\n", dimsum::kernel_isa());
  bench::attention_inputs in(s);
  const batch B{s.b};
  const posn P{s.p};
  const d_model M{s.m};
  const nheads H{s.h};
  const d_head D{s.d};
  const auto x = bench::from(in.x, tensor<float, batch, posn, d_model>(B, P, M));
  const auto W_Q = bench::from(in.W_Q, tensor<float, nheads, d_model, d_head>(H, M, D));
  const auto W_K = bench::from(in.W_K, tensor<float, nheads, d_model, d_head>(H, M, D));
  const auto W_V = bench::from(in.W_V, tensor<float, nheads, d_model, d_head>(H, M, D));
  const auto W_O = bench::from(in.W_O, tensor<float, nheads, d_head, d_model>(H, D, M));
  const auto b_Q = bench::from(in.b_Q, tensor<float, nheads, d_head>(H, D));
  const auto b_K = bench::from(in.b_K, tensor<float, nheads, d_head>(H, D));
  const auto b_V = bench::from(in.b_V, tensor<float, nheads, d_head>(H, D));
  const auto b_O = bench::from(in.b_O, tensor<float, d_model>(M));
  const float scale = 1.0f / std::sqrt(float(s.d));
  const float inf = std::numeric_limits<float>::infinity();

  tensor<float, batch, posn, d_model> out(B, P, M);
  dimsum::kv_cache<float, k_posn, batch, k_posn, nheads, d_head> cache(B, k_posn{s.p}, H, D);

  // The layer over the positions [first, last] of x as queries, against the
  // keys and values `keys`, `values` (positions [0, last]); writes the rows
  // of `out` from `first`.
  auto layer_rows = [&](std::size_t first, std::size_t last, const auto& keys, const auto& values) {
    const auto xq = rename<posn, q_posn>(dimsum::slice<posn>(x, first, last + 1));
    const tensor<float, batch, q_posn, nheads, d_head> q =
        einsum<"batch q_posn d_model, nheads d_model d_head -> batch q_posn nheads d_head">(xq, W_Q) + b_Q;
    auto z = einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
        dimsum::softmax<k_posn>(dimsum::window_mask<q_posn, k_posn>(
            einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, keys) * scale,
            dimsum::kernels::unbounded_window, -inf, first)),
        values);
    static_assert(dimsum::uses_fused_attention_v<decltype(z)>);
    const tensor<float, batch, q_posn, nheads, d_head> zt = z;
    const tensor<float, batch, q_posn, d_model> o =
        einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(zt, W_O) + b_O;
    const std::size_t rows = last + 1 - first;
    std::copy(o.data() + (rows - 1) * s.m, o.data() + rows * s.m, out.data() + last * s.m);
  };
  using kv_t = tensor<float, batch, k_posn, nheads, d_head>;
  auto project = [&](std::size_t first, std::size_t last, const auto& W, const auto& b) -> kv_t {
    const auto xk = rename<posn, k_posn>(dimsum::slice<posn>(x, first, last + 1));
    return einsum<"batch k_posn d_model, nheads d_model d_head -> batch k_posn nheads d_head">(xk, W) + b;
  };

  auto forward = [&] {
    if (mode == "cache") {
      cache.clear();
      for (std::size_t t = 0; t < s.p; ++t) {
        cache.append(project(t, t, W_K, b_K), project(t, t, W_V, b_V));
        const auto keys = cache.keys();
        const auto values = cache.values();
        layer_rows(t, t, keys, values);
      }
    } else {
      for (std::size_t t = 0; t < s.p; ++t) {
        const kv_t keys = project(0, t, W_K, b_K);
        const kv_t values = project(0, t, W_V, b_V);
        layer_rows(0, t, keys, values);  // all t + 1 rows computed, the last kept
      }
    }
  };
  return bench::time_and_write(args, forward, [&] { return out.data(); }, s.b * s.p * s.m);
}
