// A bf16 var times a float var (mixed precision without a cast): the error
// element-wise operations on tensors give, naming both value types.
// EXPECT: dimsum: an element-wise operation mixes bf16 with another value type
// EXPECT: elementwise_operands_have_different_value_types<dimsum::bf16, float>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape tape;
  auto h = tape.watch(dimsum::tensor<dimsum::bf16, batch, posn, d_model>(batch{2}, posn{3}));
  auto x = tape.watch(x_t::ones(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  auto r = h * x;
#else
  auto r = h * dimsum::cast<dimsum::bf16>(x);
#endif
  (void)r;
}
