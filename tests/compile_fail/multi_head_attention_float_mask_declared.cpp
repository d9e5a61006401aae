// nn::multi_head_attention given a float padding mask (PyTorch's additive
// float masks), with the output read into a declared tensor: one error, the
// mask's value type (attention masks are bool, true = attend).
// EXPECT: dimsum: masked_fill needs a mask of bool values
// EXPECT: masked_fill_mask_is_not_boolean<float>
#include "common.hpp"
#include <dimsum/nn/nn.hpp>

int main() {
  dimsum::nn::multi_head_attention<float, d_model, nheads, d_head> mha(nheads{2}, d_model{});
  x_t x(batch{2}, posn{3});
  auto k = dimsum::rename<posn, k_posn>(x);
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, k_posn> pad(batch{2}, k_posn{3});
#else
  dimsum::tensor<bool, batch, k_posn> pad(batch{2}, k_posn{3});
#endif
  x_t o = mha(x, k, k, pad).output;
  (void)o;
}
