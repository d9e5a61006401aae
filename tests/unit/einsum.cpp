// einsum in both spellings against plain loops: matrix products in every
// layout, batch dims, one and three operands, full contraction, dims summed
// from one operand only (pre-reduced), operands contracted pairwise, strided
// operands (views), and extent checks.
#include <catch2/catch.hpp>

#include "support.hpp"

namespace {
DIMSUM_DIM(i);
DIMSUM_DIM(j);
DIMSUM_DIM(k);
DIMSUM_DIM(b);
DIMSUM_DIM(r);
}  // namespace

using namespace dimsum;

// Element-wise closeness: the kernels may sum in another order, or fuse
// multiply-adds, than the reference loops.
void require_close(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-12).margin(1e-12));
}

template <class T>
T filled(T t, double scale = 0.37, double offset = -1.3) {
  test::fill_pattern(t, scale, offset);
  return t;
}

TEST_CASE("einsum: matrix product in both spellings, every operand layout", "[einsum]") {
  const std::size_t I = 5, J = 7, K = 3;
  auto A = filled(tensor<double, i, k>(i{I}, k{K}));
  auto At = filled(tensor<double, k, i>(i{I}, k{K}));
  auto B = filled(tensor<double, k, j>(k{K}, j{J}), 0.21, 0.4);
  auto Bt = filled(tensor<double, j, k>(k{K}, j{J}), 0.21, 0.4);
  auto ref = [&](auto a, auto bb) {
    tensor<double, i, j> c(i{I}, j{J});
    for (std::size_t x = 0; x < I; ++x)
      for (std::size_t y = 0; y < J; ++y) {
        double s = 0;
        for (std::size_t z = 0; z < K; ++z) s += a(x, z) * bb(z, y);
        c(i{x}, j{y}) = s;
      }
    return c;
  };
  auto want = ref([&](std::size_t x, std::size_t z) { return A(i{x}, k{z}); },
                  [&](std::size_t z, std::size_t y) { return B(k{z}, j{y}); });
  tensor<double, i, j> c1 = einsum<"i k, k j -> i j">(A, B);
  tensor<double, i, j> c2 = einsum<i, j>(A, B);
  require_close(test::flat(c1), test::flat(want));
  require_close(test::flat(c2), test::flat(want));

  auto wt = ref([&](std::size_t x, std::size_t z) { return At(k{z}, i{x}); },
                [&](std::size_t z, std::size_t y) { return Bt(j{y}, k{z}); });
  tensor<double, i, j> c3 = einsum<"k i, j k -> i j">(At, Bt);
  require_close(test::flat(c3), test::flat(wt));
  // The output in the other order is the transpose.
  tensor<double, j, i> c4 = einsum<"i k, k j -> j i">(A, B);
  for (std::size_t x = 0; x < I; ++x)
    for (std::size_t y = 0; y < J; ++y) CHECK(c4(i{x}, j{y}) == Approx(want(i{x}, j{y})));
}

TEST_CASE("einsum: batch dims, per-head attention scores", "[einsum]") {
  // b q h d, b k h d -> b h q k: inexpressible where repeated names always sum.
  DIMSUM_DIM(q);
  DIMSUM_DIM(kk);
  DIMSUM_DIM(h);
  DIMSUM_DIM(d);
  auto Q = filled(tensor<float, b, q, h, d>(b{2}, q{3}, h{2}, d{4}));
  auto Kt = filled(tensor<float, b, kk, h, d>(b{2}, kk{5}, h{2}, d{4}), 0.11, 0.3);
  tensor<float, b, h, q, kk> s = einsum<"b q h d, b kk h d -> b h q kk">(Q, Kt);
  for (std::size_t x = 0; x < 2; ++x)
    for (std::size_t y = 0; y < 2; ++y)
      for (std::size_t u = 0; u < 3; ++u)
        for (std::size_t v = 0; v < 5; ++v) {
          float want = 0;
          for (std::size_t z = 0; z < 4; ++z) want += Q(b{x}, q{u}, h{y}, d{z}) * Kt(b{x}, kk{v}, h{y}, d{z});
          CHECK(s(b{x}, h{y}, q{u}, kk{v}) == Approx(want).epsilon(1e-6));
        }
}

