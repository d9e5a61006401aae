#pragma once
/// \file
/// The forward pass and the loss of the character transformer
/// (char_transformer_model.hpp), recorded on a `grad::tape` with the tape's
/// operations: einsum, rename, causal_mask and softmax (the attention, one
/// fused node), `lookup` (embedding),
/// `layer_norm` (the model's nn::layer_norm modules), `gelu` and
/// `cross_entropy`; `forward_as<bf16>` is the same forward pass in mixed
/// precision (the float32 parameters watched as bf16 copies,
/// `grad::watch_as`), which `loss_bf16` (examples/char_transformer_model.cpp,
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

#include "char_transformer_model.hpp"

namespace char_lm {

/// A parameter of the model as a var of compute type C: itself (float), or
/// a bf16 copy of the float32 master (mixed precision: the cast is on the
/// tape, so the master's gradient is float32).
template <class C, class P>
auto param(tape& t, P& p) {
  if constexpr (std::is_same_v<C, float>)
    return t.watch(p);
  else
    return dimsum::grad::watch_as<C>(t, p);
}

/// Causal multi-head self-attention of h (batch, posn, d_model) on the
/// tape: one projection string for queries, keys and values; the keys and
/// values' positions renamed k_posn so that the scores have both; then the
/// attention as its three lines: scores, causal softmax, weighted values.
/// The scores and the weights are lazy (`grad::lazy_var`), and the einsum
/// with v that completes the pattern records one tape node on the fused
/// kernel (forward, and the FlashAttention-2 backward): neither pass stores
/// the scores. On bf16 vars too: the kernel computes in float32 and rounds
/// the output and the gradients of q, k and v to bf16 once.
template <class C, class X>
auto attention(tape& t, attention_params& a, const X& h) {
  using dimsum::einsum;
  using dimsum::rename;
  constexpr dimsum::fixed_string project = "batch posn d_model, d_model nheads d_head -> batch posn nheads d_head";
  auto q = rename<posn, q_posn>(einsum<project>(h, param<C>(t, a.W_Q)));
  auto k = rename<posn, k_posn>(einsum<project>(h, param<C>(t, a.W_K)));
  auto v = rename<posn, k_posn>(einsum<project>(h, param<C>(t, a.W_V)));
  const float scale = 1.0f / std::sqrt(float(a.W_Q.value.template extent<d_head>()));
  auto scores = einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k) * scale;
  auto weights = dimsum::softmax<k_posn>(
      dimsum::causal_mask<q_posn, k_posn>(scores, -std::numeric_limits<float>::infinity()));
  auto z = einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(weights, v);
  static_assert(dimsum::uses_fused_attention_v<decltype(z)>, "the example's attention runs on the fused kernel");
  auto out = rename<q_posn, posn>(einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(z, param<C>(t, a.W_O)));
  return out + param<C>(t, a.b_O);
}

/// The MLP on the tape: gelu(h W_in + b_in) W_out + b_out.
template <class C, class X>
auto mlp(tape& t, mlp_params& p, const X& h) {
  using dimsum::einsum;
  auto pre = einsum<"batch posn d_model, d_model d_mlp -> batch posn d_mlp">(h, param<C>(t, p.W_in)) + param<C>(t, p.b_in);
  return einsum<"batch posn d_mlp, d_mlp d_model -> batch posn d_model">(dimsum::gelu(pre), param<C>(t, p.W_out)) +
         param<C>(t, p.b_out);
}

/// A layer norm module applied in compute type C (its weight and bias
/// watched as C, its eps kept).
template <class C, class X>
auto norm(tape& t, layer_norm& ln, const X& x) {
  if constexpr (std::is_same_v<C, float>)
    return ln(t, x);
  else
    return dimsum::layer_norm<d_model>(x, param<C>(t, ln.weight), param<C>(t, ln.bias), ln.eps);
}

/// The logits in compute type C.
template <class C>
var<C, batch, posn, vocab> forward_as(tape& t, model& m, const ids_t& ids) {
  const std::size_t n = ids.extent<posn>();
  tensor<std::int64_t, posn> positions(posn{n});
  for (std::size_t i = 0; i < n; ++i) positions.data()[i] = std::int64_t(i);
  var<C, batch, posn, d_model> x =
      dimsum::lookup<vocab>(param<C>(t, m.tok_embed), ids) + dimsum::lookup<ctx>(param<C>(t, m.pos_embed), positions);
  for (auto& b : m.blocks) {
    x = x + attention<C>(t, b.attn, norm<C>(t, b.ln1, x));
    x = x + mlp<C>(t, b.mlp, norm<C>(t, b.ln2, x));
  }
  return dimsum::einsum<"batch posn d_model, d_model vocab -> batch posn vocab">(norm<C>(t, m.ln_f, x), param<C>(t, m.W_U)) +
         param<C>(t, m.b_U);
}

var<float, batch, posn, vocab> forward(tape& t, model& m, const ids_t& ids) { return forward_as<float>(t, m, ids); }

var<float> loss(tape& t, model& m, const ids_t& x, const ids_t& y) {
  return dimsum::cross_entropy<vocab>(forward(t, m, x), y);
}

}  // namespace char_lm
