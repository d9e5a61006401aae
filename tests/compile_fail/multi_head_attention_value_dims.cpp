// nn::multi_head_attention with values whose batch dim is not the one q and
// k share: v must have (batch, k_posn, d_model).
// EXPECT: dimsum: the tensor's dims are not the dims this function requires
// EXPECT: tensor_dims_are_not_the_required_dims<dimsum::dims<batch, k_posn, d_model>, dimsum::dims<q_posn, k_posn, d_model> ?>
#include "common.hpp"
#include <dimsum/nn/nn.hpp>

int main() {
  dimsum::nn::multi_head_attention<float, d_model, nheads, d_head> mha(nheads{2}, d_model{});
  x_t x(batch{2}, posn{3});
  auto k = dimsum::rename<posn, k_posn>(x);
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, q_posn, k_posn, d_model> v(q_posn{2}, k_posn{3});
#else
  dimsum::tensor<float, batch, k_posn, d_model> v(batch{2}, k_posn{3});
#endif
  auto r = mha(x, k, v);
  (void)r;
}
