// ops/pack.hpp: pack and unpack as einops defines them, against
// make_einops_fixtures.py (mixed ranks packed into one dim and back).
#include <catch2/catch.hpp>

#include "einops_fixtures.hpp"
#include "support.hpp"

namespace {
DIMSUM_DIM(b);
DIMSUM_DIM(h);
DIMSUM_DIM(w);
DIMSUM_DIM(c);
DIMSUM_DIM(t);
DIMSUM_DIM(tokens);
}  // namespace

using namespace dimsum;
using einops_fixture::expect_near;
using einops_fixture::load;

TEST_CASE("pack: tensors of ranks 4, 3 and 2 into one dim, and unpack back", "[pack]") {
  const auto img = load<tensor<double, b, h, w, c>>("pack_img");
  const auto txt = load<tensor<double, b, t, c>>("pack_txt");
  const auto cls = load<tensor<double, b, c>>("pack_cls");
  auto [packed, shapes] = pack<"b * c", tokens>(img, txt, cls);
  static_assert(has_dims<decltype(packed), b, tokens, c>);
  CHECK(packed.extent<tokens>() == 2 * 3 + 5 + 1);
  expect_near(packed, load<tensor<double, b, tokens, c>>("pack_out"), 0);
  // The shapes record each tensor's dims (in the type) and extents.
  static_assert(decltype(shapes)::size == 3);
  CHECK(shapes.extents<1>() == txt.extents());
  auto [img2, txt2, cls2] = unpack<"b * c">(packed, shapes);
  static_assert(std::is_same_v<decltype(img2), tensor<double, b, h, w, c>>);
  static_assert(std::is_same_v<decltype(cls2), tensor<double, b, c>>);
  CHECK(test::flat(img2) == test::flat(img));
  CHECK(test::flat(txt2) == test::flat(txt));
  CHECK(test::flat(cls2) == test::flat(cls));
}

TEST_CASE("pack: dims found by name, value types promoted, extents checked", "[pack]") {
  // The labelled dims may sit anywhere; `*` takes the others in order.
  const auto x = tensor<float, c, h, b>::random_normal(1, c{2}, h{3}, b{4});
  const auto y = tensor<double, b, c>::random_normal(2, b{4}, c{2});
  auto [p, s] = pack<"b * c", tokens>(x, y);
  static_assert(std::is_same_v<value_type_of_t<decltype(p)>, double>);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t k = 0; k < 2; ++k) {
      for (std::size_t j = 0; j < 3; ++j) CHECK(p(b{i}, tokens{j}, c{k}) == double(x(c{k}, h{j}, b{i})));
      CHECK(p(b{i}, tokens{3}, c{k}) == y(b{i}, c{k}));
    }
  auto [x2, y2] = unpack<"b * c">(p, s);
  static_assert(has_dims<decltype(x2), c, h, b>);
  CHECK(x2(c{1}, h{2}, b{3}) == double(x(c{1}, h{2}, b{3})));
  // Labelled extents must agree; the packed extent must match the shapes.
  const auto z = tensor<double, b, c>::random_normal(3, b{5}, c{2});
  CHECK_THROWS_WITH((pack<"b * c", tokens>(y, z)), Catch::Contains("'b'") && Catch::Contains("5"));
  auto wrong = tensor<double, b, tokens, c>(b{4}, tokens{5}, c{2});
  CHECK_THROWS_WITH((unpack<"b * c">(wrong, s)), Catch::Contains("'tokens'") && Catch::Contains("4"));
  // Empty extents pack and unpack.
  const auto e = tensor<double, b, h, c>(b{0}, h{2}, c{2});
  auto [pe, se] = pack<"b * c", tokens>(e, tensor<double, b, c>(b{0}, c{2}));
  CHECK(pe.extents() == std::array<std::size_t, 3>{0, 3, 2});
  auto [e2, f2] = unpack<"b * c">(pe, se);
  CHECK(e2.extents() == e.extents());
  CHECK(f2.size() == 0);
}
