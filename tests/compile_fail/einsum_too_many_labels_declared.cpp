// As einsum_too_many_labels.cpp, with the result assigned to a declared tensor type, as
// users write it (`dimsum::tensor<float, batch> q = ...`): still exactly one error.
// An einsum term with more labels than dimsum supports.
// EXPECT: dimsum: einsum string has more terms or labels than dimsum supports
// EXPECT: einsum_string_has_too_many_labels
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch> r = dimsum::einsum<"a b c d e f g h i j k l m n o p q -> a">(x);
#else
  dimsum::tensor<float, batch> r = dimsum::einsum<"batch posn d_model -> batch">(x);
#endif
  (void)r;
}
