// concat along a dim the parts do not have.
// EXPECT: dimsum: concat along a dim that the parts do not have
// EXPECT: concat_dim_is_not_a_dim_of_the_parts<nheads, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <vector>

int main() {
  std::vector<x_t> parts{x_t(batch{1}, posn{2})};
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::concat<nheads>(parts);
#else
  auto r = dimsum::concat<posn>(parts);
#endif
  (void)r;
}
