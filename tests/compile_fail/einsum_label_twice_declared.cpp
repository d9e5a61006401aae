// As einsum_label_twice.cpp, with the result assigned to a declared tensor type, as
// users write it (`dimsum::tensor<float, batch, posn, nheads> q = ...`): still exactly one error.
// A term that names the same label twice (self-attention without renaming).
// EXPECT: dimsum: einsum term names the same label twice
// EXPECT: einsum_term_names_a_label_twice<dimsum::label<(dimsum::)?fixed_string<[0-9]+>{"posn"}>
#include "common.hpp"

int main() {
  qkv_t q(batch{2}, posn{3});
#ifdef DIMSUM_SHOULD_FAIL
  dimsum::tensor<float, batch, posn, nheads> s = dimsum::einsum<"batch posn nheads d_head, batch posn nheads d_head -> batch nheads posn posn">(q, q);
#else
  dimsum::tensor<float, batch, posn, nheads> s = dimsum::einsum<"batch posn nheads d_head, batch posn nheads d_head -> batch nheads posn">(q, q);
#endif
  (void)s;
}
