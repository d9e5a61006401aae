// An element-wise operation between tensors that share no dim (and no
// dim named like another: the message offers the outer product). clang
// shows the user's line.
// EXPECT: dimsum: element-wise operation between tensors that share no dim
// EXPECT: elementwise_operands_share_no_dim<dimsum::dims<batch, posn, d_model>, dimsum::dims<nheads, d_head> ?>
// EXPECT-CLANG: elementwise_share_no_dim\.cpp:[0-9]+:[0-9]+: note: in instantiation of
// EXPECT-GCC: elementwise_share_no_dim\.cpp:[0-9]+:[0-9]+:   required from here
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::tensor<float, nheads, d_head> b;
  dimsum::tensor<float, d_model> b_O;
#ifdef DIMSUM_SHOULD_FAIL
  auto y = x + b;
#else
  auto y = x + b_O; (void)b;
#endif
  (void)y;
}
