// tape.backward of a tensor: only a var recorded on the tape has a graph.
// EXPECT: dimsum: tape.backward\(loss\) needs a grad::var
// EXPECT: backward_needs_a_var<dimsum::dims<> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::parameter<float, nheads, d_model, d_head> w(w_t::ones());
  dimsum::grad::tape t;
  const dimsum::tensor<float> plain = dimsum::sum<nheads, d_model, d_head>(w.value);
#ifdef DIMSUM_SHOULD_FAIL
  t.backward(plain);
#else
  t.backward(dimsum::sum<nheads, d_model, d_head>(t.watch(w)) + plain);
#endif
}
