// A group in the output without the name of the merged dim.
// EXPECT: dimsum: a group in the einsum output needs the name of the merged dim
// EXPECT: einsum_output_group_needs_a_name<dimsum::labels<nheads, d_head> ?>|einsum_output_group_needs_a_name<dimsum::labels<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"nheads"}>
#include "common.hpp"

int main() {
  qkv_t q(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rearrange<"batch posn nheads d_head -> batch posn (nheads d_head)">(q);
#else
  auto r = dimsum::rearrange<"batch posn nheads d_head -> batch posn hd(nheads d_head)">(q);
#endif
  (void)r;
}
