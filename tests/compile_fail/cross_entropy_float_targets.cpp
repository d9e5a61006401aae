// cross_entropy with float targets of the right dims: the message names the
// value type (integer class indices expected), not the dims, which fit.
// EXPECT: dimsum: cross_entropy targets are integer class indices
// EXPECT: cross_entropy_targets_need_integer_class_indices<float, dimsum::dims<batch, posn> ?>
#include "common.hpp"
#include <cstdint>

int main() {
  x_t logits(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, posn> ids(batch{2}, posn{3});
#else
  dimsum::tensor<std::int64_t, batch, posn> ids(batch{2}, posn{3});
#endif
  dimsum::tensor<float> loss = dimsum::cross_entropy<d_model>(logits, ids);
  (void)loss;
}