TEST_CASE("einsum: one operand: permutation, sums, dims summed before the product", "[einsum]") {
  auto A = filled(tensor<double, i, j, k>(i{2}, j{3}, k{4}));
  tensor<double, k, i, j> p = einsum<"i j k -> k i j">(A);
  CHECK(p(k{3}, i{1}, j{2}) == A(i{1}, j{2}, k{3}));
  tensor<double, j> s = einsum<"i j k -> j">(A);
  for (std::size_t y = 0; y < 3; ++y) {
    double want = 0;
    for (std::size_t x = 0; x < 2; ++x)
      for (std::size_t z = 0; z < 4; ++z) want += A(i{x}, j{y}, k{z});
    CHECK(s(j{y}) == Approx(want));
  }
  // r appears in one operand only and not in the output: summed first.
  auto X = filled(tensor<double, i, r>(i{2}, r{3}));
  auto Y = filled(tensor<double, i, j>(i{2}, j{3}), 0.3, 0.1);
  tensor<double, j> t = einsum<"i r, i j -> j">(X, Y);
  for (std::size_t y = 0; y < 3; ++y) {
    double want = 0;
    for (std::size_t x = 0; x < 2; ++x)
      for (std::size_t z = 0; z < 3; ++z) want += X(i{x}, r{z}) * Y(i{x}, j{y});
    CHECK(t(j{y}) == Approx(want));
  }
}

TEST_CASE("einsum: full contraction and three operands", "[einsum]") {
  auto A = filled(tensor<double, i, j>(i{3}, j{4}));
  auto B = filled(tensor<double, i, j>(i{3}, j{4}), 0.5, 0.2);
  auto dot = eval(einsum<"i j, i j -> ">(A, B));
  double want = 0;
  for (std::size_t x = 0; x < 3; ++x)
    for (std::size_t y = 0; y < 4; ++y) want += A(i{x}, j{y}) * B(i{x}, j{y});
  CHECK(dot.item() == Approx(want));

  auto u = filled(tensor<double, i>(i{3}));
  auto M = filled(tensor<double, i, j>(i{3}, j{4}), 0.2, -0.3);
  auto v = filled(tensor<double, j, k>(j{4}, k{2}), 0.7, 0.1);
  tensor<double, k> y3 = einsum<"i, i j, j k -> k">(u, M, v);
  for (std::size_t z = 0; z < 2; ++z) {
    double w = 0;
    for (std::size_t x = 0; x < 3; ++x)
      for (std::size_t y = 0; y < 4; ++y) w += u(i{x}) * M(i{x}, j{y}) * v(j{y}, k{z});
    CHECK(y3(k{z}) == Approx(w));
  }
}

TEST_CASE("einsum: operands may be lazy expressions and renamed views", "[einsum]") {
  auto A = filled(tensor<double, i, k>(i{3}, k{2}));
  auto B = filled(tensor<double, i, k>(i{3}, k{2}), 0.4, 0.3);
  // Gram matrix of A + B against itself, the second copy renamed.
  tensor<double, i, j> g = einsum<"i k, j k -> i j">(A + B, rename<i, j>(A + B));
  for (std::size_t x = 0; x < 3; ++x)
    for (std::size_t y = 0; y < 3; ++y) {
      double w = 0;
      for (std::size_t z = 0; z < 2; ++z) w += (A(i{x}, k{z}) + B(i{x}, k{z})) * (A(i{y}, k{z}) + B(i{y}, k{z}));
      CHECK(g(i{x}, j{y}) == Approx(w));
    }
}

TEST_CASE("einsum: extents of size 1 and 0", "[einsum]") {
  auto A = filled(tensor<float, i, k>(i{1}, k{1}));
  auto B = filled(tensor<float, k, j>(k{1}, j{1}));
  tensor<float, i, j> c = einsum<i, j>(A, B);
  CHECK(c(i{0}, j{0}) == Approx(A(i{0}, k{0}) * B(k{0}, j{0})));
  tensor<float, i, k> E(i{2}, k{0});
  tensor<float, k, j> F(k{0}, j{3});
  tensor<float, i, j> z = einsum<i, j>(E, F);  // empty sum: zeros
  CHECK(test::flat(z) == std::vector<double>(6, 0.0));
}

TEST_CASE("einsum: a dynamic extent mismatch throws naming the dim, operands and extents", "[einsum]") {
  tensor<float, i, k> A(i{2}, k{3});
  tensor<float, k, j> B(k{4}, j{2});
  REQUIRE_THROWS_AS(einsum<"i k, k j -> i j">(A, B), shape_error);
  REQUIRE_THROWS_WITH((einsum<i, j>(A, B)), Catch::Contains("'k'") && Catch::Contains("extent 3") &&
                                              Catch::Contains("operand 0") && Catch::Contains("4 in operand 1"));
}

