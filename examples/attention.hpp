// The attention layer of seed 000 (einops HiddenAttention) written as
// contractions. Shared by examples/attention.cpp and its tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <boost/hana/define_struct.hpp>

#include <dimsum/dimsum.hpp>
#include <dimsum/grad/parameter.hpp>
#include <dimsum/io/npy_dir.hpp>

namespace seed000 {

DIMSUM_DIM(batch);   // dynamic: given at run time
DIMSUM_DIM(posn);    // dynamic
DIMSUM_DIM(q_posn);  // query positions: posn renamed
DIMSUM_DIM(k_posn);  // key positions: posn renamed

using dimsum::einsum;
using dimsum::tensor;

/// HiddenAttention's parameters for model width DModel, NHeads heads of
/// width DHead (each a dim, static or dynamic): `nn.Parameter`s, reflected
/// members, so `dimsum::load_npy_dir(dir, w, dimsum::non_strict)` reads
/// the ones PyTorch saved (W_Q.npy ... b_O.npy) from a directory that holds
/// the seed's other tensors too, by member name.
template <class DModel, class NHeads, class DHead>
struct attention_weights {
  BOOST_HANA_DEFINE_STRUCT(attention_weights, (dimsum::parameter<float, NHeads, DModel, DHead>, W_Q),
                           (dimsum::parameter<float, NHeads, DModel, DHead>, W_K),
                           (dimsum::parameter<float, NHeads, DModel, DHead>, W_V),
                           (dimsum::parameter<float, NHeads, DHead, DModel>, W_O),
                           (dimsum::parameter<float, NHeads, DHead>, b_Q), (dimsum::parameter<float, NHeads, DHead>, b_K),
                           (dimsum::parameter<float, NHeads, DHead>, b_V), (dimsum::parameter<float, DModel>, b_O));

  /// Zeros of the given extents (a static dim's by default).
  explicit attention_weights(DModel m = {}, NHeads h = {}, DHead d = {})
      : W_Q(h, m, d), W_K(h, m, d), W_V(h, m, d), W_O(h, d, m), b_Q(h, d), b_K(h, d), b_V(h, d), b_O(m) {}

  /// Random normal weights scaled by 1/sqrt(fan-in), random biases.
  static attention_weights random(std::uint64_t seed, DModel m = {}, NHeads h = {}, DHead d = {}) {
    attention_weights w(m, h, d);
    const float sm = 1.0f / std::sqrt(float(m.value)), sd = 1.0f / std::sqrt(float(d.value));
    w.W_Q.value = tensor<float, NHeads, DModel, DHead>::random_normal(seed + 1, h, m, d) * sm;
    w.W_K.value = tensor<float, NHeads, DModel, DHead>::random_normal(seed + 2, h, m, d) * sm;
    w.W_V.value = tensor<float, NHeads, DModel, DHead>::random_normal(seed + 3, h, m, d) * sm;
    w.W_O.value = tensor<float, NHeads, DHead, DModel>::random_normal(seed + 4, h, d, m) * sd;
    w.b_Q.value = tensor<float, NHeads, DHead>::random_normal(seed + 5, h, d) * 0.5f;
    w.b_K.value = tensor<float, NHeads, DHead>::random_normal(seed + 6, h, d) * 0.5f;
    w.b_V.value = tensor<float, NHeads, DHead>::random_normal(seed + 7, h, d) * 0.5f;
    w.b_O.value = tensor<float, DModel>::random_normal(seed + 8, m) * 0.5f;
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
  t.q = einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w.W_Q.value) + w.b_Q.value;
  t.k = einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w.W_K.value) + w.b_K.value;
  t.v = einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w.W_V.value) + w.b_V.value;

  const float d_head = float(t.q.template extent<DHead>());
  t.raw_scores = einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(
      dimsum::rename<posn, q_posn>(t.q), dimsum::rename<posn, k_posn>(t.k));
  t.scores = t.raw_scores / std::sqrt(d_head);
  t.masked = dimsum::causal_mask<q_posn, k_posn>(t.scores, -std::numeric_limits<float>::infinity());
  t.pattern = dimsum::softmax<k_posn>(t.masked);

  t.z = einsum<"batch k_posn nheads d_head, batch nheads q_posn k_posn -> batch q_posn nheads d_head">(
      dimsum::rename<posn, k_posn>(t.v), t.pattern);
  t.out = dimsum::rename<q_posn, posn>(
      einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(t.z, w.W_O.value) + w.b_O.value);
  return t;
}

}  // namespace seed000
