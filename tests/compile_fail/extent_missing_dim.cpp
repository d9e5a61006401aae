// The extent of a dim the tensor lacks (PyTorch's x.size(dim) on the wrong
// dim): a checker naming the dim and the tensor's dims.
// EXPECT: dimsum: extent<D> of a dim that the tensor does not have
// EXPECT: extent_of_a_dim_that_the_tensor_does_not_have<nheads, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  std::size_t n = x.extent<nheads>();
#else
  std::size_t n = x.extent<posn>();
#endif
  return static_cast<int>(n) - 3;
}
