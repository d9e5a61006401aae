// A group with two labels whose extents nothing gives.
// EXPECT: dimsum: einsum group has more than one label whose extent no operand gives
// EXPECT: einsum_group_has_more_than_one_unknown_extent<dimsum::labels<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"h"}>, dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"d"}> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rearrange<"batch posn (h d) -> batch h posn d">(x);
#else
  auto r = dimsum::rearrange<"batch posn (h d) -> batch h posn d">(x, dimsum::dim<"h">{5});
#endif
  (void)r;
}
