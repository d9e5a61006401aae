// As rearrange_drops_dim.cpp, with the result assigned to a declared tensor type, as
// users write it (`qkv_t q = ...`): still exactly one error.
// rearrange that drops a dim.
// EXPECT: dimsum: rearrange must keep every dim
// EXPECT: rearrange_drops_a_dim<d_head>
#include "common.hpp"

int main() {
  qkv_t q(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t r = dimsum::rearrange<"batch posn nheads d_head -> batch posn nheads">(q);
#else
  qkv_t r = dimsum::rearrange<"batch posn nheads d_head -> batch nheads posn d_head">(q);
#endif
  (void)r;
}
