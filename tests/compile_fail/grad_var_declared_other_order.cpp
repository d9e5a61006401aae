// A var result assigned to a var of the same dims in another order (a
// tensor's assignment transposes; a var's would have to record it): it was
// the compiler's "conversion from var<...> to non-scalar type var<...>".
// EXPECT: dimsum: a grad::var is not transposed by assignment
// EXPECT: a_var_keeps_the_order_of_its_dims<dimsum::dims<posn, batch, d_model>, dimsum::dims<batch, posn, d_model> ?>
#include "common.hpp"
#include <dimsum/grad/grad.hpp>

int main() {
  dimsum::grad::tape tape;
  auto v = tape.watch(x_t::ones(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::grad::var<float, posn, batch, d_model> r = v * 2.0f;
#else
  dimsum::grad::var<float, posn, batch, d_model> r =
      dimsum::rearrange<"batch posn d_model -> posn batch d_model">(v * 2.0f);
#endif
  (void)r;
}
