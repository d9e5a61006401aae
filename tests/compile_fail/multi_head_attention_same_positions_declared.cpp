// As multi_head_attention_same_positions.cpp, with the output read and
// assigned to a declared tensor type, as users write it (`x_t o =
// mha(x, x, x).output;`): still exactly one error (reading .output of the
// failed call was a second one).
// EXPECT: dimsum: attention needs different dims for query and key positions
// EXPECT: attention_query_and_key_positions_share_a_name<dimsum::dims<batch, posn> ?>
#include "common.hpp"
#include <dimsum/nn/nn.hpp>

int main() {
  dimsum::nn::multi_head_attention<float, d_model, nheads, d_head> mha(nheads{2}, d_model{});
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  x_t o = mha(x, x, x).output;
#else
  auto k = dimsum::rename<posn, k_posn>(x);
  dimsum::tensor<float, batch, posn, d_model> o = mha(x, k, k).output;
#endif
  (void)o;
}
