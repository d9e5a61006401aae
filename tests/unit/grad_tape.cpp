// grad/tape.hpp: the tape, vars, watched parameters, typed gradients,
// accumulation across backward passes, zero_grad, and the run-time misuses.
#include "grad_check.hpp"

#include <memory>
#include <type_traits>
#include <vector>

using dimsum::parameter;
using dimsum::tensor;
namespace grad = dimsum::grad;

namespace {
DIMSUM_DIM(row);
DIMSUM_DIM(col);
DIMSUM_DIM(out);

using w_t = parameter<double, col, out>;
using x_t = tensor<double, row, col>;

x_t make_x() {
  x_t x(row{2}, col{3});
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t c = 0; c < 3; ++c) x(row{r}, col{c}) = double(r + 1) * 0.5 + double(c);
  return x;
}
w_t make_w() {
  tensor<double, col, out> w(col{3}, out{2});
  for (std::size_t c = 0; c < 3; ++c)
    for (std::size_t o = 0; o < 2; ++o) w(col{c}, out{o}) = 0.1 * double(c) - 0.2 * double(o) + 0.3;
  return w_t(w);
}
}  // namespace

TEST_CASE("grad tape: a gradient has exactly its parameter's dims", "[grad][tape]") {
  w_t w = make_w();
  static_assert(std::is_same_v<decltype(w.grad), tensor<double, col, out>>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(dimsum::gradient(w))>, tensor<double, col, out>>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(dimsum::gradient<col, out>(w))>, tensor<double, col, out>>);
  grad::tape t;
  auto v = t.watch(w);
  static_assert(std::is_same_v<decltype(v), grad::var<double, col, out>>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(dimsum::gradient(v))>, tensor<double, col, out>>);
  CHECK(t.size() == 1);
}

TEST_CASE("grad tape: d/dW sum((x W)^2) = 2 x^T (x W), accumulated into W.grad", "[grad][tape]") {
  w_t w = make_w();
  const x_t x = make_x();
  grad::tape t;
  auto y = dimsum::einsum<"row col, col out -> row out">(x, t.watch(w));
  static_assert(std::is_same_v<decltype(y), grad::var<double, row, out>>);
  auto loss = dimsum::sum<row, out>(y * y);
  static_assert(std::is_same_v<decltype(loss), grad::var<double>>);
  t.backward(loss);
  // By hand: y = x W, dL/dW[c, o] = sum_r 2 y[r, o] x[r, c], with plain loops.
  for (std::size_t c = 0; c < 3; ++c)
    for (std::size_t o = 0; o < 2; ++o) {
      double want = 0;
      for (std::size_t r = 0; r < 2; ++r) {
        double yro = 0;
        for (std::size_t k = 0; k < 3; ++k) yro += x(row{r}, col{k}) * w.value(col{k}, out{o});
        want += 2 * yro * x(row{r}, col{c});
      }
      CHECK(w.grad(col{c}, out{o}) == Approx(want).epsilon(1e-12));
    }
}

TEST_CASE("grad tape: gradients accumulate over passes until zero_grad (PyTorch semantics)", "[grad][tape]") {
  w_t w = make_w();
  const x_t x = make_x();
  auto pass = [&] {
    grad::tape t;
    t.backward(dimsum::sum<row, out>(dimsum::einsum<"row col, col out -> row out">(x, t.watch(w))));
  };
  pass();
  const tensor<double, col, out> once = w.grad;
  // d/dW[c, o] sum_{r, o} (x W)[r, o] = sum_r x[r, c].
  for (std::size_t c = 0; c < 3; ++c)
    for (std::size_t o = 0; o < 2; ++o) CHECK(once(col{c}, out{o}) == Approx(x(row{0}, col{c}) + x(row{1}, col{c})));
  pass();
  for (std::size_t i = 0; i < once.size(); ++i) CHECK(w.grad.data()[i] == Approx(2 * once.data()[i]));
  w.zero_grad();
  for (std::size_t i = 0; i < once.size(); ++i) CHECK(w.grad.data()[i] == 0.0);
}

TEST_CASE("grad tape: a parameter watched twice in one pass gets both contributions", "[grad][tape]") {
  w_t w = make_w();
  grad::tape t;
  auto a = t.watch(w);
  auto b = t.watch(w);
  t.backward(dimsum::sum<col, out>(a * b));  // d/dW sum(W * W) = 2 W
  for (std::size_t i = 0; i < w.value.size(); ++i) CHECK(w.grad.data()[i] == Approx(2 * w.value.data()[i]));
}

