// stack along a dim the parts already have.
// EXPECT: dimsum: stack needs a new dim
// EXPECT: stack_dim_is_already_a_dim_of_the_parts<posn, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <vector>

int main() {
  std::vector<x_t> parts{x_t(batch{1}, posn{2})};
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::stack<posn>(parts);
#else
  auto r = dimsum::stack<nheads>(parts);
#endif
  (void)r;
}
