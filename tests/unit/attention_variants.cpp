// Attention variants written as dimsum expressions, against PyTorch 1.13
// written the way its users write them (tests/reference/make_variant_fixtures.py,
// float64): a sliding-window causal mask, ALiBi biases (the paper's slopes),
// grouped-query and multi-query attention (keys and values shared by a
// group of query heads, where PyTorch repeats them per head).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include <dimsum/dimsum.hpp>
#include <dimsum/grad/grad.hpp>
#include <dimsum/grad/rules/window_mask.hpp>
#include <dimsum/ops/alibi.hpp>
#include <dimsum/ops/window_mask.hpp>

using dimsum::tensor;

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(nheads);
DIMSUM_DIM(kv_heads);
DIMSUM_DIM(group);
DIMSUM_DIM(d_head);

constexpr double inf = std::numeric_limits<double>::infinity();

template <class TT>
TT load(const std::string& name) {
  return dimsum::load_npy<TT>(std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/variants/" + name + ".npy");
}
using q_t = tensor<double, batch, q_posn, nheads, d_head>;
using k_t = tensor<double, batch, k_posn, nheads, d_head>;
using kv_t = tensor<double, batch, k_posn, kv_heads, d_head>;

template <class Got, class Want>
void expect_near(const Got& got, const Want& want, double tol = 1e-12) {
  REQUIRE(got.extents() == want.extents());
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got.data()[i] - want.data()[i]));
  INFO("worst abs error " << worst);
  CHECK(worst <= tol);
}

// softmax(scores) V for scores (batch, nheads, q_posn, k_posn).
template <class S>
q_t weighted_values(S&& scores, const k_t& v) {
  return dimsum::einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
      dimsum::softmax<k_posn>(std::forward<S>(scores)), v);
}
template <class Q, class K>
auto scaled_scores(const Q& q, const K& k) {
  const double scale = 1.0 / std::sqrt(double(q.template extent<d_head>()));
  return dimsum::eval(
      dimsum::einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k) * scale);
}
}  // namespace

TEST_CASE("sliding-window attention matches PyTorch's masked_fill form", "[variants][window]") {
  const auto q = load<q_t>("window_q");
  const auto k = load<k_t>("window_k");
  const auto v = load<k_t>("window_v");
  const q_t out = weighted_values(dimsum::window_mask<q_posn, k_posn>(scaled_scores(q, k), 4, -inf), v);
  expect_near(out, load<q_t>("window_out"));
}

TEST_CASE("window_mask: which keys each query keeps, offsets and errors", "[variants][window]") {
  tensor<int, q_posn, k_posn> ones(q_posn{4}, k_posn{7});
  ones.fill(1);
  SECTION("window 2, no offset: itself and the key before") {
    const tensor<int, q_posn, k_posn> m = dimsum::window_mask<q_posn, k_posn>(ones, 2, 0);
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 7; ++j) CHECK(m(q_posn{i}, k_posn{j}) == ((j <= i && i - j < 2) ? 1 : 0));
  }
  SECTION("offset 3: queries at positions 3..6 after three cached keys, key-major order") {
    const tensor<int, k_posn, q_posn> m = dimsum::window_mask<q_posn, k_posn>(ones, 3, -1, 3);
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 7; ++j)
        CHECK(m(q_posn{i}, k_posn{j}) == ((j <= i + 3 && i + 3 - j < 3) ? 1 : -1));
  }
  SECTION("a window as wide as the keys is the causal mask") {
    const tensor<int, q_posn, k_posn> w = dimsum::window_mask<q_posn, k_posn>(ones, 7, 0);
    const tensor<int, q_posn, k_posn> c = dimsum::causal_mask<q_posn, k_posn>(ones, 0);
    CHECK(w.storage() == c.storage());
  }
  auto empty_window = [&] { return dimsum::window_mask<q_posn, k_posn>(ones, 0, 0); };
  CHECK_THROWS_AS(empty_window(), dimsum::shape_error);
  SECTION("an offset whose query positions pass SIZE_MAX is refused; the largest that fits masks every key") {
    constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
    // Positions max - 4 .. max - 1 for the 4 queries: every key (0..6) lies
    // more than the window before them.
    const tensor<int, q_posn, k_posn> m = dimsum::window_mask<q_posn, k_posn>(ones, 2, -1, max - 4);
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 7; ++j) CHECK(m(q_posn{i}, k_posn{j}) == -1);
    for (std::size_t offset : {max - 3, max - 1, max}) {
      auto wraps = [&] { return dimsum::window_mask<q_posn, k_posn>(ones, 2, -1, offset); };
      CHECK_THROWS_AS(wraps(), dimsum::shape_error);
      CHECK_THROWS_WITH(wraps(), Catch::Contains("offset " + std::to_string(offset)) &&
                                     Catch::Contains("4 query positions exceeds the largest position"));
    }
  }
}

