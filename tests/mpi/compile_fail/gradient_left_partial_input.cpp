// a var every rank holds in full, used with weights split over `model`
// without dist::replicate: each rank would compute only its heads' part of
// the var's gradient, where the var needs the full gradient.
// EXPECT: dimsum: this var meets values split .* over a mesh axis it is not placed on
// EXPECT: gradient_would_be_a_partial_sum<dimsum::dims<batch ?, d_model ?>, model ?>
// EXPECT: gradient_left_partial_input\.cpp:16:
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::grad::tape t;
  dimsum::parameter<float, nheads, d_model, d_head> W_Q(nheads{}, d_model{}, d_head{});
  const auto w = dist::watch<heads_split>(t, m, W_Q);
  const auto x = t.watch(dimsum::tensor<float, batch, d_model>(batch{3}));
#ifdef DIMSUM_SHOULD_FAIL
  const auto q = dist::einsum<"batch d_model, nheads d_model d_head -> batch nheads d_head">(x, w);
#else
  const auto q = dist::einsum<"batch d_model, nheads d_model d_head -> batch nheads d_head">(dist::replicate<model>(m, x), w);
#endif
  (void)q;
}
