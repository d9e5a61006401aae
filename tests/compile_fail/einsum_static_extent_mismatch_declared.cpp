// As einsum_static_extent_mismatch.cpp, with the result assigned to a declared tensor type, as
// users write it (`qkv_t q = ...`): still exactly one error.
// A contraction over a dim whose static extents differ (d_model 30 vs 32).
// EXPECT: dimsum: the same dim has two different static extents
// EXPECT: static_extent_mismatch<.*d_model.*extent_c<30>.*extent_c<32>
#include "common.hpp"

int main() {
  x_t x(batch{2}, posn{3});
  dimsum::tensor<float, nheads, dimsum::dim<"d_model", 32>, d_head> w32;
  w_t w;
#ifdef DIMSUM_SHOULD_FAIL
  qkv_t q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w32);
#else
  qkv_t q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w); (void)w32;
#endif
  (void)q;
}
