// optim/: SGD and AdamW against torch.optim (1.13) step by step, gradient
// clipping against torch.nn.utils.clip_grad_norm_, the warmup-cosine
// schedule against LambdaLR and hand-computed values, seeding, and
// optimizer checkpoints (io/optimizer_state.hpp: resume equals an
// uninterrupted run bit for bit; the saved moments equal torch's). The
// fixtures come from tests/reference/make_optim_fixtures.py (float64).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include <dimsum/io/npy.hpp>
#include <dimsum/io/optimizer_state.hpp>
#include <dimsum/io/state_dict.hpp>
#include <dimsum/optim/optim.hpp>

#include "scoped_dir.hpp"

namespace {
DIMSUM_DIM(row, 3);
DIMSUM_DIM(col, 4);
DIMSUM_DIM(step);
DIMSUM_DIM(moment, 2);
DIMSUM_DIM(one, 1);

template <class T>
struct toy {
  BOOST_HANA_DEFINE_STRUCT(toy, (dimsum::parameter<T, row, col>, W), (dimsum::parameter<T, col>, b));
};

const std::string dir = std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/optim/";

template <class Tensor>
Tensor fixture(const std::string& name) {
  return dimsum::load_npy<Tensor>(dir + name + ".npy");
}

template <class T>
toy<T> initial() {
  toy<T> m;
  const auto W = fixture<dimsum::tensor<double, row, col>>("init_W");
  const auto b = fixture<dimsum::tensor<double, col>>("init_b");
  m.W = dimsum::parameter<T, row, col>(dimsum::tensor<T, row, col>{});
  m.b = dimsum::parameter<T, col>(dimsum::tensor<T, col>{});
  for (std::size_t i = 0; i < W.size(); ++i) m.W.value.data()[i] = T(W.data()[i]);
  for (std::size_t i = 0; i < b.size(); ++i) m.b.value.data()[i] = T(b.data()[i]);
  return m;
}

// Relative-plus-absolute closeness of a flat range.
template <class A, class B>
void check_close(const A* got, const B* want, std::size_t n, double rel, double abs, const std::string& what) {
  for (std::size_t i = 0; i < n; ++i) {
    INFO(what << " element " << i << ": got " << double(got[i]) << ", want " << double(want[i]));
    CHECK(std::abs(double(got[i]) - double(want[i])) <= abs + rel * std::abs(double(want[i])));
  }
}

// Runs `steps` optimizer steps with the fixture gradients and compares the
// parameters after each step with torch's.
template <class T, class Optimizer>
void replay(Optimizer& opt, toy<T>& m, const std::string& c, double rel, double abs) {
  const auto gW = fixture<dimsum::tensor<double, step, row, col>>("grads_W");
  const auto gb = fixture<dimsum::tensor<double, step, col>>("grads_b");
  const auto wantW = fixture<dimsum::tensor<double, step, row, col>>(c + "_W");
  const auto wantb = fixture<dimsum::tensor<double, step, col>>(c + "_b");
  const std::size_t steps = gW.template extent<step>();
  REQUIRE(steps == 6);
  for (std::size_t s = 0; s < steps; ++s) {
    for (std::size_t i = 0; i < 12; ++i) m.W.grad.data()[i] = T(gW.data()[s * 12 + i]);
    for (std::size_t i = 0; i < 4; ++i) m.b.grad.data()[i] = T(gb.data()[s * 4 + i]);
    opt.step(m);
    check_close(m.W.value.data(), wantW.data() + s * 12, 12, rel, abs, c + " W after step " + std::to_string(s));
    check_close(m.b.value.data(), wantb.data() + s * 4, 4, rel, abs, c + " b after step " + std::to_string(s));
  }
}

// Sets the fixture gradients of steps [from, to) one by one and steps.
template <class T, class Optimizer>
void run_steps(Optimizer& opt, toy<T>& m, std::size_t from, std::size_t to) {
  const auto gW = fixture<dimsum::tensor<double, step, row, col>>("grads_W");
  const auto gb = fixture<dimsum::tensor<double, step, col>>("grads_b");
  for (std::size_t s = from; s < to; ++s) {
    for (std::size_t i = 0; i < 12; ++i) m.W.grad.data()[i] = T(gW.data()[s * 12 + i]);
    for (std::size_t i = 0; i < 4; ++i) m.b.grad.data()[i] = T(gb.data()[s * 4 + i]);
    opt.step(m);
  }
}

// float64 agrees with torch's float64 to a few ulps per step: 1e-13 relative
// (plus 1e-14 absolute for elements near zero) leaves room for the
// different association of torch's in-place operations.
constexpr double rel64 = 1e-13, abs64 = 1e-14;
// float32 against the float64 reference: each step is about ten float
// operations of relative error 2^-24 ~ 6e-8 on values of order 1; over six
// steps that bounds the error near 6 * 10 * 6e-8 ~ 4e-6, so 2e-5 relative
// plus 2e-6 absolute holds with margin and still catches any formula slip
// (a wrong term changes the parameters by at least lr * 1e-3 = 1e-6 ...
// typically 1e-3).
constexpr double rel32 = 2e-5, abs32 = 2e-6;

dimsum::optim::sgd_options sgd_case(const std::string& c) {
  if (c == "sgd_plain") return {.lr = 0.1};
  if (c == "sgd_momentum") return {.lr = 0.1, .momentum = 0.9, .dampening = 0.25, .weight_decay = 0.01};
  if (c == "sgd_nesterov") return {.lr = 0.05, .momentum = 0.8, .weight_decay = 0.001, .nesterov = true};
  return {.lr = 0.1, .momentum = 0.5, .maximize = true};
}

dimsum::optim::adamw_options adamw_case(const std::string& c) {
  if (c == "adamw_default") return {};
  if (c == "adamw_custom") return {.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1};
  return {.lr = 0.05, .weight_decay = 0.0, .amsgrad = true};
}
}  // namespace

