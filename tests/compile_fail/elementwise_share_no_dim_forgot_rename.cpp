// A bias over posn added to scores over (q_posn, k_posn): no shared dim,
// and the fix is a rename (posn is the keys' positions), so the message
// offers the rename before the outer product. clang shows the user's line.
// EXPECT: dimsum: element-wise operation between tensors that share no dim, but one has a dim named like a dim of the other
// EXPECT: elementwise_operands_share_no_dim_did_you_mean_rename<dimsum::dims<q_posn, k_posn>, dimsum::dims<posn>, dimsum::fix::rename<posn, q_posn> ?>
// EXPECT-CLANG: elementwise_share_no_dim_forgot_rename\.cpp:[0-9]+:[0-9]+: note: in instantiation of
// EXPECT-GCC: elementwise_share_no_dim_forgot_rename\.cpp:[0-9]+:[0-9]+:   required from here
#include "common.hpp"

int main() {
  dimsum::tensor<float, q_posn, k_posn> scores(q_posn{3}, k_posn{3});
  dimsum::tensor<float, posn> bias(posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto y = scores + bias;
#else
  auto y = scores + dimsum::rename<posn, k_posn>(bias);
#endif
  (void)y;
}
