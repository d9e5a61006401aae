// map with a function of two parameters over one operand (it was the
// compiler's "no matching function for call to map").
// EXPECT: dimsum: map\(f, x\.\.\.\) calls f with one value of each operand
// EXPECT: map_function_cannot_take_one_value_of_each_operand<dimsum::count_c<1> ?, dimsum::value_types<float> ?, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  x_t y = dimsum::map([](float a, float b) { return a + b; }, x);
#else
  x_t y = dimsum::map([](float a) { return a + a; }, x);
#endif
  (void)y;
}