TEST_CASE("optim_sgd: six steps reproduce torch.optim.SGD in float64") {
  for (std::string c : {"sgd_plain", "sgd_momentum", "sgd_nesterov", "sgd_maximize"}) {
    SECTION(c) {
      auto m = initial<double>();
      dimsum::optim::sgd opt(sgd_case(c));
      replay(opt, m, c, rel64, abs64);
    }
  }
}

TEST_CASE("optim_sgd: six steps reproduce torch.optim.SGD in float32") {
  for (std::string c : {"sgd_plain", "sgd_momentum", "sgd_nesterov", "sgd_maximize"}) {
    SECTION(c) {
      auto m = initial<float>();
      dimsum::optim::sgd opt(sgd_case(c));
      replay(opt, m, c, rel32, abs32);
    }
  }
}

TEST_CASE("optim_sgd: the momentum buffer is typed by the parameter and equals torch's") {
  auto m = initial<double>();
  dimsum::optim::sgd opt(sgd_case("sgd_momentum"));
  replay(opt, m, "sgd_momentum", rel64, abs64);
  using P = dimsum::parameter<double, row, col>;
  const auto& s = opt.state<P>("W");
  STATIC_REQUIRE(std::is_same_v<decltype(s.momentum_buffer), dimsum::tensor<double, row, col>>);
  const auto want = fixture<dimsum::tensor<double, row, col>>("sgd_momentum_state_W");
  check_close(s.momentum_buffer.data(), want.data(), 12, rel64, abs64, "momentum buffer");
  using Pf = dimsum::parameter<float, row, col>;
  CHECK_THROWS_AS(opt.state<Pf>("W"), dimsum::optim::optimizer_error);
  CHECK_THROWS_AS(opt.state<P>("V"), dimsum::optim::optimizer_error);
}

TEST_CASE("optim_sgd: invalid options throw as in PyTorch") {
  using dimsum::optim::optimizer_error;
  using dimsum::optim::sgd;
  CHECK_THROWS_AS(sgd({.lr = -1.0}), optimizer_error);
  // torch.optim.SGD(params, momentum=0.9): "TypeError: __init__() missing 1 required positional argument: 'lr'".
  CHECK_THROWS_WITH(sgd({.momentum = 0.9}), Catch::Contains("sgd: lr is required"));
  CHECK_THROWS_WITH(sgd(dimsum::optim::sgd_options{}), Catch::Contains("sgd: lr is required"));
  CHECK_THROWS_AS(sgd({.lr = 0.1, .momentum = -0.5}), optimizer_error);
  CHECK_THROWS_AS(sgd({.lr = 0.1, .weight_decay = -1.0}), optimizer_error);
  CHECK_THROWS_AS(sgd({.lr = 0.1, .nesterov = true}), optimizer_error);
  CHECK_THROWS_AS(sgd({.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}), optimizer_error);
  CHECK_NOTHROW(sgd({.lr = 0.1, .momentum = 0.9, .nesterov = true}));
}

TEST_CASE("optim_sgd: a gradient of other extents is a shape_error naming the parameter") {
  toy<double> m;
  m.W = dimsum::parameter<double, row, col>(dimsum::tensor<double, row, col>{});
  m.b.value = dimsum::tensor<double, col>{};
  m.b.grad = {};
  dimsum::optim::sgd opt({.lr = 0.1});
  CHECK_NOTHROW(opt.step(m));
  struct dyn {
    BOOST_HANA_DEFINE_STRUCT(dyn, (dimsum::parameter<double, step>, w));
  } d;
  d.w.value = dimsum::tensor<double, step>(step{3});
  // A fresh optimizer: `opt` holds state for m's parameters, and a module
  // with other parameters is refused by that check first.
  dimsum::optim::sgd fresh({.lr = 0.1});
  CHECK_THROWS_WITH(fresh.step(d), Catch::Contains("parameter 'w' (step) has value extents (3) but gradient extents (0)"));
}

