// A linear layer called on a grad::var without its input dim (the tape
// form, `lin(x)` in a training loop): the same one error as on a tensor.
// EXPECT: dimsum: linear layer applied to a tensor without the layer's input dim
// EXPECT: linear_input_lacks_the_in_dim<d_head, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/nn/linear.hpp>

int main() {
  dimsum::grad::tape t;
  auto x = t.constant(x_t(batch{2}, posn{3}));
  dimsum::nn::linear<float, d_head, nheads> lin;
  dimsum::nn::linear<float, d_model, nheads> good;
#ifdef DIMSUM_SHOULD_FAIL
  auto r = lin(x);
#else
  auto r = good(x); (void)lin;
#endif
  (void)r;
}
