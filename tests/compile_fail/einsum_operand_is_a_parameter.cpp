// A parameter read as an einsum operand (module weights were tensors once):
// its value is p.value, and a tape differentiates it through tape.watch(p).
// EXPECT: dimsum: einsum operand is a parameter, not a tensor
// EXPECT: einsum_operand_is_a_parameter<dimsum::operand<1>
#include "common.hpp"
#include <dimsum/grad/parameter.hpp>

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::parameter<float, nheads, d_model, d_head> W_Q;
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, W_Q);
#else
  auto r = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, W_Q.value);
#endif
  (void)r;
}