TEST_CASE("optim_sgd: a module whose parameters changed since the first step is an optimizer_error") {
  struct one_param {
    BOOST_HANA_DEFINE_STRUCT(one_param, (dimsum::parameter<double, col>, b));
  } small;
  small.b = dimsum::parameter<double, col>(dimsum::tensor<double, col>{});
  auto m = initial<double>();
  dimsum::optim::sgd opt({.lr = 0.1, .momentum = 0.9});
  opt.step(m);
  CHECK_THROWS_WITH(opt.step(small), Catch::Contains("is 'b' (col) but the state was created for 'W'"));
}

TEST_CASE("optim_adamw: six steps reproduce torch.optim.AdamW in float64") {
  for (std::string c : {"adamw_default", "adamw_custom", "adamw_amsgrad"}) {
    SECTION(c) {
      auto m = initial<double>();
      dimsum::optim::adamw opt(adamw_case(c));
      replay(opt, m, c, rel64, abs64);
      using P = dimsum::parameter<double, row, col>;
      const auto& s = opt.state<P>("W");
      CHECK(s.step == 6);
      const auto want = fixture<dimsum::tensor<double, moment, row, col>>(c + "_state_W");
      check_close(s.exp_avg.data(), want.data(), 12, rel64, abs64, "exp_avg");
      check_close(s.exp_avg_sq.data(), want.data() + 12, 12, rel64, abs64, "exp_avg_sq");
    }
  }
}

TEST_CASE("optim_adamw: six steps reproduce torch.optim.AdamW in float32") {
  for (std::string c : {"adamw_default", "adamw_custom", "adamw_amsgrad"}) {
    SECTION(c) {
      auto m = initial<float>();
      dimsum::optim::adamw opt(adamw_case(c));
      replay(opt, m, c, rel32, abs32);
    }
  }
}

TEST_CASE("optim_adamw: the defaults are PyTorch's") {
  const dimsum::optim::adamw_options o;
  CHECK(o.lr == 1e-3);
  CHECK(o.beta1 == 0.9);
  CHECK(o.beta2 == 0.999);
  CHECK(o.eps == 1e-8);
  CHECK(o.weight_decay == 1e-2);
  CHECK(!o.amsgrad);
  CHECK(!o.maximize);
}

TEST_CASE("optim_adamw: invalid options throw as in PyTorch") {
  using dimsum::optim::adamw;
  using dimsum::optim::optimizer_error;
  CHECK_THROWS_AS(adamw({.lr = -1e-3}), optimizer_error);
  CHECK_THROWS_AS(adamw({.beta1 = 1.0}), optimizer_error);
  CHECK_THROWS_AS(adamw({.beta2 = -0.1}), optimizer_error);
  CHECK_THROWS_AS(adamw({.eps = -1.0}), optimizer_error);
  CHECK_THROWS_AS(adamw({.weight_decay = -0.1}), optimizer_error);
}

TEST_CASE("optim_adamw: a single step by hand") {
  // One element, p = 1, g = 0.5, lr = 0.1, wd = 0.1, betas (0.9, 0.999), eps = 0:
  // p = 1 * (1 - 0.01) = 0.99; m = 0.05, v = 0.00025; bias corrections 0.1
  // and 0.001: step_size = 1, denom = sqrt(0.00025) / sqrt(0.001) = 0.5;
  // p = 0.99 - 0.05 / 0.5 = 0.89.
  struct scalar_module {
    BOOST_HANA_DEFINE_STRUCT(scalar_module, (dimsum::parameter<double, one>, p));
  } m;
  m.p = dimsum::parameter<double, one>(dimsum::tensor<double, one>::full(1.0));
  m.p.grad.fill(0.5);
  dimsum::optim::adamw opt({.lr = 0.1, .eps = 0.0, .weight_decay = 0.1});
  opt.step(m);
  CHECK(m.p.value(one{0}) == Approx(0.89).epsilon(1e-14));
}

TEST_CASE("optim_clip: clip_grad_norm reproduces torch.nn.utils.clip_grad_norm_") {
  const double inf = std::numeric_limits<double>::infinity();
  struct clip_case {
    std::string name;
    double max_norm, norm_type;
  };
  for (const auto& c : {clip_case{"l2", 1.0, 2.0}, clip_case{"l2_unclipped", 100.0, 2.0}, clip_case{"inf", 0.5, inf},
                        clip_case{"l1", 2.0, 1.0}}) {
    SECTION(c.name) {
      auto m = initial<double>();
      m.W.grad = fixture<dimsum::tensor<double, row, col>>("clip_" + c.name + "_grads_W");
      m.b.grad = fixture<dimsum::tensor<double, col>>("clip_" + c.name + "_grads_b");
      const double total = dimsum::optim::clip_grad_norm(m, c.max_norm, c.norm_type);
      const auto want_norm = fixture<dimsum::tensor<double, one>>("clip_" + c.name + "_norm");
      CHECK(total == Approx(want_norm(one{0})).epsilon(1e-14));
      const auto wW = fixture<dimsum::tensor<double, row, col>>("clip_" + c.name + "_W");
      const auto wb = fixture<dimsum::tensor<double, col>>("clip_" + c.name + "_b");
      check_close(m.W.grad.data(), wW.data(), 12, rel64, abs64, "clipped W grad");
      check_close(m.b.grad.data(), wb.data(), 4, rel64, abs64, "clipped b grad");
    }
  }
}

