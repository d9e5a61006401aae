#pragma once
/// \file
/// The forward pass and the loss of the character transformer
/// (char_transformer_model.hpp), recorded on a `grad::tape` with the tape's
/// operations: einsum, rename, causal_mask and softmax (the attention, one
/// fused node), `lookup` (embedding),
/// `layer_norm` (the model's nn::layer_norm modules), `gelu` and
/// `cross_entropy`. `forward` and `loss` are defined here, not inline:
/// include this header in exactly one translation unit of a program (the
/// example's examples/char_transformer_model.cpp, or a test's only one).

#include <cmath>
#include <cstdint>
#include <limits>

#include <dimsum/grad/grad.hpp>

#include "char_transformer_model.hpp"

namespace char_lm {

/// Causal multi-head self-attention of h (batch, posn, d_model) on the
/// tape: one projection string for queries, keys and values; the keys and
/// values' positions renamed k_posn so that the scores have both; then the
/// attention as its three lines: scores, causal softmax, weighted values.
/// On vars the scores and the weights are lazy (`grad::lazy_var`), and the
/// einsum with v that completes the pattern records one tape node on the
/// fused kernel (forward, and the FlashAttention-2 backward): neither pass
/// stores the scores.
template <class X>
auto attention(tape& t, attention_params& a, const X& h) {
  using dimsum::einsum;
  using dimsum::rename;
  constexpr dimsum::fixed_string project = "batch posn d_model, d_model nheads d_head -> batch posn nheads d_head";
  auto q = rename<posn, q_posn>(einsum<project>(h, t.watch(a.W_Q)));
  auto k = rename<posn, k_posn>(einsum<project>(h, t.watch(a.W_K)));
  auto v = rename<posn, k_posn>(einsum<project>(h, t.watch(a.W_V)));
  const float scale = 1.0f / std::sqrt(float(a.W_Q.value.template extent<d_head>()));
  auto scores = einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k) * scale;
  auto weights = dimsum::softmax<k_posn>(
      dimsum::causal_mask<q_posn, k_posn>(scores, -std::numeric_limits<float>::infinity()));
  auto z = einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(weights, v);
  static_assert(dimsum::uses_fused_attention_v<decltype(z)>, "the example's attention runs on the fused kernel");
  auto out = rename<q_posn, posn>(einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(z, t.watch(a.W_O)));
  return out + t.watch(a.b_O);
}

/// The MLP on the tape: gelu(h W_in + b_in) W_out + b_out.
template <class X>
auto mlp(tape& t, mlp_params& p, const X& h) {
  using dimsum::einsum;
  auto pre = einsum<"batch posn d_model, d_model d_mlp -> batch posn d_mlp">(h, t.watch(p.W_in)) + t.watch(p.b_in);
  return einsum<"batch posn d_mlp, d_mlp d_model -> batch posn d_model">(dimsum::gelu(pre), t.watch(p.W_out)) +
         t.watch(p.b_out);
}

var<float, batch, posn, vocab> forward(tape& t, model& m, const ids_t& ids) {
  const std::size_t n = ids.extent<posn>();
  tensor<std::int64_t, posn> positions(posn{n});
  for (std::size_t i = 0; i < n; ++i) positions.data()[i] = std::int64_t(i);
  var<float, batch, posn, d_model> x =
      dimsum::lookup<vocab>(t.watch(m.tok_embed), ids) + dimsum::lookup<ctx>(t.watch(m.pos_embed), positions);
  for (auto& b : m.blocks) {
    x = x + attention(t, b.attn, b.ln1(t, x));
    x = x + mlp(t, b.mlp, b.ln2(t, x));
  }
  return dimsum::einsum<"batch posn d_model, d_model vocab -> batch posn vocab">(m.ln_f(t, x), t.watch(m.W_U)) +
         t.watch(m.b_U);
}

var<float> loss(tape& t, model& m, const ids_t& x, const ids_t& y) {
  return dimsum::cross_entropy<vocab>(forward(t, m, x), y);
}

}  // namespace char_lm
