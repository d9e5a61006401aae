// As ellipsis_named_on_the_right.cpp, in reduce, with the result assigned to a declared tensor type: still one error.
// EXPECT: dimsum: the output names a dim that '...' stands for on the left
// EXPECT: einsum_output_names_a_dim_that_the_ellipsis_stands_for<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"posn"}>, dimsum::input_term<0> ?, dimsum::dims<batch, posn, d_model> ?>
// EXPECT-CLANG: ellipsis_named_on_the_right_declared\.cpp:[0-9]+:[0-9]+: note
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, posn> r = dimsum::reduce<"... d_model -> posn", "sum">(x);
#else
  dimsum::tensor<float, posn> r = dimsum::reduce<"batch posn d_model -> posn", "sum">(x);
#endif
  (void)r;
}