TEST_CASE("optim_clip: hand-computed 3-4-5 case") {
  struct two {
    BOOST_HANA_DEFINE_STRUCT(two, (dimsum::parameter<float, one>, a), (dimsum::parameter<float, one>, b));
  } m;
  m.a = dimsum::parameter<float, one>(dimsum::tensor<float, one>{});
  m.b = dimsum::parameter<float, one>(dimsum::tensor<float, one>{});
  m.a.grad.fill(3.0f);
  m.b.grad.fill(-4.0f);
  CHECK(dimsum::optim::clip_grad_norm(m, 1.0) == Approx(5.0));
  CHECK(m.a.grad(one{0}) == Approx(3.0 / (5.0 + 1e-6)));
  CHECK(m.b.grad(one{0}) == Approx(-4.0 / (5.0 + 1e-6)));
  CHECK_THROWS_AS(dimsum::optim::clip_grad_norm(m, 1.0, 0.0), dimsum::optim::optimizer_error);
}

TEST_CASE("optim_schedule: warmup_cosine_schedule matches LambdaLR with the documented formula") {
  const dimsum::optim::warmup_cosine_schedule s{.base_lr = 0.5, .warmup_steps = 8, .total_steps = 30, .min_lr = 0.05};
  const auto want = fixture<dimsum::tensor<double, step>>("schedule_lr");
  REQUIRE(want.template extent<step>() == 40);
  for (std::size_t i = 0; i < 40; ++i) {
    INFO("step " << i);
    CHECK(s(i) == Approx(want(step{i})).epsilon(1e-14).margin(1e-16));
  }
}

TEST_CASE("optim_schedule: hand-computed points") {
  const dimsum::optim::warmup_cosine_schedule s{.base_lr = 1.0, .warmup_steps = 10, .total_steps = 110};
  CHECK(s(0) == 0.0);
  CHECK(s(5) == 0.5);
  CHECK(s(10) == 1.0);
  CHECK(s(60) == Approx(0.5));                                 // half way: cos(pi/2) = 0
  CHECK(s(35) == Approx(0.5 * (1 + std::cos(M_PI / 4))));      // a quarter of the way
  CHECK(s(110) == 0.0);
  CHECK(s(1000) == 0.0);
  const dimsum::optim::warmup_cosine_schedule no_warmup{.base_lr = 2.0, .total_steps = 4};
  CHECK(no_warmup(0) == 2.0);
  const dimsum::optim::warmup_cosine_schedule bad{.base_lr = 1.0, .warmup_steps = 5, .total_steps = 4};
  CHECK_THROWS_AS(bad(0), dimsum::optim::optimizer_error);
  // Left out, total_steps was 0 (min_lr at every step: no training) and
  // base_lr 0 or indeterminate; both are required, as in Hugging Face's
  // get_cosine_schedule_with_warmup.
  const dimsum::optim::warmup_cosine_schedule no_total{.base_lr = 1.0, .warmup_steps = 5};
  CHECK_THROWS_AS(no_total(7), dimsum::optim::optimizer_error);
  const dimsum::optim::warmup_cosine_schedule no_lr{.warmup_steps = 5, .total_steps = 10};
  CHECK_THROWS_AS(no_lr(7), dimsum::optim::optimizer_error);
}

TEST_CASE("optim_seed: splitmix64 and derive_seed are the published, portable functions") {
  std::uint64_t state = 0;
  // The first outputs of SplitMix64 from state 0 (the reference C code of
  // Vigna's xoshiro page).
  CHECK(dimsum::optim::splitmix64(state) == 0xe220a8397b1dcdafull);
  CHECK(dimsum::optim::splitmix64(state) == 0x6e789e6aa1b965f4ull);
  // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c; xor seed 0 then one SplitMix64 step.
  std::uint64_t expected_state = 0xaf63dc4c8601ec8cull;
  CHECK(dimsum::optim::derive_seed(0, "a") == dimsum::optim::splitmix64(expected_state));
  STATIC_REQUIRE(dimsum::optim::derive_seed(7, "blocks.0.W") == dimsum::optim::derive_seed(7, "blocks.0.W"));
  CHECK(dimsum::optim::derive_seed(7, "blocks.0.W") != dimsum::optim::derive_seed(7, "blocks.1.W"));
  CHECK(dimsum::optim::derive_seed(7, "blocks.0.W") != dimsum::optim::derive_seed(8, "blocks.0.W"));
}

TEST_CASE("optim_seed: seed_parameters gives each parameter the seed of its name") {
  auto m = initial<double>();
  std::vector<std::pair<std::string, std::uint64_t>> got;
  dimsum::optim::seed_parameters(m, 99, [&](const std::string& name, auto&, std::uint64_t s) { got.emplace_back(name, s); });
  REQUIRE(got.size() == 2);
  CHECK(got[0] == std::pair<std::string, std::uint64_t>{"W", dimsum::optim::derive_seed(99, "W")});
  CHECK(got[1] == std::pair<std::string, std::uint64_t>{"b", dimsum::optim::derive_seed(99, "b")});
}

