// nn pieces not covered by the golden tests: linear's shape rule and
// initialisation, dropout's semantics, embedding of any id shape.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <utility>

#include <dimsum/nn/nn.hpp>
#include <dimsum/nn/seeds/seeds.hpp>

#include "support.hpp"

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(d_in);
DIMSUM_DIM(d_out);
DIMSUM_DIM(vocab);
DIMSUM_DIM(emb);
}  // namespace

using namespace dimsum;

TEST_CASE("nn::linear: y = x W^T + b, In replaced by Out in place", "[nn]") {
  nn::linear<double, d_in, d_out> lin(d_in{3}, d_out{2});
  lin.reset_parameters(5);
  const double bound = 1.0 / std::sqrt(3.0);
  for (std::size_t i = 0; i < lin.weight.value.size(); ++i) CHECK(std::abs(lin.weight.value.data()[i]) <= bound);
  tensor<double, batch, d_in, posn> x(batch{2}, d_in{3}, posn{4});
  test::fill_pattern(x);
  auto y = lin(x);
  static_assert(has_dims<decltype(y), batch, d_out, posn>);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t o = 0; o < 2; ++o)
      for (std::size_t p = 0; p < 4; ++p) {
        double want = lin.bias->value(d_out{o});
        for (std::size_t i = 0; i < 3; ++i) want += x(batch{b}, d_in{i}, posn{p}) * lin.weight.value(d_out{o}, d_in{i});
        CHECK(y(batch{b}, d_out{o}, posn{p}) == Approx(want));
      }
  nn::linear<double, d_in, d_out> no_bias(d_in{3}, d_out{2}, false);
  no_bias.weight.value = lin.weight.value;
  auto y0 = no_bias(x);
  CHECK(y0(batch{1}, d_out{1}, posn{3}) == Approx(y(batch{1}, d_out{1}, posn{3}) - lin.bias->value(d_out{1})));
}

TEST_CASE("nn::dropout: identity at p = 0 and in inference, seeded masks in training", "[nn]") {
  tensor<float, batch, posn> x(batch{50}, posn{40});
  x.fill(2.0f);
  nn::dropout off(0.5, false);
  CHECK(test::flat(off(x)) == test::flat(x));
  nn::dropout zero(0.0, true);
  CHECK(test::flat(zero(x)) == test::flat(x));
  nn::dropout a(0.25, true, 7), b(0.25, true, 7);
  auto ya = a(x), yb = b(x);
  CHECK(test::flat(ya) == test::flat(yb));  // same seed, same mask
  std::size_t zeros = 0;
  for (double v : test::flat(ya)) {
    CHECK((v == 0.0 || v == Approx(2.0 / 0.75)));
    zeros += v == 0.0;
  }
  CHECK(std::abs(double(zeros) / 2000.0 - 0.25) < 0.04);
  CHECK(test::flat(a(x)) != test::flat(ya));  // the next call draws a new mask
  REQUIRE_THROWS_AS(nn::dropout(1.0), dimsum::error);
  REQUIRE_THROWS_AS(nn::dropout(-0.1), dimsum::error);
}

TEST_CASE("nn::embedding: any id shape gathers rows", "[nn]") {
  nn::embedding<float, vocab, emb> table(vocab{10}, emb{3});
  table.reset_parameters(2);
  tensor<std::int32_t, batch, posn> ids(batch{2}, posn{2});
  ids(batch{0}, posn{0}) = 9;
  ids(batch{1}, posn{1}) = 4;
  auto e = table(ids);
  static_assert(has_dims<decltype(e), batch, posn, emb>);
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK(e(batch{0}, posn{0}, emb{k}) == table.weight.value(vocab{9}, emb{k}));
    CHECK(e(batch{1}, posn{1}, emb{k}) == table.weight.value(vocab{4}, emb{k}));
    CHECK(e(batch{0}, posn{1}, emb{k}) == table.weight.value(vocab{0}, emb{k}));
  }
}

