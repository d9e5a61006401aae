// A linear layer applied to a tensor without its input dim.
// EXPECT: dimsum: linear layer applied to a tensor without the layer's input dim
// EXPECT: linear_input_lacks_the_in_dim<d_head, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/nn/linear.hpp>

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::nn::linear<float, d_head, nheads> lin;
  dimsum::nn::linear<float, d_model, nheads> good;
#ifdef DIMSUM_SHOULD_FAIL
  auto r = lin(x);
#else
  auto r = good(x); (void)lin;
#endif
  (void)r;
}