TEST_CASE("optim: a step that throws changes no parameter and no state") {
  // W comes first and has a good gradient; b's value was resized without
  // its gradient, so the step must refuse before it touches W.
  auto m = initial<double>();
  m.W.grad.fill(1.0);
  const auto W0 = m.W.value;
  struct dyn {
    BOOST_HANA_DEFINE_STRUCT(dyn, (dimsum::parameter<double, row, col>, W), (dimsum::parameter<double, step>, b));
  } d;
  d.W = m.W;
  d.b.value = dimsum::tensor<double, step>(step{3});
  using W_t = dimsum::parameter<double, row, col>;
  dimsum::optim::adamw opt;
  CHECK_THROWS_WITH(opt.step(d), Catch::Contains("parameter 'b' (step) has value extents (3) but gradient extents (0)"));
  for (std::size_t i = 0; i < W0.size(); ++i) CHECK(d.W.value.data()[i] == W0.data()[i]);
  CHECK_THROWS_AS(opt.state<W_t>("W"), dimsum::optim::optimizer_error);  // no state yet
  // After a good step, a module whose second parameter changed type is
  // refused before the first parameter moves, and its step count stays.
  d.b.grad = dimsum::tensor<double, step>(step{3});
  opt.step(d);
  const auto W1 = d.W.value;
  struct other {
    BOOST_HANA_DEFINE_STRUCT(other, (dimsum::parameter<double, row, col>, W), (dimsum::parameter<double, col>, b));
  } o;
  o.W = d.W;
  o.b = dimsum::parameter<double, col>(dimsum::tensor<double, col>{});
  CHECK_THROWS_WITH(opt.step(o), Catch::Contains("is 'b' (col) but the state was created for 'b'"));
  for (std::size_t i = 0; i < W1.size(); ++i) CHECK(o.W.value.data()[i] == W1.data()[i]);
  CHECK(opt.state<W_t>("W").step == 1);
  // A module that lost a parameter: refused, W unchanged.
  struct fewer {
    BOOST_HANA_DEFINE_STRUCT(fewer, (dimsum::parameter<double, row, col>, W));
  } f;
  f.W = d.W;
  CHECK_THROWS_WITH(opt.step(f), Catch::Contains("the module has 1 parameters but the state was created for 2"));
  for (std::size_t i = 0; i < W1.size(); ++i) CHECK(f.W.value.data()[i] == W1.data()[i]);
  CHECK(opt.state<W_t>("W").step == 1);
  // b rebuilt with another dynamic extent (its gradient too): its moments
  // have 3 elements, the update would read 5 (torch: "The size of tensor a
  // (5) must match the size of tensor b (3)"). Refused by the step and by
  // save_optimizer_state (which wrote zeros for them), W unchanged.
  d.b = dimsum::parameter<double, step>(dimsum::tensor<double, step>(step{5}));
  d.b.zero_grad();
  CHECK_THROWS_AS(opt.step(d), dimsum::shape_error);
  CHECK_THROWS_WITH(opt.step(d), Catch::Contains("parameter 'b' (step) has value extents (5) but its optimizer state "
                                                 "'exp_avg' has extents (3)"));
  for (std::size_t i = 0; i < W1.size(); ++i) CHECK(d.W.value.data()[i] == W1.data()[i]);
  CHECK(opt.state<W_t>("W").step == 1);
  const test::scoped_dir dir("optim_state_extents");
  CHECK_THROWS_AS(dimsum::save_optimizer_state((dir / "optimizer.safetensors").string(), d, opt), dimsum::shape_error);
  dimsum::optim::sgd s({.lr = 0.1, .momentum = 0.9});
  d.b = dimsum::parameter<double, step>(dimsum::tensor<double, step>(step{3}));
  d.b.zero_grad();
  s.step(d);
  d.b = dimsum::parameter<double, step>(dimsum::tensor<double, step>(step{5}));
  d.b.zero_grad();
  CHECK_THROWS_WITH(s.step(d), Catch::Contains("its optimizer state 'momentum_buffer' has extents (3)"));
  for (std::size_t i = 0; i < W1.size(); ++i) CHECK(d.W.value.data()[i] == W1.data()[i] - 0.1 * 1.0);
}

