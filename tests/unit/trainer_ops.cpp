// The example-local operations of examples/train_char_transformer.cpp
// (examples/char_transformer_ops.hpp: embedding, layer_norm, gelu,
// cross_entropy) against central finite differences in double
// (grad_check.hpp, the grad tests' checker), and their forward values
// against plain loops written here from the definitions.
#include "grad_check.hpp"

#include <cmath>
#include <cstdint>

#include "../../examples/char_transformer_ops.hpp"

using dimsum::parameter;
using dimsum::tensor;
using grad_check::check;
using grad_check::random_parameter;
namespace grad = dimsum::grad;

namespace {
DIMSUM_DIM(vocab);
DIMSUM_DIM(emb);
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);

// A loss that sees every element with a different weight: sum(v * (v + 0.5)).
template <class V>
auto loss_of(const V& v) {
  return dimsum::einsum<>(v * (v + 0.5));
}

tensor<std::int64_t, batch, posn> ids_of(std::initializer_list<std::int64_t> ids, std::size_t b, std::size_t p) {
  tensor<std::int64_t, batch, posn> t(batch{b}, posn{p});
  std::size_t i = 0;
  for (auto id : ids) t.data()[i++] = id;
  return t;
}
}  // namespace

TEST_CASE("trainer embedding: rows gathered, gradient scattered and summed over repeated ids", "[trainer]") {
  auto table = random_parameter<parameter<double, vocab, emb>>(1, 1.0, vocab{5}, emb{3});
  const auto ids = ids_of({2, 0, 2, 4, 2, 0}, 2, 3);  // id 2 three times, 0 twice, 1 and 3 never
  {
    grad::tape t;
    auto out = char_lm::embedding(t.watch(table), ids);
    static_assert(std::is_same_v<decltype(out), grad::var<double, batch, posn, emb>>);
    for (std::size_t n = 0; n < 6; ++n)
      for (std::size_t j = 0; j < 3; ++j)
        CHECK(out.value().data()[n * 3 + j] == table.value.data()[std::size_t(ids.data()[n]) * 3 + j]);
  }
  check([&](grad::tape&, auto w) { return loss_of(char_lm::embedding(w, ids)); }, table);
  // Rows of ids never used get no gradient.
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK(table.grad(vocab{1}, emb{j}) == 0.0);
    CHECK(table.grad(vocab{3}, emb{j}) == 0.0);
  }
}

TEST_CASE("trainer embedding: an id out of range is a shape_error", "[trainer]") {
  auto table = random_parameter<parameter<double, vocab, emb>>(2, 1.0, vocab{5}, emb{3});
  grad::tape t;
  CHECK_THROWS_AS(char_lm::embedding(t.watch(table), ids_of({0, 5}, 1, 2)), dimsum::shape_error);
  CHECK_THROWS_AS(char_lm::embedding(t.watch(table), ids_of({-1, 0}, 1, 2)), dimsum::shape_error);
}

TEST_CASE("trainer layer_norm: forward as the definition, gradients of x, weight and bias", "[trainer]") {
  auto x = random_parameter<parameter<double, batch, posn, emb>>(3, 2.0, batch{2}, posn{3}, emb{5});
  auto w = random_parameter<parameter<double, emb>>(4, 1.0, emb{5});
  auto b = random_parameter<parameter<double, emb>>(5, 1.0, emb{5});
  {
    grad::tape t;
    auto y = char_lm::layer_norm<emb>(t.watch(x), t.watch(w), t.watch(b), 1e-5);
    for (std::size_t r = 0; r < 6; ++r) {
      const double* xr = x.value.data() + r * 5;
      double m = 0, v = 0;
      for (int j = 0; j < 5; ++j) m += xr[j] / 5;
      for (int j = 0; j < 5; ++j) v += (xr[j] - m) * (xr[j] - m) / 5;
      for (int j = 0; j < 5; ++j)
        CHECK(y.value().data()[r * 5 + j] ==
              Approx((xr[j] - m) / std::sqrt(v + 1e-5) * w.value.data()[j] + b.value.data()[j]).epsilon(1e-12));
    }
  }
  check([](grad::tape&, auto x, auto w, auto b) { return loss_of(char_lm::layer_norm<emb>(x, w, b, 1e-5)); }, x, w, b);
}

