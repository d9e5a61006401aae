// Returning a view (select) of a local tensor: the view points into memory
// freed at the return. clang warns (-Wdangling).
// EXPECT: address of stack memory associated with local variable 't' returned
// EXPECT: -Wreturn-stack-address
#include <dimsum/dimsum.hpp>

DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
using t_t = dimsum::tensor<float, batch, posn>;

#ifdef DIMSUM_SHOULD_WARN
auto first_row_of_local() {
  t_t t(batch{2}, posn{3});
  return dimsum::select<batch>(t, 0);  // a view of t: dangles
}
#endif

// Safe: a view of a parameter, and a select of an rvalue (which evaluates
// into a tensor of its own).
auto first_row_of(t_t& t) { return dimsum::select<batch>(t, 0); }
auto first_row_of_temporary() { return dimsum::select<batch>(t_t(batch{2}, posn{3}), 0); }
auto middle_of_local_sum() {
  t_t t(batch{2}, posn{3});
  return dimsum::slice<posn>(t + t, 1, 2);  // a lazy operand: evaluated, so no view of t
}

int main() {
  t_t x(batch{2}, posn{3});
  auto r = first_row_of(x);
  auto s = first_row_of_temporary();
  auto m = middle_of_local_sum();
  (void)r;
  (void)s;
  (void)m;
#ifdef DIMSUM_SHOULD_WARN
  auto d = first_row_of_local();
  (void)d;
#endif
}