TEST_CASE("optim_clip: zero, infinite and NaN gradients as torch.nn.utils.clip_grad_norm_ treats them") {
  // torch 1.13, float64, max_norm 1, gradients [g0, g1] and [g2]:
  //   [0, 0] [0], L2       -> total 0,   gradients unchanged
  //   [1, inf] [2], L2/inf -> total inf, gradients [0, nan] [0]
  //   [1, nan] [2], L2/inf -> total nan, every gradient nan
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  struct two {
    BOOST_HANA_DEFINE_STRUCT(two, (dimsum::parameter<double, moment>, x), (dimsum::parameter<double, one>, y));
  };
  auto clip = [&](double g0, double g1, double g2, double norm_type, double& total) {
    two m;
    m.x = dimsum::parameter<double, moment>(dimsum::tensor<double, moment>{});
    m.y = dimsum::parameter<double, one>(dimsum::tensor<double, one>{});
    m.x.grad.data()[0] = g0;
    m.x.grad.data()[1] = g1;
    m.y.grad.data()[0] = g2;
    total = dimsum::optim::clip_grad_norm(m, 1.0, norm_type);
    return std::array<double, 3>{m.x.grad.data()[0], m.x.grad.data()[1], m.y.grad.data()[0]};
  };
  double total = -1;
  CHECK(clip(0, 0, 0, 2.0, total) == std::array<double, 3>{0, 0, 0});
  CHECK(total == 0.0);
  for (double norm_type : {2.0, inf}) {
    INFO("norm_type " << norm_type);
    const auto g = clip(1, inf, 2, norm_type, total);
    CHECK(total == inf);
    CHECK(g[0] == 0.0);
    CHECK(std::isnan(g[1]));
    CHECK(g[2] == 0.0);
    for (double v : clip(1, nan, 2, norm_type, total)) CHECK(std::isnan(v));
    CHECK(std::isnan(total));
  }
}

namespace {
std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Trains k steps, saves model and optimizer, loads both into a fresh model
// and an optimizer built with other options, trains the remaining steps,
// and compares with an uninterrupted run bit for bit.
template <class Optimizer, class Options>
void check_resume(const Options& options, std::size_t k) {
  const test::scoped_dir dir("optim_resume");
  auto whole = initial<float>();
  Optimizer uninterrupted(options);
  run_steps(uninterrupted, whole, 0, 6);

  auto first = initial<float>();
  Optimizer before(options);
  run_steps(before, first, 0, k);
  dimsum::save_safetensors((dir / "model.safetensors").string(), first);
  dimsum::save_optimizer_state((dir / "optimizer.safetensors").string(), first, before);

  toy<float> resumed;
  resumed.W = dimsum::parameter<float, row, col>(dimsum::tensor<float, row, col>{});
  resumed.b = dimsum::parameter<float, col>(dimsum::tensor<float, col>{});
  dimsum::load_safetensors((dir / "model.safetensors").string(), resumed);
  Optimizer after(Options{.lr = 0.5});  // the file's options replace these
  dimsum::load_optimizer_state((dir / "optimizer.safetensors").string(), resumed, after);
  CHECK(after.options.lr == options.lr);
  run_steps(after, resumed, k, 6);
  CHECK(std::memcmp(resumed.W.value.data(), whole.W.value.data(), 12 * sizeof(float)) == 0);
  CHECK(std::memcmp(resumed.b.value.data(), whole.b.value.data(), 4 * sizeof(float)) == 0);
}
}  // namespace

TEST_CASE("optim_checkpoint: resuming from a saved model and optimizer equals an uninterrupted run bit for bit") {
  using dimsum::optim::adamw;
  using dimsum::optim::sgd;
  for (std::size_t k : {0, 1, 3}) {
    INFO("interrupted after " << k << " steps");
    for (std::string c : {"adamw_default", "adamw_custom", "adamw_amsgrad"}) {
      INFO(c);
      check_resume<adamw>(adamw_case(c), k);
    }
    for (std::string c : {"sgd_plain", "sgd_momentum", "sgd_nesterov", "sgd_maximize"}) {
      INFO(c);
      check_resume<sgd>(sgd_case(c), k);
    }
  }
}

TEST_CASE("optim_checkpoint: the saved AdamW state after six steps equals torch.optim.AdamW's") {
  const test::scoped_dir dir("optim_state_torch");
  const std::string path = (dir / "optimizer.safetensors").string();
  for (std::string c : {"adamw_default", "adamw_custom", "adamw_amsgrad"}) {
    INFO(c);
    auto m = initial<double>();
    dimsum::optim::adamw opt(adamw_case(c));
    run_steps(opt, m, 0, 6);
    dimsum::save_optimizer_state(path, m, opt);
    const auto file = dimsum::read_safetensors(path);
    const auto want = fixture<dimsum::tensor<double, moment, row, col>>(c + "_state_W");
    const auto& exp_avg = file.tensors.at("W.exp_avg");
    const auto& exp_avg_sq = file.tensors.at("W.exp_avg_sq");
    CHECK(exp_avg.dtype == "F64");
    CHECK(exp_avg.shape == std::vector<std::size_t>{3, 4});
    check_close(reinterpret_cast<const double*>(exp_avg.data.data()), want.data(), 12, rel64, abs64, "exp_avg");
    check_close(reinterpret_cast<const double*>(exp_avg_sq.data.data()), want.data() + 12, 12, rel64, abs64,
                "exp_avg_sq");
    const auto& step_count = file.tensors.at("b.step");
    CHECK(step_count.dtype == "I64");
    CHECK(step_count.shape.empty());
    std::int64_t steps = 0;
    std::memcpy(&steps, step_count.data.data(), sizeof steps);
    CHECK(steps == 6);
    CHECK(file.tensors.count("W.max_exp_avg_sq") == (c == "adamw_amsgrad" ? 1u : 0u));
    CHECK(file.metadata.at("dimsum.optimizer") == "adamw");
    CHECK(file.metadata.at("dimsum.optimizer.param_groups.0.lr") == (c == "adamw_default" ? "0.001" : c == "adamw_custom" ? "0.02" : "0.05"));
    CHECK(file.metadata.at("dimsum.optimizer.states") == "2");
  }
  // SGD: the momentum buffer under torch's key, equal to torch's.
  auto m = initial<double>();
  dimsum::optim::sgd opt(sgd_case("sgd_momentum"));
  run_steps(opt, m, 0, 6);
  dimsum::save_optimizer_state(path, m, opt);
  const auto file = dimsum::read_safetensors(path);
  CHECK(file.tensors.size() == 2);
  const auto want = fixture<dimsum::tensor<double, row, col>>("sgd_momentum_state_W");
  check_close(reinterpret_cast<const double*>(file.tensors.at("W.momentum_buffer").data.data()), want.data(), 12,
              rel64, abs64, "momentum_buffer");
}

