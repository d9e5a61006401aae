// The output names a dim that '...' stands for on the left: the two sides'
// '...' would stand for different dims.
// EXPECT: dimsum: the output names a dim that '...' stands for on the left
// EXPECT: einsum_output_names_a_dim_that_the_ellipsis_stands_for<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"batch"}>, dimsum::input_term<0> ?, dimsum::dims<batch, posn, d_model> ?>
// EXPECT-CLANG: ellipsis_named_on_the_right\.cpp:[0-9]+:[0-9]+: note
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rearrange<"... d_model -> batch ... d_model">(x);
#else
  auto r = dimsum::rearrange<"batch ... d_model -> batch ... d_model">(x);
#endif
  (void)r;
}
