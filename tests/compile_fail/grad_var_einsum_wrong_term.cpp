// A shape mistake on vars is the same single error as on tensors: here an
// einsum term that lists a dim the var lacks.
// EXPECT: dimsum: einsum label is not a dim of its operand
// EXPECT: einsum_label_is_not_a_dim_of_its_operand
// EXPECT: label<(dimsum::)?fixed_string<5>{"posx"}>
// EXPECT: dims<nheads, d_model, d_head>
// EXPECT: fix::rename<d_model, dimsum::label<(dimsum::)?fixed_string<5>{"posx"}> ?> ?\(dimsum::operand<1>\)
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::parameter<float, nheads, d_model, d_head> w(w_t::ones());
  dimsum::grad::tape t;
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto q = dimsum::einsum<"batch posn d_model, nheads posx d_head -> batch posn nheads d_head">(x, t.watch(w));
  auto s = dimsum::softmax<posn>(q);
  t.backward(dimsum::sum<batch, posn, nheads, d_head>(s));
#else
  auto q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, t.watch(w));
  auto s = dimsum::softmax<posn>(q);
  t.backward(dimsum::sum<batch, posn, nheads, d_head>(s));
#endif
}