TEST_CASE("einsum: the packed GEMM path and the loops agree, and the path is visible in the type", "[einsum]") {
  // Two float operands, batch/M/N/K roles: the GEMM kernel.
  DIMSUM_DIM(h);
  auto A = filled(tensor<float, b, i, h, k>(b{3}, i{17}, h{2}, k{33}));
  auto B = filled(tensor<float, b, h, j, k>(b{3}, h{2}, j{9}, k{33}), 0.21, 0.4);
  auto e = einsum<"b i h k, b h j k -> b h i j">(A, B);
  static_assert(decltype(e)::uses_gemm);
  // A third operand, or a dim summed out of one operand alone, is not one
  // GEMM call: pairwise, or pre-reduced first (tested below).
  static_assert(!decltype(einsum<"b i h k, b h j k, b -> b h i j">(A, B, tensor<float, b>{}))::uses_gemm);
  static_assert(!decltype(einsum<"i r, i j -> j">(tensor<float, i, r>{}, tensor<float, i, j>{}))::uses_gemm);
  // Integer operands keep the loops.
  static_assert(!decltype(einsum<"i r, i j -> j">(tensor<int, i, r>{}, tensor<int, i, j>{}))::pre_reduces);
  auto g = eval(e);
  for (std::size_t x = 0; x < 3; ++x)
    for (std::size_t y = 0; y < 2; ++y)
      for (std::size_t u = 0; u < 17; ++u)
        for (std::size_t v = 0; v < 9; ++v) {
          double want = 0;
          for (std::size_t z = 0; z < 33; ++z)
            want += double(A(b{x}, i{u}, h{y}, k{z})) * double(B(b{x}, h{y}, j{v}, k{z}));
          CHECK(g(b{x}, h{y}, i{u}, j{v}) == Approx(want).epsilon(1e-5).margin(1e-5));
        }
}

TEMPLATE_TEST_CASE("einsum: three or more operands contract pairwise, dims of one operand are summed first",
                   "[einsum]", float, double) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  DIMSUM_DIM(h);
  auto u = filled(tensor<T, i>(i{13}));
  auto M = filled(tensor<T, i, j>(i{13}, j{21}), 0.2, -0.3);
  auto v = filled(tensor<T, j, k>(j{21}, k{7}), 0.7, 0.1);
  auto w = filled(tensor<T, k, h>(k{7}, h{5}), 0.11, -0.5);

  // u·M first (one dim left), then with v.
  auto e3 = einsum<"i, i j, j k -> k">(u, M, v);
  static_assert(decltype(e3)::pairwise && !decltype(e3)::uses_gemm);
  static_assert(plan::cheapest_pair<dim_list<k>, dim_list<i>, dim_list<i, j>, dim_list<j, k>>() ==
                std::array<std::size_t, 2>{0, 1});
  // A chain of four: M v first would leave (i, k); v w first leaves (j, h).
  auto e4 = einsum<"i j, j k, k h, i -> h">(M, v, w, u);
  static_assert(decltype(e4)::pairwise);
  auto g3 = eval(e3);
  auto g4 = eval(e4);
  for (std::size_t z = 0; z < 7; ++z) {
    double want = 0;
    for (std::size_t x = 0; x < 13; ++x)
      for (std::size_t y = 0; y < 21; ++y) want += double(u(i{x})) * double(M(i{x}, j{y})) * double(v(j{y}, k{z}));
    CHECK(double(g3(k{z})) == Approx(want).epsilon(tol).margin(tol));
  }
  for (std::size_t a = 0; a < 5; ++a) {
    double want = 0;
    for (std::size_t x = 0; x < 13; ++x)
      for (std::size_t y = 0; y < 21; ++y)
        for (std::size_t z = 0; z < 7; ++z)
          want += double(M(i{x}, j{y})) * double(v(j{y}, k{z})) * double(w(k{z}, h{a})) * double(u(i{x}));
    CHECK(double(g4(h{a})) == Approx(want).epsilon(tol).margin(tol));
  }

  // r appears in X alone and not in the output: X is summed over r first,
  // then the product runs on the GEMM kernel. Batch dims survive.
  auto X = filled(tensor<T, b, i, r>(b{3}, i{13}, r{6}));
  auto Y = filled(tensor<T, b, i, j>(b{3}, i{13}, j{21}), 0.3, 0.1);
  auto e2 = einsum<"b i r, b i j -> b j">(X, Y);
  static_assert(decltype(e2)::pre_reduces && !decltype(e2)::uses_gemm);
  auto g2 = eval(e2);
  for (std::size_t x = 0; x < 3; ++x)
    for (std::size_t y = 0; y < 21; ++y) {
      double want = 0;
      for (std::size_t a = 0; a < 13; ++a)
        for (std::size_t c = 0; c < 6; ++c) want += double(X(b{x}, i{a}, r{c})) * double(Y(b{x}, i{a}, j{y}));
      CHECK(double(g2(b{x}, j{y})) == Approx(want).epsilon(tol).margin(tol));
    }
  // Every dim of one operand summed away: a scalar factor.
  auto e1 = einsum<"r, i j -> j i">(filled(tensor<T, r>(r{4})), M);
  static_assert(decltype(e1)::pre_reduces);
  auto g1 = eval(e1);
  auto rv = filled(tensor<T, r>(r{4}));
  double rs = 0;
  for (std::size_t c = 0; c < 4; ++c) rs += double(rv(r{c}));
  for (std::size_t x = 0; x < 13; ++x)
    for (std::size_t y = 0; y < 21; ++y)
      CHECK(double(g1(j{y}, i{x})) == Approx(rs * double(M(i{x}, j{y}))).epsilon(tol).margin(tol));
}

