// As einsum_output_group_unnamed.cpp, with the result assigned to a declared tensor type, as
// users write it (`dimsum::tensor<float, batch, posn, dimsum::dim<"hd">> q = ...`): still exactly one error.
// A group in the output without the name of the merged dim.
// EXPECT: dimsum: a group in the einsum output needs the name of the merged dim
// EXPECT: einsum_output_group_needs_a_name<dimsum::labels<nheads, d_head> ?>|einsum_output_group_needs_a_name<dimsum::labels<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"nheads"}>
#include "common.hpp"

int main() {
  qkv_t q(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, posn, dimsum::dim<"hd">> r = dimsum::rearrange<"batch posn nheads d_head -> batch posn (nheads d_head)">(q);
#else
  dimsum::tensor<float, batch, posn, dimsum::dim<"hd">> r = dimsum::rearrange<"batch posn nheads d_head -> batch posn hd(nheads d_head)">(q);
#endif
  (void)r;
}
