// rearrange that drops a dim.
// EXPECT: dimsum: rearrange must keep every dim
// EXPECT: rearrange_drops_a_dim<d_head>
#include "common.hpp"

int main() {
  qkv_t q(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rearrange<"batch posn nheads d_head -> batch posn nheads">(q);
#else
  auto r = dimsum::rearrange<"batch posn nheads d_head -> batch nheads posn d_head">(q);
#endif
  (void)r;
}
