// As cross_entropy_targets_dims.cpp, with the result assigned to a declared type, as users
// write it (`dimsum::tensor<float> loss = ...`): still exactly one error.
// cross_entropy of tensors, with targets whose dims are not the logits' dims without the class dim.
// EXPECT: dimsum: cross_entropy targets must have exactly the logits' dims without the class dim
// EXPECT: cross_entropy_targets_need_the_logits_dims_without_the_class_dim<dimsum::dims<batch, q_posn>, dimsum::dims<batch, posn> ?>
#include "common.hpp"
#include <cstdint>

int main() {
  x_t logits(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<std::int64_t, batch, q_posn> ids(batch{2}, q_posn{3});
#else
  dimsum::tensor<std::int64_t, batch, posn> ids(batch{2}, posn{3});
#endif
  dimsum::tensor<float> loss = dimsum::cross_entropy<d_model>(logits, ids);
  (void)loss;
}
