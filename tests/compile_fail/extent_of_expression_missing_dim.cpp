// The free extent<D>(x) of a lazy expression that lacks D: the same checker
// as the member extent<D>() of a tensor or view.
// EXPECT: dimsum: extent<D> of a dim that the tensor does not have
// EXPECT: extent_of_a_dim_that_the_tensor_does_not_have<k_posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  std::size_t n = dimsum::extent<k_posn>(x * 2.0f);
#else
  std::size_t n = dimsum::extent<posn>(x * 2.0f);
#endif
  return static_cast<int>(n) - 3;
}