TEMPLATE_TEST_CASE("einsum: a contraction plus a bias accumulates onto the bias in one pass", "[einsum]", float,
                   double) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  DIMSUM_DIM(h);
  auto X = filled(tensor<T, b, i, k>(b{2}, i{19}, k{23}));
  auto W = filled(tensor<T, h, k, j>(h{3}, k{23}, j{5}), 0.2, -0.4);
  auto bias = filled(tensor<T, h, j>(h{3}, j{5}), 0.5, -1.0);
  auto e = einsum<"b i k, h k j -> b i h j">(X, W) + bias;
  static_assert(decltype(e)::accumulates_bias);
  auto s = einsum<"b i k, h k j -> b i h j">(X, W) + T(2);
  static_assert(decltype(s)::accumulates_bias);
  // The bias first keeps its dims in front: an ordinary element-wise loop.
  static_assert(!decltype(bias + einsum<"b i k, h k j -> b i h j">(X, W))::accumulates_bias);
  tensor<T, b, i, h, j> got = e;
  tensor<T, b, i, h, j> got_s = s;
  // A bias along N in another dim order (added in the GEMM store through its
  // strides), a bias that varies along M (i: written first, then
  // accumulated onto) and one along both.
  tensor<T, j, h> bias_t = filled(tensor<T, j, h>(h{3}, j{5}), 0.3, 0.2);
  auto bias_m = filled(tensor<T, i>(i{19}), 0.7, -2.0);
  auto bias_mn = filled(tensor<T, i, j>(i{19}, j{5}), 0.1, 0.4);
  tensor<T, b, i, h, j> got_t = einsum<"b i k, h k j -> b i h j">(X, W) + bias_t;
  tensor<T, b, i, h, j> got_m = einsum<"b i k, h k j -> b i h j">(X, W) + bias_m;
  tensor<T, b, i, h, j> got_mn = einsum<"b i k, h k j -> b i h j">(X, W) + bias_mn;
  for (std::size_t x = 0; x < 2; ++x)
    for (std::size_t y = 0; y < 19; ++y)
      for (std::size_t z = 0; z < 3; ++z)
        for (std::size_t c = 0; c < 5; ++c) {
          double want = 0;
          for (std::size_t a = 0; a < 23; ++a) want += double(X(b{x}, i{y}, k{a})) * double(W(h{z}, k{a}, j{c}));
          CHECK(double(got(b{x}, i{y}, h{z}, j{c})) == Approx(want + double(bias(h{z}, j{c}))).epsilon(tol).margin(tol));
          CHECK(double(got_s(b{x}, i{y}, h{z}, j{c})) == Approx(want + 2.0).epsilon(tol).margin(tol));
          CHECK(double(got_t(b{x}, i{y}, h{z}, j{c})) ==
                Approx(want + double(bias_t(h{z}, j{c}))).epsilon(tol).margin(tol));
          CHECK(double(got_m(b{x}, i{y}, h{z}, j{c})) == Approx(want + double(bias_m(i{y}))).epsilon(tol).margin(tol));
          CHECK(double(got_mn(b{x}, i{y}, h{z}, j{c})) ==
                Approx(want + double(bias_mn(i{y}, j{c}))).epsilon(tol).margin(tol));
        }
  // A summed dim of extent 0: the bias alone.
  tensor<T, b, i, h, j> only_bias = einsum<"b i k, h k j -> b i h j">(tensor<T, b, i, k>(b{2}, i{19}, k{0}),
                                                                        tensor<T, h, k, j>(h{3}, k{0}, j{5})) +
                                    bias;
  CHECK(double(only_bias(b{1}, i{4}, h{2}, j{3})) == double(bias(h{2}, j{3})));
}
