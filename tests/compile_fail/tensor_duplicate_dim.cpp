// A tensor type with the same dim twice.
// EXPECT: dimsum: a tensor cannot have the same dim twice
// EXPECT: tensor_has_a_duplicate_dim<posn, dimsum::dims<batch, posn, posn> ?>
#include "common.hpp"

int main() {
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, posn, posn> t(batch{2}, posn{3});
#else
  dimsum::tensor<float, batch, posn, k_posn> t(batch{2}, posn{3}, k_posn{3});
#endif
  (void)t;
}
