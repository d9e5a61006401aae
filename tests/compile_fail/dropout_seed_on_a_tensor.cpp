// dimsum::dropout(x, p, seed) is the var form; on a tensor it was the
// compiler's "no matching function for call to dropout".
// EXPECT: dimsum: dropout\(x, p, seed\) is the form for grad::var .* for a tensor use nn::dropout\(p, /\*training=\*/true, seed\)\(x\)
// EXPECT: dropout_with_a_seed_takes_a_var<dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>
#include <dimsum/nn/dropout.hpp>

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto y = dimsum::dropout(x, 0.1, 7);
#else
  auto y = dimsum::nn::dropout(0.1, true, 7)(x);
#endif
  (void)y;
}