TEST_CASE("grad tape: constants have no gradient; a watched tensor keeps its gradient on the tape", "[grad][tape]") {
  w_t w = make_w();
  grad::tape t;
  auto x = t.watch(make_x());
  auto c = t.constant(make_x() * 2.0);
  CHECK_FALSE(c.requires_grad());
  CHECK(x.requires_grad());
  auto y = dimsum::einsum<"row col, col out -> row out">(x + c, t.watch(w));
  t.backward(dimsum::sum<row, out>(y));
  // d/dx[r, c] sum_{r, o} ((x + c) W)[r, o] = sum_o W[c, o].
  const auto& gx = dimsum::gradient<row, col>(x);
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t k = 0; k < 3; ++k)
      CHECK(gx(row{r}, col{k}) == Approx(w.value(col{k}, out{0}) + w.value(col{k}, out{1})));
}

TEST_CASE("grad tape: a loss that reaches no watched parameter leaves gradients alone", "[grad][tape]") {
  w_t w = make_w();
  grad::tape t;
  auto c = t.constant(make_x());
  t.backward(dimsum::sum<row, col>(c * c));
  for (std::size_t i = 0; i < w.grad.size(); ++i) CHECK(w.grad.data()[i] == 0.0);
}

TEST_CASE("grad tape: backward twice, a loss from another tape, and two tapes in one operation throw", "[grad][tape]") {
  w_t w = make_w();
  grad::tape t1, t2;
  auto a = t1.watch(w);
  auto b = t2.watch(w);
  CHECK_THROWS_AS(a * b, grad::tape_error);
  auto l1 = dimsum::sum<col, out>(a * a);
  CHECK_THROWS_AS(t2.backward(l1), grad::tape_error);
  t1.backward(l1);
  CHECK_THROWS_AS(t1.backward(l1), grad::tape_error);
}

TEST_CASE("grad tape: a var that needs a gradient and outlived its tape throws when used; a constant does not",
          "[grad][tape]") {
  // torch refuses a second backward through a freed graph; here the tape
  // that recorded `kept` is gone (it was a use after free before).
  w_t w = make_w();
  grad::var<double, col, out> kept, constant;
  {
    grad::tape t;
    kept = t.watch(w) * 3.0;
    constant = t.constant(w.value * 2.0);
    t.backward(dimsum::sum<col, out>(kept));
  }
  CHECK(w.grad(col{0}, out{0}) == 3.0);                    // d sum(3 w) / dw
  CHECK(kept.value()(col{0}, out{0}) == 3.0 * w.value(col{0}, out{0}));  // the value stays readable
  CHECK_THROWS_WITH(kept * 2.0, Catch::Contains("its tape no longer exists"));
  CHECK(constant.owner() == nullptr);
  grad::tape t2;
  CHECK_THROWS_AS(t2.watch(w) + kept, grad::tape_error);
  auto y = t2.watch(w) + constant;                         // a constant of a gone tape is a constant
  t2.backward(dimsum::sum<col, out>(y));
  CHECK(w.grad(col{0}, out{0}) == 4.0);                    // 3 + 1
}

TEST_CASE("grad tape: a node's first gradient is moved in or copied, later ones added in place", "[grad][tape]") {
  grad::detail::var_node<double, row, col> n;
  n.own = make_x();
  x_t first = make_x();
  const double* buffer = first.data();
  n.accumulate(std::move(first));  // no gradient yet: the tensor's buffer becomes the gradient
  CHECK(n.grad.data() == buffer);
  const x_t second = make_x();
  n.accumulate(second);  // an lvalue tensor: added from where it is
  const std::vector<double> raw{1, 2, 3, 4, 5, 6};
  n.accumulate_raw(raw.data());
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t c = 0; c < 3; ++c)
      CHECK(n.grad(row{r}, col{c}) == 2 * (double(r + 1) * 0.5 + double(c)) + double(r * 3 + c + 1));
  grad::detail::var_node<double, row, col> m;
  m.own = make_x();
  m.accumulate_raw(raw.data());  // the first contribution copied
  for (std::size_t x = 0; x < 6; ++x) CHECK(m.grad.data()[x] == raw[x]);
}

TEST_CASE("grad tape: an intermediate's gradient is freed once sent on; a watched tensor keeps its own",
          "[grad][tape]") {
  grad::tape t;
  auto x = t.watch(make_x());
  auto y = x * x;
  auto z = y * 3.0;
  t.backward(dimsum::sum<row, col>(z));
  CHECK_FALSE(y.node()->has_grad);  // freed, as PyTorch frees a non-leaf's .grad
  CHECK(y.node()->grad.size() == 0);
  CHECK_FALSE(z.node()->has_grad);
  REQUIRE(x.node()->has_grad);
  const x_t x0 = make_x();
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t c = 0; c < 3; ++c) CHECK(dimsum::gradient(x)(row{r}, col{c}) == 6 * x0(row{r}, col{c}));
  // Asking for a freed gradient is an error, not zeros (torch: None).
  CHECK_THROWS_WITH(dimsum::gradient(y), Catch::Contains("gradient(v): v is the result of an operation"));
}

