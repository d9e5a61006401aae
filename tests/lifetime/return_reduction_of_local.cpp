// Returning softmax, a reduction, rename or causal_mask of a local tensor:
// each result holds the tensor by reference and it dies at the return.
// clang warns (-Wdangling) for each.
// EXPECT: address of stack memory associated with local variable 's' returned
// EXPECT: address of stack memory associated with local variable 'r' returned
// EXPECT: address of stack memory associated with local variable 'n' returned
// EXPECT: address of stack memory associated with local variable 'c' returned
#include <limits>
#include <utility>

#include <dimsum/dimsum.hpp>

DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(posn);
using t_t = dimsum::tensor<float, q_posn, k_posn>;

#ifdef DIMSUM_SHOULD_WARN
auto softmax_of_local() {
  t_t s(q_posn{2}, k_posn{3});
  return dimsum::softmax<k_posn>(s);  // dangles
}
auto sum_of_local() {
  t_t r(q_posn{2}, k_posn{3});
  return dimsum::sum<k_posn>(r);  // dangles
}
auto rename_of_local() {
  t_t n(q_posn{2}, k_posn{3});
  return dimsum::rename<q_posn, posn>(n);  // dangles
}
auto mask_of_local() {
  t_t c(q_posn{2}, k_posn{3});
  return dimsum::causal_mask<q_posn, k_posn>(c, 0.0f);  // dangles
}
#endif

// The safe forms: a parameter outlives the call; a moved local is owned by
// the expression; an evaluated result owns its data.
auto softmax_of_parameter(const t_t& s) { return dimsum::softmax<k_posn>(s); }
auto sum_of_moved_local() {
  t_t r(q_posn{2}, k_posn{3});
  return dimsum::sum<k_posn>(std::move(r));
}
auto rename_evaluated() {
  t_t n(q_posn{2}, k_posn{3});
  return dimsum::eval(dimsum::rename<q_posn, posn>(n));
}
auto mask_of_a_chain(const t_t& x) { return dimsum::causal_mask<q_posn, k_posn>(x * 2.0f, 0.0f); }

int main() {
  t_t x(q_posn{2}, k_posn{3});
  auto a = dimsum::eval(softmax_of_parameter(x));
  auto b = dimsum::eval(sum_of_moved_local());
  auto c = rename_evaluated();
  auto d = dimsum::eval(mask_of_a_chain(x));
#ifdef DIMSUM_SHOULD_WARN
  auto e = dimsum::eval(softmax_of_local());
  auto f = dimsum::eval(sum_of_local());
  auto g = dimsum::eval(rename_of_local());
  auto h = dimsum::eval(mask_of_local());
  (void)e, (void)f, (void)g, (void)h;
#endif
  (void)a, (void)b, (void)c, (void)d;
}
