// Rotary position embeddings (ops/rope.hpp, grad/rules/rope.hpp) against
// PyTorch: tests/reference/make_variant_fixtures.py writes each convention
// as the code base that defines it (Hugging Face's rotate_half for
// half_split, Meta's complex multiply for interleaved), in float64, with
// the gradient of sum(out * r). Also central finite differences and the
// property that makes RoPE a relative position code.
#include "grad_check.hpp"

#include <cmath>
#include <string>

#include <dimsum/grad/rules/rope.hpp>
#include <dimsum/io/npy.hpp>
#include <dimsum/ops/rope.hpp>

using dimsum::parameter;
using dimsum::rope_pairs;
using dimsum::tensor;
namespace grad = dimsum::grad;

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);

using T4 = tensor<double, batch, posn, nheads, d_head>;

T4 load(const std::string& name) {
  return dimsum::load_npy<T4>(std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/variants/" + name + ".npy");
}

template <class Got>
void expect_near(const Got& got, const T4& want, double tol) {
  REQUIRE(got.extents() == want.extents());
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(double(got.data()[i]) - want.data()[i]));
  INFO("worst abs error " << worst);
  CHECK(worst <= tol);
}

void torch_case(const std::string& name, rope_pairs pairs, double base, std::size_t offset) {
  const T4 x = load(name + "_x");
  SECTION("forward, double") { expect_near(dimsum::rope<posn, d_head>(x, pairs, base, offset), load(name + "_y"), 1e-12); }
  SECTION("forward, float") {
    const tensor<float, batch, posn, nheads, d_head> xf = dimsum::cast<float>(x);
    expect_near(dimsum::rope<posn, d_head>(xf, pairs, base, offset), load(name + "_y"), 1e-5);
  }
  SECTION("a lazy operand and another dim order") {
    // The same rotation reached from (d_head, nheads, posn, batch) order:
    // rope finds its dims by name.
    const tensor<double, d_head, nheads, posn, batch> xt = x;
    const T4 got = dimsum::rope<posn, d_head>(xt * 1.0, pairs, base, offset);
    expect_near(got, load(name + "_y"), 1e-12);
  }
  SECTION("gradient") {
    parameter<double, batch, posn, nheads, d_head> p(x);
    const T4 r = load(name + "_r");
    {
      grad::tape t;
      auto y = dimsum::rope<posn, d_head>(t.watch(p), pairs, base, offset);
      t.backward(dimsum::einsum<>(y * r));
    }
    expect_near(p.grad, load(name + "_grad_x"), 1e-12);
  }
}
}  // namespace

TEST_CASE("rope half_split matches Hugging Face's rotate_half", "[rope][torch]") {
  torch_case("rope_half_split", rope_pairs::half_split, 10000.0, 0);
}
TEST_CASE("rope interleaved matches Meta's complex form", "[rope][torch]") {
  torch_case("rope_interleaved", rope_pairs::interleaved, 10000.0, 0);
}
TEST_CASE("rope half_split with a position offset and another base", "[rope][torch]") {
  torch_case("rope_half_split_offset", rope_pairs::half_split, 500.0, 7);
}
TEST_CASE("rope interleaved with a position offset and another base", "[rope][torch]") {
  torch_case("rope_interleaved_offset", rope_pairs::interleaved, 500.0, 7);
}

TEST_CASE("rope's gradient against central finite differences", "[rope][grad]") {
  for (rope_pairs pairs : {rope_pairs::interleaved, rope_pairs::half_split}) {
    auto x = grad_check::random_parameter<parameter<double, posn, nheads, d_head>>(7, 1.0, posn{4}, nheads{2},
                                                                                    d_head{6});
    grad_check::check([&](grad::tape&, auto v) { return grad_check::loss_of(dimsum::rope<posn, d_head>(v, pairs, 100.0, 2)); },
                      x);
  }
}

TEST_CASE("rope scores depend on the relative position only", "[rope]") {
  // q at position i and k at position j: rope(q)·rope(k) is a function of
  // i - j. Rotate one q and one k at every position and compare shifts.
  const auto q = tensor<double, posn, d_head>::random_normal(1, posn{9}, d_head{10});
  const auto k = tensor<double, posn, d_head>::random_normal(2, posn{9}, d_head{10});
  for (rope_pairs pairs : {rope_pairs::interleaved, rope_pairs::half_split}) {
    // Every row of q and of k holds the same vector: row 0 repeated.
    tensor<double, posn, d_head> qs(posn{9}, d_head{10}), ks(posn{9}, d_head{10});
    for (std::size_t p = 0; p < 9; ++p)
      for (std::size_t f = 0; f < 10; ++f) {
        qs(posn{p}, d_head{f}) = q(posn{0}, d_head{f});
        ks(posn{p}, d_head{f}) = k(posn{0}, d_head{f});
      }
    const auto qr = dimsum::rope<posn, d_head>(qs, pairs);
    const auto kr = dimsum::rope<posn, d_head>(ks, pairs);
    auto dot = [&](std::size_t i, std::size_t j) {
      double s = 0;
      for (std::size_t f = 0; f < 10; ++f) s += qr(posn{i}, d_head{f}) * kr(posn{j}, d_head{f});
      return s;
    };
    CHECK(std::abs(dot(5, 2) - dot(3, 0)) < 1e-12);
    CHECK(std::abs(dot(8, 8) - dot(0, 0)) < 1e-12);
    CHECK(std::abs(dot(1, 4) - dot(4, 7)) < 1e-12);
    CHECK(std::abs(dot(5, 2) - dot(2, 5)) > 1e-6);  // not symmetric: the sign of i - j matters
  }
}

TEST_CASE("rope refuses an odd feature extent and a bad base", "[rope][errors]") {
  const tensor<double, posn, d_head> odd(posn{3}, d_head{5});
  auto rope_odd = [&] { return dimsum::rope<posn, d_head>(odd, rope_pairs::half_split); };
  CHECK_THROWS_AS(rope_odd(), dimsum::shape_error);
  CHECK_THROWS_WITH(rope_odd(), Catch::Contains("d_head"));
  const tensor<double, posn, d_head> even(posn{3}, d_head{4});
  auto rope_base0 = [&] { return dimsum::rope<posn, d_head>(even, rope_pairs::half_split, 0.0); };
  CHECK_THROWS_AS(rope_base0(), dimsum::error);
  const tensor<double, posn, d_head> empty(posn{0}, d_head{4});
  CHECK(dimsum::rope<posn, d_head>(empty, rope_pairs::interleaved).size() == 0);
}