TEST_CASE("grad tape: the gradient of the var tape.watch(p) gave is p.grad, not zeros", "[grad][tape]") {
  w_t w = make_w();
  grad::tape t;
  auto v = t.watch(w);
  t.backward(dimsum::sum<col, out>(v * v));  // d/dw sum(w^2) = 2 w
  const auto& g = dimsum::gradient(v);
  CHECK(&g == &w.grad);
  for (std::size_t c = 0; c < 3; ++c)
    for (std::size_t o = 0; o < 2; ++o) CHECK(g(col{c}, out{o}) == 2 * w.value(col{c}, out{o}));
}

TEST_CASE("grad tape: a chain of half a million x = f(x) steps is run and freed without deep recursion", "[grad][tape]") {
  // Each node's rule holds its input; freeing the oldest node first freed
  // the whole chain in one recursion and overflowed the stack (at about
  // 300000 steps in a release build).
  DIMSUM_DIM(unit, 1);
  parameter<double, unit> w(tensor<double, unit>::full(0.5));
  const std::size_t steps = 500000;
  {
    grad::tape t;
    auto h = t.watch(w);
    for (std::size_t i = 0; i < steps; ++i) h = h * 1.0 + 1e-6;
    CHECK(t.size() == 2 * steps + 1);
    t.backward(dimsum::sum<unit>(h));  // d/dw (w + steps * 1e-6) = 1
  }
  CHECK(w.grad(unit{0}) == 1.0);
  // A var kept after its tape holds its value, not the graph behind it
  // (which kept every activation alive, and freed the chain recursively
  // when the var went).
  grad::var<double, unit> kept;
  std::weak_ptr<grad::detail::var_node<double, unit>> first;
  {
    grad::tape t;
    auto h = t.watch(w) * 2.0;
    first = h.node();
    for (std::size_t i = 0; i < steps; ++i) h = h * 1.0 + 1e-6;
    t.backward(dimsum::sum<unit>(h));
    kept = h;
    CHECK_FALSE(first.expired());
  }
  CHECK(first.expired());
  CHECK(kept.value()(unit{0}) == Approx(1.0 + double(steps) * 1e-6));
  kept = {};
}

TEST_CASE("grad tape: watching a lazy expression watches its value, a leaf", "[grad][tape]") {
  grad::tape t;
  const x_t x = make_x();
  auto v = t.watch(x * 2.0);   // a leaf of value 2x, as torch's (x * 2).requires_grad_()
  static_assert(std::is_same_v<decltype(v), grad::var<double, row, col>>);
  CHECK(v.requires_grad());
  t.backward(dimsum::sum<row, col>(v * v));
  // d/dv sum(v^2) = 2 v = 4 x.
  const auto& g = dimsum::gradient<row, col>(v);
  for (std::size_t r = 0; r < 2; ++r)
    for (std::size_t c = 0; c < 3; ++c) CHECK(g(row{r}, col{c}) == Approx(4.0 * x(row{r}, col{c})));
}

TEST_CASE("grad tape: a parameter reassigned with other extents between watch and backward is a tape_error",
          "[grad][tape]") {
  for (const std::size_t cols : {std::size_t(2), std::size_t(5)}) {  // smaller, then larger
    INFO(cols);
    w_t w = make_w();
    grad::tape t;
    auto v = t.watch(w);
    auto loss = dimsum::sum<col, out>(v * 2.0);
    w = w_t(tensor<double, col, out>(col{cols}, out{2}));
    CHECK_THROWS_AS(t.backward(loss), grad::tape_error);
    CHECK_THROWS_WITH(t.backward(loss), Catch::Contains("a parameter (col, out) was watched with extents (3, 2) but "
                                                        "its value now has extents (" +
                                                        std::to_string(cols) + ", 2)"));
    for (std::size_t x = 0; x < w.grad.size(); ++x) CHECK(w.grad.data()[x] == 0.0);  // nothing accumulated
  }
  // Reassigned with the same extents: backward reads the new value, as it
  // reads the parameter in place.
  w_t w = make_w();
  grad::tape t;
  auto v = t.watch(w);
  auto loss = dimsum::sum<col, out>(v * 2.0);
  w = make_w();
  t.backward(loss);
  for (std::size_t x = 0; x < w.grad.size(); ++x) CHECK(w.grad.data()[x] == 2.0);
}

