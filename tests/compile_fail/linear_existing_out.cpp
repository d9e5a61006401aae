// A linear layer whose output dim the input already has.
// EXPECT: dimsum: linear layer applied to a tensor that already has the layer's output dim
// EXPECT: linear_input_already_has_the_out_dim<posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/nn/linear.hpp>

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::nn::linear<float, d_model, posn> lin;
  dimsum::nn::linear<float, d_model, nheads> good;
#ifdef DIMSUM_SHOULD_FAIL
  auto r = lin(x);
#else
  auto r = good(x); (void)lin;
#endif
  (void)r;
}
