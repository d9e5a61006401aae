// An element-wise operation between a bf16 tensor and a float tensor.
// EXPECT: dimsum: an element-wise operation mixes bf16 with another value type
// EXPECT: elementwise_operands_have_different_value_types<dimsum::bf16, float>
#include "common.hpp"

int main() {
  dimsum::tensor<dimsum::bf16, batch, posn, d_model> h(batch{2}, posn{3});
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = x + h;
#else
  auto r = x + dimsum::cast<float>(h);
#endif
  (void)r;
}
