#pragma once
/// \file
/// The forward pass and the loss of the character transformer
/// (char_transformer_model.hpp), recorded on a `grad::tape`: the attention
/// module's einsum, rename, causal_mask and softmax (one fused node),
/// `lookup` (embedding), the blocks (`nn::pre_norm_block` of nn::layer_norm
/// and nn::gelu_mlp) and `cross_entropy`; `forward_as<bf16>` is the same
/// forward pass in mixed precision (the embeddings cast to bf16, and every
/// module called on a bf16 var watches its float32 parameters as bf16
/// copies), which `loss_bf16` (examples/char_transformer_model.cpp,
/// the example's own translation unit, so that the tests including this
/// header do not compile the bf16 path) ends in float32. `forward` and
/// `loss` are defined here, not inline:
/// include this header in exactly one translation unit of a program (the
/// example's examples/char_transformer_model.cpp, or a test's only one).

#include <cmath>
#include <cstdint>
#include <limits>

#include <type_traits>

#include <dimsum/grad/grad.hpp>
#include <dimsum/nn/watch_like.hpp>

#include "char_transformer_model.hpp"

namespace char_lm {

/// Causal multi-head self-attention of x (batch, posn, d_model) on x's
/// tape, each parameter watched in x's value type (`nn::watch_like`: a bf16
/// copy of the float32 master for a bf16 x): one projection string for
/// queries, keys and values; the keys and values' positions renamed k_posn
/// so that the scores have both; then the attention as its three lines:
/// scores, causal softmax, weighted values. The scores and the weights are
/// lazy (`grad::lazy_var`), and the einsum with v that completes the
/// pattern records one tape node on the fused kernel (forward, and the
/// FlashAttention-2 backward): neither pass stores the scores. On bf16 vars
/// too: the kernel computes in float32 and rounds the output and the
/// gradients of q, k and v to bf16 once.
template <class X>
auto causal_self_attention::operator()(const X& x) {
  using dimsum::einsum;
  using dimsum::rename;
  using dimsum::nn::watch_like;
  constexpr dimsum::fixed_string project = "batch posn d_model, d_model nheads d_head -> batch posn nheads d_head";
  auto q = rename<posn, q_posn>(einsum<project>(x, watch_like(x, W_Q)));
  auto k = rename<posn, k_posn>(einsum<project>(x, watch_like(x, W_K)));
  auto v = rename<posn, k_posn>(einsum<project>(x, watch_like(x, W_V)));
  const float scale = 1.0f / std::sqrt(float(W_Q.value.template extent<d_head>()));
  auto scores = einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k) * scale;
  auto weights = dimsum::softmax<k_posn>(
      dimsum::causal_mask<q_posn, k_posn>(scores, -std::numeric_limits<float>::infinity()));
  auto z = einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(weights, v);
  static_assert(dimsum::uses_fused_attention_v<decltype(z)>, "the example's attention runs on the fused kernel");
  auto out = rename<q_posn, posn>(einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(z, watch_like(x, W_O)));
  return out + watch_like(x, b_O);
}

/// The logits in compute type C (float, or bf16: mixed precision).
template <class C>
var<C, batch, posn, vocab> forward_as(tape& t, model& m, const ids_t& ids) {
  const std::size_t n = ids.extent<posn>();
  tensor<std::int64_t, posn> positions(posn{n});
  for (std::size_t i = 0; i < n; ++i) positions.data()[i] = std::int64_t(i);
  var<float, batch, posn, d_model> embedded =
      dimsum::lookup<vocab>(t.watch(m.tok_embed), ids) + dimsum::lookup<ctx>(t.watch(m.pos_embed), positions);
  var<C, batch, posn, d_model> x;
  if constexpr (std::is_same_v<C, float>)
    x = embedded;
  else
    x = dimsum::cast<C>(embedded);
  for (auto& block : m.blocks) x = block(x);
  return dimsum::einsum<"batch posn d_model, d_model vocab -> batch posn vocab">(m.ln_f(x), dimsum::nn::watch_like(x, m.W_U)) +
         dimsum::nn::watch_like(x, m.b_U);
}

var<float, batch, posn, vocab> forward(tape& t, model& m, const ids_t& ids) { return forward_as<float>(t, m, ids); }

var<float> loss(tape& t, model& m, const ids_t& x, const ids_t& y) {
  return dimsum::cross_entropy<vocab>(forward(t, m, x), y);
}

}  // namespace char_lm
