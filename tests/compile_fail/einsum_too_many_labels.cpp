// An einsum term with more labels than dimsum supports.
// EXPECT: dimsum: einsum string has more terms or labels than dimsum supports
// EXPECT: einsum_string_has_too_many_labels
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::einsum<"a b c d e f g h i j k l m n o p q -> a">(x);
#else
  auto r = dimsum::einsum<"batch posn d_model -> batch">(x);
#endif
  (void)r;
}
