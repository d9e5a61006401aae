// stack<D>(a, b) with the parts as separate arguments (torch.stack takes a
// list; so does stack): it was the compiler's "no matching function".
// EXPECT: dimsum: stack<D> takes the parts as one std::vector .*stack<D>\(std::vector\{a, b\}\)
// EXPECT: stack_takes_one_vector_of_tensors<nheads ?, dimsum::count_c<2> ?, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <vector>

int main() {
  x_t a(batch{2}, posn{3}), b(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  auto s = dimsum::stack<nheads>(a, b);
#else
  auto s = dimsum::stack<nheads>(std::vector{a, b});
#endif
  (void)s;
}
