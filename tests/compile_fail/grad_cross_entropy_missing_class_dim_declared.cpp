// As grad_cross_entropy_missing_class_dim.cpp, with the result assigned to a declared type, as users
// write it (`grad::var<float> loss = ...`): still exactly one error.
// cross_entropy over a class dim that the logits do not have.
// EXPECT: dimsum: cross_entropy<Class> over a class dim that the logits do not have
// EXPECT: cross_entropy_class_dim_is_not_a_dim_of_the_logits<nheads, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <cstdint>
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape t;
  auto logits = t.watch(x_t(batch{2}, posn{3}));
  dimsum::tensor<std::int64_t, batch, posn> ids(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::grad::var<float> loss = dimsum::cross_entropy<nheads>(logits, ids);
#else
  dimsum::grad::var<float> loss = dimsum::cross_entropy<d_model>(logits, ids);
#endif
  t.backward(loss);
}
