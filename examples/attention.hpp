// The attention layer of seed 000 (einops HiddenAttention) written as
// contractions. Shared by examples/attention.cpp and its tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <dimsum/dimsum.hpp>

namespace seed000 {

DIMSUM_DIM(batch);   // dynamic: given at run time
DIMSUM_DIM(posn);    // dynamic
DIMSUM_DIM(q_posn);  // query positions: posn renamed
DIMSUM_DIM(k_posn);  // key positions: posn renamed

using dimsum::einsum;
using dimsum::tensor;

/// HiddenAttention's parameters for model width DModel, NHeads heads of
/// width DHead (each a dim, static or dynamic).
template <class DModel, class NHeads, class DHead>
struct attention_weights {
  tensor<float, NHeads, DModel, DHead> W_Q, W_K, W_V;
  tensor<float, NHeads, DHead, DModel> W_O;
  tensor<float, NHeads, DHead> b_Q, b_K, b_V;
  tensor<float, DModel> b_O;

  /// The weights saved from PyTorch as W_Q.npy ... b_O.npy in `dir`.
  static attention_weights load(const std::string& dir) {
    attention_weights w;
    w.W_Q = dimsum::load_npy<tensor<float, NHeads, DModel, DHead>>(dir + "/W_Q.npy");
    w.W_K = dimsum::load_npy<tensor<float, NHeads, DModel, DHead>>(dir + "/W_K.npy");
    w.W_V = dimsum::load_npy<tensor<float, NHeads, DModel, DHead>>(dir + "/W_V.npy");
    w.W_O = dimsum::load_npy<tensor<float, NHeads, DHead, DModel>>(dir + "/W_O.npy");
    w.b_Q = dimsum::load_npy<tensor<float, NHeads, DHead>>(dir + "/b_Q.npy");
    w.b_K = dimsum::load_npy<tensor<float, NHeads, DHead>>(dir + "/b_K.npy");
    w.b_V = dimsum::load_npy<tensor<float, NHeads, DHead>>(dir + "/b_V.npy");
    w.b_O = dimsum::load_npy<tensor<float, DModel>>(dir + "/b_O.npy");
    return w;
  }

  /// Random normal weights scaled by 1/sqrt(fan-in), random biases.
  static attention_weights random(std::uint64_t seed, DModel m = {}, NHeads h = {}, DHead d = {}) {
    attention_weights w;
    const float sm = 1.0f / std::sqrt(float(m.value)), sd = 1.0f / std::sqrt(float(d.value));
    w.W_Q = tensor<float, NHeads, DModel, DHead>::random_normal(seed + 1, h, m, d) * sm;
    w.W_K = tensor<float, NHeads, DModel, DHead>::random_normal(seed + 2, h, m, d) * sm;
    w.W_V = tensor<float, NHeads, DModel, DHead>::random_normal(seed + 3, h, m, d) * sm;
    w.W_O = tensor<float, NHeads, DHead, DModel>::random_normal(seed + 4, h, d, m) * sd;
    w.b_Q = tensor<float, NHeads, DHead>::random_normal(seed + 5, h, d) * 0.5f;
    w.b_K = tensor<float, NHeads, DHead>::random_normal(seed + 6, h, d) * 0.5f;
    w.b_V = tensor<float, NHeads, DHead>::random_normal(seed + 7, h, d) * 0.5f;
    w.b_O = tensor<float, DModel>::random_normal(seed + 8, m) * 0.5f;
    return w;
  }
};

/// Every intermediate of the forward pass, for printing and testing.
template <class DModel, class NHeads, class DHead>
struct attention_trace {
  tensor<float, batch, posn, NHeads, DHead> q, k, v;
  tensor<float, batch, NHeads, q_posn, k_posn> raw_scores, scores, masked, pattern;
  tensor<float, batch, q_posn, NHeads, DHead> z;
  tensor<float, batch, posn, DModel> out;
};

/// HiddenAttention.forward, line by line.
template <class DModel, class NHeads, class DHead>
attention_trace<DModel, NHeads, DHead> attention(const tensor<float, batch, posn, DModel>& x,
                                                 const attention_weights<DModel, NHeads, DHead>& w) {
  attention_trace<DModel, NHeads, DHead> t;
  t.q = einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w.W_Q) + w.b_Q;
  t.k = einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w.W_K) + w.b_K;
  t.v = einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w.W_V) + w.b_V;

  const float d_head = float(t.q.template extent<DHead>());
  t.raw_scores = einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(
      dimsum::rename<posn, q_posn>(t.q), dimsum::rename<posn, k_posn>(t.k));
  t.scores = t.raw_scores / std::sqrt(d_head);
  t.masked = dimsum::causal_mask<q_posn, k_posn>(t.scores, -std::numeric_limits<float>::infinity());
  t.pattern = dimsum::softmax<k_posn>(t.masked);

  t.z = einsum<"batch k_posn nheads d_head, batch nheads q_posn k_posn -> batch q_posn nheads d_head">(
      dimsum::rename<posn, k_posn>(t.v), t.pattern);
  t.out = dimsum::rename<q_posn, posn>(
      einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(t.z, w.W_O) + w.b_O);
  return t;
}

}  // namespace seed000
