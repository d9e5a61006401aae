// As grad_cross_entropy_targets_dims.cpp, with the result assigned to a declared type, as users
// write it (`grad::var<float> loss = ...`): still exactly one error.
// cross_entropy targets whose dims are not the logits' dims without the class dim.
// EXPECT: dimsum: cross_entropy targets must have exactly the logits' dims without the class dim
// EXPECT: cross_entropy_targets_need_the_logits_dims_without_the_class_dim<dimsum::dims<batch, q_posn>, dimsum::dims<batch, posn> ?>
#include "common.hpp"
#include <cstdint>
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape t;
  auto logits = t.watch(x_t(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<std::int64_t, batch, q_posn> ids(batch{2}, q_posn{3});
#else
  dimsum::tensor<std::int64_t, batch, posn> ids(batch{2}, posn{3});
#endif
  dimsum::grad::var<float> loss = dimsum::cross_entropy<d_model>(logits, ids);
  t.backward(loss);
}
