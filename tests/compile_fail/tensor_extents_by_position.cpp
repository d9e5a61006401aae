// Extents given as plain numbers, PyTorch's torch.zeros(2, 3): a dimsum
// error naming the argument's position and the tensor's dims (it was the
// compiler's "no matching function", 43 lines on g++).
// EXPECT: dimsum: extents and indices are given by name, not by position
// EXPECT: extents_and_indices_are_given_by_name<int, dimsum::count_c<0>, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
#ifdef DIMSUM_SHOULD_FAIL
  x_t x(2, 3);
#else
  x_t x(batch{2}, posn{3});
#endif
  (void)x;
}