TEST_CASE("nn::embedding: ids given as a view or an expression, as torch's wte(idx[:, -n:])", "[nn]") {
  nn::embedding<float, vocab, emb> table(vocab{10}, emb{3});
  table.reset_parameters(2);
  tensor<std::int64_t, batch, posn> ids(batch{2}, posn{5});
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t p = 0; p < 5; ++p) ids(batch{b}, posn{p}) = std::int64_t(3 * b + p);
  const auto last = table(slice<posn>(ids, 2, 5));  // a strided view: posn 2, 3, 4
  static_assert(std::is_same_v<decltype(last), const tensor<float, batch, posn, emb>>);
  REQUIRE(last.extent<posn>() == 3);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t p = 0; p < 3; ++p)
      for (std::size_t k = 0; k < 3; ++k)
        CHECK(last(batch{b}, posn{p}, emb{k}) == table.weight.value(vocab{3 * b + p + 2}, emb{k}));
  CHECK_THROWS_AS(table(slice<posn>(ids, 0, 5) + std::int64_t(6)), shape_error);  // id 4 + 6 = 10 is past vocab
  grad::tape t;
  auto v = table(t, select<batch>(ids, 1));  // ids 3..7 of batch 1, on a tape
  static_assert(std::is_same_v<decltype(v), grad::var<float, posn, emb>>);
  CHECK(v.value()(posn{4}, emb{2}) == table.weight.value(vocab{7}, emb{2}));
}

TEST_CASE("nn::multi_head_attention: zero heads is an error, a null trace pointer is no trace", "[nn]") {
  DIMSUM_DIM(heads);
  DIMSUM_DIM(dk);
  DIMSUM_DIM(q_posn);
  DIMSUM_DIM(k_posn);
  using mha_t = nn::multi_head_attention<float, emb, heads, dk>;
  REQUIRE_THROWS_WITH(mha_t(heads{0}, emb{4}), Catch::Contains("'heads' has extent 0"));
  mha_t m(heads{2}, emb{4}, dk{2}, 0.0);
  m.reset_parameters(3);
  tensor<float, batch, q_posn, emb> q(batch{1}, q_posn{3}, emb{4});
  test::fill_pattern(q);
  auto kv = rename<q_posn, k_posn>(q);
  mha_t::trace<batch, q_posn, k_posn>* none = nullptr;
  auto a = m(q, kv, kv, nn::no_mask{}, none);
  auto b = m(q, kv, kv);
  CHECK(test::flat(a.output) == test::flat(b.output));
}

TEST_CASE("nn attention masks are bool: a numeric mask is refused, not read as mask != 0", "[nn]") {
  DIMSUM_DIM(q_posn);
  DIMSUM_DIM(k_posn);
  // What dot_product_attention and multi_head_attention accept as a mask;
  // a float or integer mask is a compile error there (masked_fill's
  // masked_fill_mask_is_not_boolean), since PyTorch's float masks are
  // additive (0 = attend) and `!mask` would invert them silently.
  using keep_t = tensor<bool, batch, k_posn>;
  STATIC_REQUIRE(nn::detail::mask_is_bool<nn::no_mask>());
  STATIC_REQUIRE(nn::detail::mask_is_bool<keep_t>());
  STATIC_REQUIRE(nn::detail::mask_is_bool<decltype(!std::declval<const keep_t&>())>());
  STATIC_REQUIRE(nn::detail::mask_is_bool<tensor_view<const bool, batch, k_posn>>());
  STATIC_REQUIRE(!nn::detail::mask_is_bool<tensor<float, batch, k_posn>>());
  STATIC_REQUIRE(!nn::detail::mask_is_bool<tensor<std::int64_t, batch, q_posn, k_posn>>());
  STATIC_REQUIRE(!nn::detail::mask_is_bool<decltype(std::declval<const tensor<float, batch, k_posn>&>() * 2.0f)>());
}

TEST_CASE("nn::seeds::char_tokenizer: errors name the character or id", "[nn]") {
  auto tok = nn::seeds::char_tokenizer::python_printable();
  REQUIRE_THROWS_WITH(tok.encode<posn>("a\xc3"), Catch::Contains("'\\xc3' at 1"));
  tensor<std::int64_t, posn> ids(posn{1});
  ids.data()[0] = 100;
  REQUIRE_THROWS_WITH(tok.decode(ids), Catch::Contains("id 100") && Catch::Contains("vocabulary of 100"));
}

TEST_CASE("nn::linear: an empty input dim leaves zero parameters", "[nn]") {
  nn::linear<float, d_in, d_out> lin(d_in{0}, d_out{2});
  lin.reset_parameters(1);
  for (std::size_t i = 0; i < lin.bias->value.size(); ++i) CHECK(lin.bias->value.data()[i] == 0.0f);
}
