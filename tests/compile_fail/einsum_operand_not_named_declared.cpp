// As einsum_operand_not_named.cpp, with the result assigned to a declared tensor type, as
// users write it (`qkv_t q = ...`): still exactly one error.
// An einsum operand that is a raw xtensor container.
// EXPECT: dimsum: einsum operand is not a dimsum tensor or expression
// EXPECT: einsum_operand_is_not_a_named_tensor<dimsum::operand<1>
#include "common.hpp"
#include <xtensor/xbuilder.hpp>

int main() {
  x_t x(batch{2}, posn{3});
  xt::xtensor<float, 3> raw = xt::zeros<float>({2, 30, 10});
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t r = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, raw);
#else
  qkv_t r = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w); (void)raw;
#endif
  (void)r;
}