TEST_CASE("grad tape: retain_grad keeps an intermediate's gradient; hooks see and change a gradient before it is sent on",
          "[grad][tape]") {
  w_t w = make_w();
  grad::tape t;
  auto v = t.watch(w);
  auto y = v * v;  // dy: 3, so dw = 3 * 2w after the hook halves it: 3w
  auto z = y * 3.0;
  y.retain_grad();
  std::vector<double> seen;
  y.register_hook([&](tensor<double, col, out>& g) {
    seen.assign(g.data(), g.data() + g.size());
    for (std::size_t x = 0; x < g.size(); ++x) g.data()[x] *= 0.5;  // kept as changed, as torch's hook's result
  });
  v.register_hook([&](tensor<double, col, out>& g) {  // a watched parameter's: before w.grad is increased
    for (std::size_t x = 0; x < g.size(); ++x) g.data()[x] = std::min(g.data()[x], 1.0);  // clip
  });
  t.backward(dimsum::sum<col, out>(z));
  REQUIRE(seen.size() == 6);
  for (double s : seen) CHECK(s == 3.0);
  const auto& gy = dimsum::gradient(y);
  for (std::size_t x = 0; x < 6; ++x) CHECK(gy.data()[x] == 1.5);
  for (std::size_t x = 0; x < 6; ++x) CHECK(w.grad.data()[x] == std::min(3.0 * w.value.data()[x], 1.0));
  CHECK_THROWS_WITH(dimsum::gradient(z), Catch::Contains("call v.retain_grad() before backward"));
  auto c = t.constant(make_x());
  CHECK_THROWS_AS(c.retain_grad(), grad::tape_error);
}

TEST_CASE("grad tape: retain_grad and register_hook on the einsum of two vars (a lazy var)", "[grad][tape]") {
  w_t w = make_w();
  const x_t x = make_x();
  tensor<double, row, out> r(row{x.extent<row>()}, out{w.value.extent<out>()});
  for (std::size_t i = 0; i < r.size(); ++i) r.data()[i] = 0.25 * double(i) - 0.5;
  grad::tape t;
  auto y = dimsum::einsum<"row col, col out -> row out">(t.constant(x), t.watch(w));  // lazy: may start an attention chain
  STATIC_REQUIRE(grad::detail::is_lazy_var_v<decltype(y)>);
  y.retain_grad();
  y.register_hook([](tensor<double, row, out>& g) {
    for (std::size_t i = 0; i < g.size(); ++i) g.data()[i] *= 2.0;
  });
  t.backward(dimsum::sum<row, out>(y * r));
  const auto& gy = dimsum::gradient(y);  // d loss / d y = r, doubled by the hook
  for (std::size_t i = 0; i < r.size(); ++i) CHECK(gy.data()[i] == 2.0 * r.data()[i]);
  // d loss / d W = x^T (2 r), by plain loops
  for (std::size_t c = 0; c < x.extent<col>(); ++c)
    for (std::size_t o = 0; o < r.extent<out>(); ++o) {
      double want = 0;
      for (std::size_t i = 0; i < x.extent<row>(); ++i) want += x(row{i}, col{c}) * 2.0 * r(row{i}, out{o});
      CHECK(w.grad(col{c}, out{o}) == Approx(want).epsilon(1e-14));
    }
}

TEST_CASE("grad tape: on_parameter_gradient reports each parameter once, when its gradient is final", "[grad][tape]") {
  // loss = sum(a * a) + sum(a * b) with a watched twice, b once, c frozen:
  // d/da = 2a + b (from two nodes), d/db = a.
  parameter<double, col> a(tensor<double, col>(col{3})), b(tensor<double, col>(col{3})), c(tensor<double, col>(col{3}));
  for (std::size_t i = 0; i < 3; ++i) {
    a.value.data()[i] = 1.0 + double(i);
    b.value.data()[i] = -2.0 + 0.5 * double(i);
  }
  c.requires_grad = false;
  a.zero_grad();
  b.zero_grad();
  std::vector<std::pair<const void*, std::vector<double>>> seen;  // the gradient as it was when reported
  grad::tape t;
  t.on_parameter_gradient([&](const void* g) {
    const auto& grad = *static_cast<const tensor<double, col>*>(g);
    seen.emplace_back(g, std::vector<double>(grad.data(), grad.data() + grad.size()));
  });
  auto a1 = t.watch(a);
  auto bv = t.watch(b);
  auto a2 = t.watch(a);
  auto cv = t.watch(c);
  t.backward(dimsum::sum<col>(a1 * a1 + a2 * bv + cv));
  REQUIRE(seen.size() == 2);
  // a's second watch is recorded last, its first watch first: a is final
  // only after backward reaches its first node, so b comes first
  CHECK(seen[0].first == &b.grad);
  CHECK(seen[1].first == &a.grad);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(seen[0].second[i] == a.value.data()[i]);
    CHECK(seen[1].second[i] == 2 * a.value.data()[i] + b.value.data()[i]);
  }
  // a loss that reaches no parameter reports nothing
  grad::tape t2;
  int calls = 0;
  t2.on_parameter_gradient([&](const void*) { ++calls; });
  auto cv2 = t2.watch(c);
  t2.backward(dimsum::sum<col>(cv2));
  CHECK(calls == 0);
}
