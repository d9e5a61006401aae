// Returning a lazy sum of two local tensors, or a unary operation of one
// (unary minus, exp, a math.hpp function): the expression holds them by
// reference, and they die at the return. clang warns (-Wdangling).
// EXPECT: address of stack memory associated with local variable 'a' returned
// EXPECT: address of stack memory associated with local variable 'b' returned
// EXPECT: address of stack memory associated with local variable 'n' returned
// EXPECT: address of stack memory associated with local variable 'e' returned
// EXPECT: address of stack memory associated with local variable 'h' returned
// EXPECT: -Wreturn-stack-address
#include <utility>

#include <dimsum/dimsum.hpp>

DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
using t_t = dimsum::tensor<float, batch, posn>;

#ifdef DIMSUM_SHOULD_WARN
auto sum_of_locals() {
  t_t a(batch{2}, posn{3}), b(batch{2}, posn{3});
  return a + b;  // dangles
}
auto negation_of_local() {
  t_t n(batch{2}, posn{3});
  return -n;  // dangles
}
auto exp_of_local() {
  t_t e(batch{2}, posn{3});
  return dimsum::exp(e);  // dangles
}
auto tanh_of_local() {
  t_t h(batch{2}, posn{3});
  return dimsum::tanh(h);  // dangles
}
#endif

// The safe forms draw no warning: parameters outlive the call, rvalues are
// moved into the expression, and a chain of temporaries owns its parts.
auto sum_of_parameters(const t_t& a, const t_t& b) { return a + b; }
auto sum_of_moved_locals() {
  t_t a(batch{2}, posn{3}), b(batch{2}, posn{3});
  return std::move(a) + std::move(b);
}
t_t evaluated_sum_of_locals() {
  t_t a(batch{2}, posn{3}), b(batch{2}, posn{3});
  return a + b;  // converted to a tensor before a and b die
}
auto scaled(const t_t& x) {
  const float s = 2.0f;
  auto chain = (x + x) * s;  // (x + x) is moved into the product
  return chain;
}

auto unary_of_a_chain(const t_t& x) { return dimsum::exp(-(x * 2.0f)); }  // temporaries moved in
auto unary_of_moved_local() {
  t_t m(batch{2}, posn{3});
  return dimsum::tanh(std::move(m));
}

int main() {
  t_t x(batch{2}, posn{3});
  t_t y = sum_of_parameters(x, x);
  t_t z = sum_of_moved_locals();
  t_t w = evaluated_sum_of_locals();
  t_t v = scaled(x);
  t_t s = unary_of_a_chain(x);
  t_t r = unary_of_moved_local();
#ifdef DIMSUM_SHOULD_WARN
  t_t u = sum_of_locals();
  t_t n = negation_of_local();
  t_t e = exp_of_local();
  t_t h = tanh_of_local();
#endif
}
