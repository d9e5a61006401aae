// Every dynamic extent check throws dimsum::shape_error in a release build:
// this file is compiled with NDEBUG defined (see tests/CMakeLists.txt), and
// each message names the dims and both extents.
#ifndef NDEBUG
#error "this test must be compiled with NDEBUG: the checks must not depend on assert()"
#endif
#include <catch2/catch.hpp>

#include "support.hpp"

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_model);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);
}  // namespace

using namespace dimsum;
using Catch::Contains;

TEST_CASE("NDEBUG: einsum contraction extents", "[ndebug]") {
  tensor<float, batch, posn, d_model> x(batch{2}, posn{3}, d_model{8});
  tensor<float, nheads, d_model, d_head> w(nheads{2}, d_model{9}, d_head{4});
  REQUIRE_THROWS_AS((einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w)),
                    shape_error);
  REQUIRE_THROWS_WITH((einsum<batch, posn, nheads, d_head>(x, w)),
                      Contains("dimsum: einsum: dim 'd_model' has extent 8 in operand 0 but 9 in operand 1"));
}

TEST_CASE("NDEBUG: broadcasting extents", "[ndebug]") {
  tensor<float, batch, posn, nheads, d_head> q(batch{2}, posn{3}, nheads{2}, d_head{4});
  tensor<float, nheads, d_head> b(nheads{3}, d_head{4});
  REQUIRE_THROWS_WITH(q + b, Contains("dim 'nheads' has extent 2 on the left but 3 on the right"));
}

TEST_CASE("NDEBUG: masks", "[ndebug]") {
  tensor<float, q_posn, k_posn> s(q_posn{3}, k_posn{3});
  tensor<bool, k_posn> pad(k_posn{2});
  REQUIRE_THROWS_WITH(masked_fill(s, pad, 0.0f), Contains("masked_fill") && Contains("'k_posn'") &&
                                                    Contains("extent 3") && Contains("2"));
}

TEST_CASE("NDEBUG: element access bounds", "[ndebug]") {
  tensor<float, batch, posn> t(batch{2}, posn{3});
  REQUIRE_THROWS_WITH(t(batch{0}, posn{3}), Contains("index 3 is out of range for dim 'posn' of extent 3"));
}

TEST_CASE("NDEBUG: static extents met at run time", "[ndebug]") {
  using d64 = dim<"d_head", 64>;
  tensor<float, batch, d_head> t(batch{1}, d_head{32});
  REQUIRE_THROWS_WITH((tensor<float, batch, d64>(t)),
                      Contains("dim 'd_head' is static with extent 64 but got extent 32"));
  REQUIRE_THROWS_WITH((tensor<float, d64>(d64{16})), Contains("'d_head' is static with extent 64") && Contains("16"));
}

TEST_CASE("NDEBUG: sizes are checked before anything is allocated", "[ndebug]") {
  const std::size_t huge = std::size_t(1) << 40;
  REQUIRE_THROWS_WITH((tensor<float, batch, posn>(batch{huge}, posn{huge})), Contains("overflows"));
  // Fits in size_t as elements, not as bytes.
  const std::size_t big = std::size_t(1) << 31;
  REQUIRE_THROWS_WITH((tensor<float, batch, posn>(batch{big}, posn{big})), Contains("larger than memory can address"));
  // The result of an expression: four axes of 2^16 wrap a 64-bit count.
  tensor<float, batch> a(batch{1 << 16});
  tensor<float, posn> b(posn{1 << 16});
  tensor<float, q_posn> c(q_posn{1 << 16});
  tensor<float, k_posn> d(k_posn{1 << 16});
  REQUIRE_THROWS_AS((tensor<float, batch, posn, q_posn, k_posn>(einsum<batch, posn, q_posn, k_posn>(a, b, c, d))),
                    shape_error);
}
