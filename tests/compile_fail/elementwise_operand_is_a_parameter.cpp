// A parameter used as an element-wise operand (module weights were tensors
// once): its value is p.value, and a tape differentiates it through
// tape.watch(p).
// EXPECT: dimsum: an element-wise operand is a parameter, not a tensor
// EXPECT: elementwise_operand_is_a_parameter<
// EXPECT-CLANG: elementwise_operand_is_a_parameter.cpp:17:
#include "common.hpp"
#include <dimsum/grad/parameter.hpp>

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::parameter<float, d_model> b;
#ifndef DIMSUM_SHOULD_FAIL
  x_t y = x + b.value;
  (void)y;
#else
  x_t y = x + b;
  (void)y;
#endif
}