TEST_CASE("trainer gelu: the erf form and its derivative, also around 0 and in the tails", "[trainer]") {
  auto x = random_parameter<parameter<double, batch, emb>>(6, 2.0, batch{3}, emb{4});
  x.value.data()[0] = 0.0;
  x.value.data()[1] = -6.0;
  x.value.data()[2] = 6.0;
  {
    grad::tape t;
    auto y = char_lm::gelu(t.watch(x));
    for (std::size_t i = 0; i < 12; ++i) {
      const double v = x.value.data()[i];
      CHECK(y.value().data()[i] == Approx(0.5 * v * std::erfc(-v / std::sqrt(2.0))).epsilon(1e-12).margin(1e-15));
    }
  }
  check([](grad::tape&, auto x) { return loss_of(char_lm::gelu(x)); }, x);
}

TEST_CASE("trainer cross_entropy: mean of -log softmax at the target, gradient (p - onehot) / n", "[trainer]") {
  auto logits = random_parameter<parameter<double, batch, posn, vocab>>(7, 3.0, batch{2}, posn{3}, vocab{4});
  const auto targets = ids_of({0, 3, 3, 1, 2, 0}, 2, 3);
  {
    grad::tape t;
    auto loss = char_lm::cross_entropy<vocab>(t.watch(logits), targets);
    static_assert(std::is_same_v<decltype(loss), grad::var<double>>);
    double expected = 0;
    for (std::size_t r = 0; r < 6; ++r) {
      const double* l = logits.value.data() + r * 4;
      double z = 0;
      for (int j = 0; j < 4; ++j) z += std::exp(l[j]);
      expected += (std::log(z) - l[targets.data()[r]]) / 6;
    }
    CHECK(loss.item() == Approx(expected).epsilon(1e-12));
  }
  check([&](grad::tape&, auto l) { return char_lm::cross_entropy<vocab>(l, targets); }, logits);
  // Uniform logits: the loss is ln(vocab), the baseline the example checks at initialisation.
  auto flat = parameter<double, batch, posn, vocab>(batch{2}, posn{3}, vocab{4});
  grad::tape t;
  CHECK(char_lm::cross_entropy<vocab>(t.watch(flat), targets).item() == Approx(std::log(4.0)).epsilon(1e-14));
}

TEST_CASE("trainer cross_entropy: a target out of range or targets of other extents are shape_errors", "[trainer]") {
  auto logits = random_parameter<parameter<double, batch, posn, vocab>>(8, 1.0, batch{1}, posn{2}, vocab{4});
  grad::tape t;
  auto l = t.watch(logits);
  CHECK_THROWS_AS(char_lm::cross_entropy<vocab>(l, ids_of({0, 4}, 1, 2)), dimsum::shape_error);
  CHECK_THROWS_AS(char_lm::cross_entropy<vocab>(l, ids_of({0, 1}, 2, 1)), dimsum::shape_error);
}

TEST_CASE("trainer ops compose: layer_norm -> gelu -> einsum -> cross_entropy through one tape", "[trainer]") {
  auto table = random_parameter<parameter<double, vocab, emb>>(9, 1.0, vocab{4}, emb{3});
  auto w = random_parameter<parameter<double, emb>>(10, 1.0, emb{3});
  auto b = random_parameter<parameter<double, emb>>(11, 0.5, emb{3});
  auto u = random_parameter<parameter<double, emb, vocab>>(12, 1.0, emb{3}, vocab{4});
  const auto ids = ids_of({1, 1, 3, 0}, 2, 2);
  const auto targets = ids_of({1, 3, 0, 0}, 2, 2);
  check(
      [&](grad::tape&, auto table, auto w, auto b, auto u) {
        auto h = char_lm::gelu(char_lm::layer_norm<emb>(char_lm::embedding(table, ids), w, b));
        return char_lm::cross_entropy<vocab>(dimsum::einsum<"batch posn emb, emb vocab -> batch posn vocab">(h, u),
                                             targets);
      },
      table, w, b, u);
}
