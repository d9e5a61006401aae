#pragma once
// Seed 000's attention layer as the training-step peers hold it
// (dimsum_train.cpp, dimsum_tp_train.cpp, dimsum_sp_train.cpp): its dims,
// its parameters as a module, and the whole layer filled from
// bench/peers/inputs.hpp's attention inputs.
#include <algorithm>
#include <vector>

#include <boost/hana/define_struct.hpp>

#include <dimsum/dimsum.hpp>
#include <dimsum/grad/parameter.hpp>

#include "inputs.hpp"

DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_model);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);

namespace bench {

struct seed000_layer {
  BOOST_HANA_DEFINE_STRUCT(seed000_layer, (dimsum::parameter<float, nheads, d_model, d_head>, W_Q),
                           (dimsum::parameter<float, nheads, d_model, d_head>, W_K),
                           (dimsum::parameter<float, nheads, d_model, d_head>, W_V),
                           (dimsum::parameter<float, nheads, d_head, d_model>, W_O),
                           (dimsum::parameter<float, nheads, d_head>, b_Q), (dimsum::parameter<float, nheads, d_head>, b_K),
                           (dimsum::parameter<float, nheads, d_head>, b_V), (dimsum::parameter<float, d_model>, b_O));
};

/// t with the values v (row-major, as many as t holds).
template <class T>
T filled(const std::vector<float>& v, T t) {
  std::copy(v.begin(), v.end(), t.data());
  return t;
}

/// The whole layer of shape s, from the inputs `in`.
inline seed000_layer full_layer(const attention_inputs& in, const attention_shape& s) {
  using dimsum::tensor;
  const d_model M{s.m};
  const nheads H{s.h};
  const d_head D{s.d};
  seed000_layer w{};
  w.W_Q.value = filled(in.W_Q, tensor<float, nheads, d_model, d_head>(H, M, D));
  w.W_K.value = filled(in.W_K, tensor<float, nheads, d_model, d_head>(H, M, D));
  w.W_V.value = filled(in.W_V, tensor<float, nheads, d_model, d_head>(H, M, D));
  w.W_O.value = filled(in.W_O, tensor<float, nheads, d_head, d_model>(H, D, M));
  w.b_Q.value = filled(in.b_Q, tensor<float, nheads, d_head>(H, D));
  w.b_K.value = filled(in.b_K, tensor<float, nheads, d_head>(H, D));
  w.b_V.value = filled(in.b_V, tensor<float, nheads, d_head>(H, D));
  w.b_O.value = filled(in.b_O, tensor<float, d_model>(M));
  return w;
}

}  // namespace bench
