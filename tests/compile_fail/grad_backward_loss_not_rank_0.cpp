// tape.backward of a loss that still has dims (torch requires a scalar).
// EXPECT: dimsum: tape.backward\(loss\) needs a rank-0 loss
// EXPECT: backward_needs_a_rank_0_loss<dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::parameter<float, nheads, d_model, d_head> w(w_t::ones());
  dimsum::grad::tape t;
  x_t x(batch{2}, posn{3});
  auto q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn d_model">(x, t.watch(w));
#ifdef DIMSUM_SHOULD_FAIL
  t.backward(q);
#else
  t.backward(dimsum::sum<batch, posn, d_model>(q));
#endif
}
