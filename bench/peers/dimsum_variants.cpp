// Attention variants on the fused path, the dimsum entry of
// `bench/compare --variants`: the attention core z = softmax(f(q kᵀ)) v
// over q, k, v (b, p, h, d) for
//   causal   causal_mask
//   window   window_mask of 256 positions
//   alibi    scores * scale + alibi(nheads, q_posn, k_posn) (slope times distance), then causal_mask
//   padding  where(keep, scores, -inf) with the last p/8 keys padded, then causal_mask
//   gqa      4 key/value heads shared by groups of h/4 query heads, causal_mask
//   document 8 documents of p/8 tokens packed in each row: masked_fill(scores,
//            doc_q != doc_k, -inf) (document ids per position, broadcast by
//            name), then causal_mask; the block mask skips the other documents
//
//   dimsum_variants VARIANT B P M H D [reps] [--out file.f32]
//
// (M is unused: the inputs are q, k, v). Prints peak_extra_mib and
// median_ms; --out writes z (b, p, h, d) as raw float32.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include <dimsum/dimsum.hpp>
#include <dimsum/ops/alibi.hpp>
#include <dimsum/ops/window_mask.hpp>

#include "inputs.hpp"

using dimsum::einsum;
using dimsum::tensor;

DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(nheads);
DIMSUM_DIM(kv_heads);
DIMSUM_DIM(group);
DIMSUM_DIM(d_head);

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string variant = argv[1];
  const bench::peer_args args = bench::parse_args(argc - 1, argv + 1);
  if (!args.ok) return 2;
  const bench::attention_shape s = args.shape;
  std::printf("kernel=dimsum %s\n", dimsum::kernel_isa());
  const std::size_t n = s.b * s.p * s.h * s.d;
  const float scale = 1.0f / std::sqrt(float(s.d));
  const float inf = std::numeric_limits<float>::infinity();
  using qkv_t = tensor<float, batch, q_posn, nheads, d_head>;
  using kv_t = tensor<float, batch, k_posn, nheads, d_head>;
  const auto q = bench::from(bench::make_input(n, 1, 1.0), qkv_t(batch{s.b}, q_posn{s.p}, nheads{s.h}, d_head{s.d}));
  const auto k = bench::from(bench::make_input(n, 2, 1.0), kv_t(batch{s.b}, k_posn{s.p}, nheads{s.h}, d_head{s.d}));
  const auto v = bench::from(bench::make_input(n, 3, 1.0), kv_t(batch{s.b}, k_posn{s.p}, nheads{s.h}, d_head{s.d}));
  qkv_t z(batch{s.b}, q_posn{s.p}, nheads{s.h}, d_head{s.d});

  auto scores = [&] {
    return einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k) * scale;
  };
  auto attend = [&](auto&& pattern) {
    auto e = einsum<batch, q_posn, nheads, d_head>(dimsum::softmax<k_posn>(std::move(pattern)), v);
    static_assert(dimsum::uses_fused_attention_v<decltype(e)>);
    z = std::move(e);
  };

  // ALiBi's bias, lazily: h slopes, the distances computed when read (no
  // p x p table); the kernel computes slope * distance a vector at a time.
  const auto bias = dimsum::alibi<float>(nheads{s.h}, q_posn{s.p}, k_posn{s.p});
  tensor<bool, batch, k_posn> keep(batch{s.b}, k_posn{s.p});
  for (std::size_t b = 0; b < s.b; ++b)
    for (std::size_t j = 0; j < s.p; ++j) keep(batch{b}, k_posn{j}) = j < s.p - s.p / 8;
  // Packed documents: 8 of p/8 tokens in each batch row.
  tensor<int, batch, posn> doc(batch{s.b}, posn{s.p});
  for (std::size_t b = 0; b < s.b; ++b)
    for (std::size_t i = 0; i < s.p; ++i) doc(batch{b}, posn{i}) = int(i / (s.p / 8));
  // GQA: q's heads split as (kv_heads group), 4 key/value heads.
  const std::size_t kvh = 4, g = s.h / kvh;
  using gq_t = tensor<float, batch, q_posn, kv_heads, group, d_head>;
  using gkv_t = tensor<float, batch, k_posn, kv_heads, d_head>;
  const std::size_t nkv = s.b * s.p * kvh * s.d;
  const auto gq = bench::from(bench::make_input(n, 1, 1.0), gq_t(batch{s.b}, q_posn{s.p}, kv_heads{kvh}, group{g}, d_head{s.d}));
  const auto gk = bench::from(bench::make_input(nkv, 2, 1.0), gkv_t(batch{s.b}, k_posn{s.p}, kv_heads{kvh}, d_head{s.d}));
  const auto gv = bench::from(bench::make_input(nkv, 3, 1.0), gkv_t(batch{s.b}, k_posn{s.p}, kv_heads{kvh}, d_head{s.d}));
  gq_t gz(batch{s.b}, q_posn{s.p}, kv_heads{kvh}, group{g}, d_head{s.d});

  auto forward = [&] {
    if (variant == "causal") {
      attend(dimsum::causal_mask<q_posn, k_posn>(scores(), -inf));
    } else if (variant == "window") {
      attend(dimsum::window_mask<q_posn, k_posn>(scores(), 256, -inf));
    } else if (variant == "alibi") {
      attend(dimsum::causal_mask<q_posn, k_posn>(scores() + bias, -inf));
    } else if (variant == "padding") {
      attend(dimsum::causal_mask<q_posn, k_posn>(dimsum::where(keep, scores(), -inf), -inf));
    } else if (variant == "document") {
      attend(dimsum::causal_mask<q_posn, k_posn>(
          dimsum::masked_fill(scores(), dimsum::rename<posn, q_posn>(doc) != dimsum::rename<posn, k_posn>(doc), -inf),
          -inf));
    } else {  // gqa
      auto sc = einsum<"batch q_posn kv_heads group d_head, batch k_posn kv_heads d_head -> batch kv_heads group q_posn k_posn">(
          gq, gk);
      auto e = einsum<"batch kv_heads group q_posn k_posn, batch k_posn kv_heads d_head -> batch q_posn kv_heads group d_head">(
          dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(std::move(sc) * scale, -inf)), gv);
      static_assert(dimsum::uses_fused_attention_v<decltype(e)>);
      gz = std::move(e);
    }
  };
  return bench::time_and_write(args, forward, [&] { return variant == "gqa" ? gz.data() : z.data(); }, n);
}