TEST_CASE("optim_checkpoint: a file that does not fit is refused by name and the optimizer is unchanged") {
  using dimsum::optim::adamw;
  const test::scoped_dir dir("optim_state_errors");
  const std::string good = (dir / "good.safetensors").string(), bad = (dir / "bad.safetensors").string();
  auto m = initial<double>();
  adamw saved(adamw_case("adamw_custom"));
  run_steps(saved, m, 0, 2);
  dimsum::save_optimizer_state(good, m, saved);

  // The optimizer that must survive every failed load: 1 step, default options.
  auto m2 = initial<double>();
  adamw opt;
  run_steps(opt, m2, 0, 1);
  using W_t = dimsum::parameter<double, row, col>;
  const auto exp_avg0 = opt.state<W_t>("W").exp_avg;
  auto unchanged = [&] {
    CHECK(opt.options.lr == 1e-3);
    CHECK(opt.state<W_t>("W").step == 1);
    CHECK(std::memcmp(opt.state<W_t>("W").exp_avg.data(), exp_avg0.data(), 12 * sizeof(double)) == 0);
  };
  auto with = [&](auto change) {
    auto c = dimsum::read_safetensors(good);
    change(c);
    dimsum::write_safetensors(bad, c);
    return bad;
  };
  auto with_meta = [&](const std::string& key, const std::string& value) {
    return with([&](auto& c) { c.metadata[key] = value; });
  };

  SECTION("a missing key") {
    CHECK_THROWS_WITH(dimsum::load_optimizer_state(with([](auto& c) { c.tensors.erase("b.exp_avg"); }), m2, opt),
                      Catch::Contains("does not fit the module: missing keys 'b.exp_avg'"));
    unchanged();
  }
  SECTION("an unexpected key") {
    CHECK_THROWS_WITH(dimsum::load_optimizer_state(
                          with([](auto& c) { c.tensors.emplace("c.exp_avg", c.tensors.at("b.exp_avg")); }), m2, opt),
                      Catch::Contains("unexpected keys 'c.exp_avg'"));
    unchanged();
  }
  SECTION("an extent that differs: a shape_error naming the key, the dim and both extents") {
    auto widen = [](auto& c) {
      auto& t = c.tensors.at("W.exp_avg_sq");
      t.shape = {3, 5};
      t.data.resize(15 * sizeof(double));
    };
    CHECK_THROWS_AS(dimsum::load_optimizer_state(with(widen), m2, opt), dimsum::shape_error);
    CHECK_THROWS_WITH(dimsum::load_optimizer_state(with(widen), m2, opt),
                      Catch::Contains("'W.exp_avg_sq' (row, col): dim 'col' has extent 4 in the module but 5 in the "
                                      "checkpoint"));
    unchanged();
  }
  SECTION("another dtype") {
    auto m32 = initial<float>();
    CHECK_THROWS_WITH(dimsum::load_optimizer_state(good, m32, opt),
                      Catch::Contains("'W.exp_avg' is F32 in the optimizer but F64 in the checkpoint"));
    unchanged();
  }
  SECTION("another optimizer, a missing or invalid option") {
    dimsum::optim::sgd s({.lr = 0.1, .momentum = 0.9});
    run_steps(s, m, 0, 1);
    dimsum::save_optimizer_state(bad, m, s);
    CHECK_THROWS_WITH(dimsum::load_optimizer_state(bad, m2, opt), Catch::Contains("is the state of sgd, not of adamw"));
    CHECK_THROWS_WITH(dimsum::load_optimizer_state(
                          with([](auto& c) { c.metadata.erase("dimsum.optimizer.param_groups.0.beta2"); }), m2, opt),
                      Catch::Contains("has no metadata 'dimsum.optimizer.param_groups.0.beta2'"));
    CHECK_THROWS_WITH(dimsum::load_optimizer_state(with_meta("dimsum.optimizer.param_groups.0.amsgrad", "yes"), m2, opt),
                      Catch::Contains("option amsgrad is 'yes', not a bool"));
    CHECK_THROWS_WITH(dimsum::load_optimizer_state(with_meta("dimsum.optimizer.param_groups.0.beta1", "1"), m2, opt),
                      Catch::Contains("adamw: invalid beta1"));
    unchanged();
  }
  SECTION("a state count that is not the module's number of parameters") {
    CHECK_THROWS_WITH(dimsum::load_optimizer_state(with_meta("dimsum.optimizer.states", "3"), m2, opt),
                      Catch::Contains("holds the state of 3 parameters but the module has 2"));
    CHECK_THROWS_WITH(dimsum::load_optimizer_state(with_meta("dimsum.optimizer.states", "two"), m2, opt),
                      Catch::Contains("metadata 'dimsum.optimizer.states' is 'two', not a count"));
    unchanged();
    // SGD without momentum keeps no tensor: only the count tells that the
    // file is another module's (torch: "a parameter group that doesn't
    // match the size of optimizer's group").
    dimsum::optim::sgd plain({.lr = 0.1});
    run_steps(plain, m, 0, 1);
    dimsum::save_optimizer_state(bad, m, plain);
    struct one_param {
      BOOST_HANA_DEFINE_STRUCT(one_param, (dimsum::parameter<double, col>, b));
    } other;
    other.b = dimsum::parameter<double, col>(dimsum::tensor<double, col>{});
    dimsum::optim::sgd s({.lr = 0.2});
    CHECK_THROWS_WITH(dimsum::load_optimizer_state(bad, other, s),
                      Catch::Contains("holds the state of 2 parameters but the module has 1"));
    CHECK(s.options.lr == 0.2);
  }
  SECTION("a step count below 0 or at INT64_MAX: the next step would divide by 0 or overflow") {
    for (const std::int64_t step : {std::int64_t(-1), std::numeric_limits<std::int64_t>::max()}) {
      INFO(step);
      auto set_step = [&](auto& c) { std::memcpy(c.tensors.at("W.step").data.data(), &step, sizeof step); };
      CHECK_THROWS_AS(dimsum::load_optimizer_state(with(set_step), m2, opt), dimsum::optim::optimizer_error);
      CHECK_THROWS_WITH(dimsum::load_optimizer_state(with(set_step), m2, opt),
                        Catch::Contains("adamw: parameter 'W' has step count " + std::to_string(step)));
      unchanged();
    }
    // The largest count that can take one more step loads and steps.
    const std::int64_t last = std::numeric_limits<std::int64_t>::max() - 1;
    dimsum::load_optimizer_state(with([&](auto& c) { std::memcpy(c.tensors.at("W.step").data.data(), &last, 8); }), m2,
                                 opt);
    CHECK(opt.state<W_t>("W").step == last);
  }
  SECTION("a model file is not an optimizer file") {
    dimsum::save_safetensors(bad, m);
    CHECK_THROWS_WITH(dimsum::load_optimizer_state(bad, m2, opt),
                      Catch::Contains("has no metadata 'dimsum.optimizer'; it was not written by save_optimizer_state"));
    unchanged();
  }
}

