// dist::einsum with a label its operand lacks: the local einsum's one error,
// not followed by errors about a sharded<invalid_expression, ...> result (it
// gave 4 on both compilers).
// EXPECT: dimsum: einsum label is not a dim of its operand
// EXPECT: label<(dimsum::)?fixed_string<6>{"dhead"}>, dimsum::operand<0>, dimsum::dims<nheads, d_head>
#include "common.hpp"

int main() {
  dist::mesh<model> m(MPI_COMM_WORLD, model{1});
  dimsum::tensor<float, nheads, d_head> a;
  const auto as = dist::shard<heads_split>(m, a);
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dist::einsum<"nheads dhead -> nheads">(as);
#else
  auto r = dist::einsum<"nheads d_head -> nheads">(as);
#endif
  (void)r;
}