TEST_CASE("window_mask's gradient passes through the kept scores only", "[variants][window][grad]") {
  // d/dx sum(window_mask(x) * r) is r where kept, 0 where masked: by hand.
  dimsum::parameter<double, q_posn, k_posn> x(tensor<double, q_posn, k_posn>::random_normal(3, q_posn{5}, k_posn{6}));
  const auto r = tensor<double, q_posn, k_posn>::random_normal(4, q_posn{5}, k_posn{6});
  {
    dimsum::grad::tape t;
    auto y = dimsum::window_mask<q_posn, k_posn>(t.watch(x), 3, -1e9, 1);
    t.backward(dimsum::einsum<>(y * r));
  }
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 6; ++j) {
      const bool kept = j <= i + 1 && i + 1 - j < 3;
      CHECK(x.grad(q_posn{i}, k_posn{j}) == (kept ? r(q_posn{i}, k_posn{j}) : 0.0));
    }
}

TEST_CASE("alibi_slopes are the paper's, for a power of two and not", "[variants][alibi]") {
  expect_near(dimsum::alibi_slopes<double>(nheads{8}), load<tensor<double, nheads>>("alibi_slopes_8"), 1e-15);
  expect_near(dimsum::alibi_slopes<double>(nheads{6}), load<tensor<double, nheads>>("alibi_slopes_6"), 1e-15);
  CHECK(dimsum::alibi_slopes<float>(nheads{0}).size() == 0);
}

TEST_CASE("ALiBi attention: slope times distance as an expression by name", "[variants][alibi]") {
  const auto q = load<q_t>("alibi_q");
  const auto k = load<k_t>("alibi_k");
  const auto v = load<k_t>("alibi_v");
  const auto slopes = dimsum::alibi_slopes<double>(nheads{6});
  const auto distance = dimsum::relative_positions<double>(q_posn{9}, k_posn{9});
  CHECK(distance(q_posn{5}, k_posn{2}) == -3.0);
  CHECK(dimsum::relative_positions<double>(q_posn{2}, k_posn{6}, 4)(q_posn{1}, k_posn{0}) == -5.0);
  // Query positions offset + i past SIZE_MAX would wrap into small ones.
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  CHECK(dimsum::relative_positions<double>(q_posn{2}, k_posn{6}, max - 2)(q_posn{1}, k_posn{0}) == -double(max - 1));
  CHECK_THROWS_WITH(dimsum::relative_positions<double>(q_posn{2}, k_posn{6}, max - 1),
                    Catch::Contains("offset " + std::to_string(max - 1)) &&
                        Catch::Contains("2 query positions exceeds the largest position"));
  CHECK_THROWS_AS(dimsum::alibi<double>(nheads{2}, q_posn{2}, k_posn{6}, max), dimsum::shape_error);
  // read by name past an extent: shape_error, as a tensor's element access
  CHECK_THROWS_AS(distance(q_posn{9}, k_posn{0}), dimsum::shape_error);
  CHECK_THROWS_WITH(distance(k_posn{12}, q_posn{0}), Catch::Contains("index 12 is out of range for dim 'k_posn' of extent 9"));
  const q_t out = weighted_values(
      dimsum::causal_mask<q_posn, k_posn>(scaled_scores(q, k) + dimsum::outer(slopes, distance), -inf), v);
  expect_near(out, load<q_t>("alibi_out"));
}

namespace {
// Grouped-query attention by name: the query heads split as
// (kv_heads group); keys and values keep kv_heads and are read once per
// group by the contraction, never repeated.
q_t grouped_query_attention(const q_t& q, const kv_t& k, const kv_t& v) {
  const std::size_t nkv = k.extent<kv_heads>();
  const auto qg = dimsum::rearrange<"batch q_posn (kv_heads group) d_head -> batch q_posn kv_heads group d_head">(
      q, kv_heads{nkv});
  const double scale = 1.0 / std::sqrt(double(q.extent<d_head>()));
  const auto scores = dimsum::einsum<
      "batch q_posn kv_heads group d_head, batch k_posn kv_heads d_head -> batch kv_heads group q_posn k_posn">(qg, k);
  const auto probs = dimsum::eval(dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(scores * scale, -inf)));
  const tensor<double, batch, q_posn, kv_heads, group, d_head> out = dimsum::einsum<
      "batch kv_heads group q_posn k_posn, batch k_posn kv_heads d_head -> batch q_posn kv_heads group d_head">(probs, v);
  return dimsum::rearrange<"batch q_posn kv_heads group d_head -> batch q_posn nheads(kv_heads group) d_head">(out);
}
}  // namespace

TEST_CASE("grouped-query attention matches PyTorch's repeat_interleave form", "[variants][gqa]") {
  expect_near(grouped_query_attention(load<q_t>("gqa_q"), load<kv_t>("gqa_k"), load<kv_t>("gqa_v")),
              load<q_t>("gqa_out"));
}

TEST_CASE("multi-query attention (one key/value head) matches PyTorch", "[variants][gqa]") {
  expect_near(grouped_query_attention(load<q_t>("mqa_q"), load<kv_t>("mqa_k"), load<kv_t>("mqa_v")),
              load<q_t>("mqa_out"));
}