TEST_CASE("optim_checkpoint: saving before the first step, and a failed save leaves the old file intact") {
  const test::scoped_dir dir("optim_state_save");
  const std::string path = (dir / "optimizer.safetensors").string();
  auto m = initial<double>();
  dimsum::optim::sgd fresh({.lr = 0.1, .momentum = 0.9});
  dimsum::save_optimizer_state(path, m, fresh);
  CHECK(dimsum::read_safetensors(path).tensors.empty());
  dimsum::optim::sgd opt({.lr = 0.2});
  run_steps(opt, m, 0, 1);
  dimsum::load_optimizer_state(path, m, opt);  // back to no state, momentum 0.9
  CHECK(opt.options.momentum == 0.9);
  CHECK(opt.states().size() == 0);

  const std::string old = file_bytes(path);
  run_steps(fresh, m, 0, 1);
  struct one_param {
    BOOST_HANA_DEFINE_STRUCT(one_param, (dimsum::parameter<double, col>, b));
  } other;
  other.b = dimsum::parameter<double, col>(dimsum::tensor<double, col>{});
  CHECK_THROWS_AS(dimsum::save_optimizer_state(path, other, fresh), dimsum::optim::optimizer_error);
  CHECK(file_bytes(path) == old);
  // Momentum switched on after the last step: no buffer to save yet.
  dimsum::optim::sgd plain({.lr = 0.1});
  run_steps(plain, m, 0, 1);
  plain.options.momentum = 0.9;
  CHECK_THROWS_WITH(dimsum::save_optimizer_state(path, m, plain), Catch::Contains("take a step before saving"));
  CHECK(file_bytes(path) == old);
}
