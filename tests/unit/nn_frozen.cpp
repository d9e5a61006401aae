// Parameters frozen by their type (frozen_parameter<T, Dims...>, spelled
// nn::frozen<parameter<T, Dims...>> in a model struct) and a user's model
// struct whose forward watches its parameters where it reads them (p(tape)):
// fine-tuning with the embedding frozen for three AdamW steps equals PyTorch
// float64 with embed.weight.requires_grad_(False)
// (tests/reference/make_frozen_fixtures.py); the frozen table is saved and
// loaded by name, skipped by clip_grad_norm and the optimizer's state; a
// plain struct of parameters gets the gradients of finite differences.
// The compile errors (gradient(p), p.grad, p.requires_grad = true) are
// tests/compile_fail/frozen_*.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

#include <dimsum/grad/grad.hpp>
#include <dimsum/io/npy.hpp>
#include <dimsum/io/npy_dir.hpp>
#include <dimsum/io/optimizer_state.hpp>
#include <dimsum/io/safetensors.hpp>
#include <dimsum/io/state_dict.hpp>
#include <dimsum/nn/embedding.hpp>
#include <dimsum/nn/linear.hpp>
#include <dimsum/nn/module.hpp>
#include <dimsum/optim/adamw.hpp>
#include <dimsum/optim/clip_grad_norm.hpp>

namespace {
DIMSUM_DIM(vocab);
DIMSUM_DIM(emb);
DIMSUM_DIM(hid);
DIMSUM_DIM(cls);
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);

namespace nn = dimsum::nn;
using dimsum::parameter;
using dimsum::tensor;

// The fixture script's model: the embedding table frozen in its type, a
// linear layer and a bare parameter, each declared once.
struct finetune {
  BOOST_HANA_DEFINE_STRUCT(finetune, (nn::frozen<parameter<double, vocab, emb>>, embed),
                           (nn::linear<double, emb, hid>, up), (parameter<double, hid, cls>, W_out));

  // logits = tanh(up(embed(ids))) @ W_out; embed(t) and W_out(t) watch
  // where they are read (the embedding as a constant), up watches its own.
  auto forward(dimsum::grad::tape& t, const tensor<std::int64_t, batch, posn>& ids) {
    auto x = dimsum::lookup<vocab>(embed(t), ids);
    return dimsum::einsum<"batch posn hid, hid cls -> batch posn cls">(dimsum::tanh(up(x)), W_out(t));
  }
};

std::string fixture(const std::string& name) {
  return std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/nn/frozen/" + name;
}

finetune load_finetune() {
  finetune m;
  m.embed = tensor<double, vocab, emb>(vocab{7}, emb{4});
  m.up = nn::linear<double, emb, hid>(emb{4}, hid{5});
  m.W_out = tensor<double, hid, cls>(hid{5}, cls{3});
  dimsum::load_npy_dir(fixture("params"), m);
  return m;
}

template <class T>
void require_close(const T& got, const std::string& file, double tol = 1e-12) {
  const auto want = dimsum::load_npy<std::remove_cvref_t<T>>(file);
  REQUIRE(got.extents() == want.extents());
  for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(got.data()[i] == Approx(want.data()[i]).margin(tol).epsilon(1e-10));
}

double run_loss(finetune& m, dimsum::grad::tape& t) {
  const auto ids = dimsum::load_npy<tensor<std::int64_t, batch, posn>>(fixture("ids.npy"));
  const auto targets = dimsum::load_npy<tensor<std::int64_t, batch, posn>>(fixture("targets.npy"));
  auto loss = dimsum::cross_entropy<cls>(m.forward(t, ids), targets);
  t.backward(loss);
  return loss.item();
}

}  // namespace

TEST_CASE("nn_frozen: nn::frozen<parameter<...>> is frozen_parameter, a parameter to reflection", "[nn][frozen]") {
  STATIC_REQUIRE(std::is_same_v<nn::frozen<parameter<double, vocab, emb>>, dimsum::frozen_parameter<double, vocab, emb>>);
  STATIC_REQUIRE(dimsum::is_parameter_v<dimsum::frozen_parameter<double, vocab, emb>>);
  STATIC_REQUIRE(dimsum::is_frozen_parameter_v<const dimsum::frozen_parameter<double, vocab, emb>&>);
  STATIC_REQUIRE(!dimsum::is_frozen_parameter_v<parameter<double, vocab, emb>>);
  // the gradient takes no room
  STATIC_REQUIRE(sizeof(dimsum::frozen_parameter<double, vocab, emb>) == sizeof(tensor<double, vocab, emb>));
  const dimsum::frozen_parameter<double, vocab, emb> p(vocab{7}, emb{4});
  CHECK(!p.requires_grad);
  finetune m = load_finetune();
  CHECK(nn::parameter_count(m) == 7 * 4 + 5 * 4 + 5 + 5 * 3);
  std::vector<std::string> names;
  nn::for_each_parameter(m, [&](const std::string& n, const auto&) { names.push_back(n); });
  CHECK(names == std::vector<std::string>{"embed", "up.weight", "up.bias", "W_out"});
  const std::string table = nn::summary(m);
  const std::size_t row = table.find("\nembed ");
  REQUIRE(row != std::string::npos);
  CHECK(table.substr(row, table.find('\n', row + 1) - row).find("(vocab, emb)  (7, 4)") != std::string::npos);
  nn::set_requires_grad(m, false);  // a frozen type stays frozen, the others follow the flag
  CHECK(!m.up.weight.requires_grad);
  nn::set_requires_grad(m, true);
  CHECK(m.up.weight.requires_grad);
  CHECK(!m.embed.requires_grad);
}

TEST_CASE("nn_frozen: a frozen embedding is a constant on the tape; the gradients are torch's", "[nn][frozen]") {
  finetune m = load_finetune();
  const tensor<double, vocab, emb> before = m.embed.value;
  dimsum::grad::tape t;
  auto e = m.embed(t);
  CHECK(!e.requires_grad());
  STATIC_REQUIRE(std::is_same_v<decltype(e), dimsum::grad::frozen_var<double, vocab, emb>>);  // gradient(e): a compile error
  CHECK(&e.value() == &m.embed.value);  // read in place
  run_loss(m, t);
  require_close(m.up.weight.grad, fixture("grads/up.weight.npy"));
  require_close(m.up.bias->grad, fixture("grads/up.bias.npy"));
  require_close(m.W_out.grad, fixture("grads/W_out.npy"));
  require_close(dimsum::gradient(m.W_out), fixture("grads/W_out.npy"));
  for (std::size_t i = 0; i < before.size(); ++i) REQUIRE(m.embed.value.data()[i] == before.data()[i]);
}

TEST_CASE("nn_frozen: three AdamW steps with the embedding frozen equal torch's requires_grad_(False)",
          "[nn][frozen][optim]") {
  finetune m = load_finetune();
  dimsum::optim::adamw opt({.lr = 0.05, .weight_decay = 0.1});
  const auto losses = dimsum::load_npy<tensor<double, batch>>(fixture("losses.npy"));
  for (std::size_t step = 0; step < 3; ++step) {
    nn::zero_grad(m);
    dimsum::grad::tape t;
    const double loss = run_loss(m, t);
    CHECK(loss == Approx(losses.data()[step]).epsilon(1e-12));
    opt.step(m);
  }
  require_close(m.embed.value, fixture("final/embed.npy"), 0.0);  // untouched: no decay either
  require_close(m.up.weight.value, fixture("final/up.weight.npy"));
  require_close(m.up.bias->value, fixture("final/up.bias.npy"));
  require_close(m.W_out.value, fixture("final/W_out.npy"));
  // The optimizer keeps no state for it (its checkpoint has no embed.* key).
  using frozen_table = dimsum::frozen_parameter<double, vocab, emb>;
  CHECK_THROWS_AS(opt.state<frozen_table>("embed"), dimsum::optim::optimizer_error);
  const auto dir = std::filesystem::temp_directory_path() / "dimsum_nn_frozen";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "optimizer.safetensors").string();
  dimsum::save_optimizer_state(path, m, opt);
  const auto saved = dimsum::read_safetensors(path);
  CHECK(saved.tensors.count("W_out.exp_avg") == 1);
  CHECK(saved.tensors.count("embed.exp_avg") == 0);
  dimsum::optim::adamw fresh({.lr = 0.05, .weight_decay = 0.1});
  dimsum::load_optimizer_state(path, m, fresh);
  const auto& a = opt.state<parameter<double, hid, cls>>("W_out");
  const auto& b = fresh.state<parameter<double, hid, cls>>("W_out");
  for (std::size_t i = 0; i < a.exp_avg.size(); ++i) REQUIRE(a.exp_avg.data()[i] == b.exp_avg.data()[i]);
  std::filesystem::remove_all(dir);
}

TEST_CASE("nn_frozen: checkpoints save and load a frozen parameter under its name", "[nn][frozen][io]") {
  finetune m = load_finetune();
  const auto dir = std::filesystem::temp_directory_path() / "dimsum_nn_frozen_ckpt";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "model.safetensors").string();
  dimsum::save_safetensors(path, m);
  CHECK(dimsum::read_safetensors(path).tensors.count("embed") == 1);
  finetune fresh;
  fresh.embed = tensor<double, vocab, emb>(vocab{7}, emb{4});
  fresh.up = nn::linear<double, emb, hid>(emb{4}, hid{5});
  fresh.W_out = tensor<double, hid, cls>(hid{5}, cls{3});
  dimsum::load_safetensors(path, fresh);
  require_close(fresh.embed.value, fixture("params/embed.npy"), 0.0);
  require_close(fresh.W_out.value, fixture("params/W_out.npy"), 0.0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("nn_frozen: clip_grad_norm leaves a frozen parameter out", "[nn][frozen][optim]") {
  finetune m = load_finetune();
  dimsum::grad::tape t;
  run_loss(m, t);
  // The norm over the trainable gradients, by a plain loop over torch's.
  double want = 0;
  const auto gw = dimsum::load_npy<tensor<double, hid, emb>>(fixture("grads/up.weight.npy"));
  const auto gb = dimsum::load_npy<tensor<double, hid>>(fixture("grads/up.bias.npy"));
  const auto go = dimsum::load_npy<tensor<double, hid, cls>>(fixture("grads/W_out.npy"));
  for (std::size_t i = 0; i < gw.size(); ++i) want += gw.data()[i] * gw.data()[i];
  for (std::size_t i = 0; i < gb.size(); ++i) want += gb.data()[i] * gb.data()[i];
  for (std::size_t i = 0; i < go.size(); ++i) want += go.data()[i] * go.data()[i];
  CHECK(dimsum::optim::clip_grad_norm(m, 1e9) == Approx(std::sqrt(want)).epsilon(1e-12));
}

namespace {
// A user's struct of bare parameters, declared once: the forward reads
// each parameter through p(tape), with no watch list.
struct two_layer {
  BOOST_HANA_DEFINE_STRUCT(two_layer, (parameter<double, emb, hid>, W1), (parameter<double, hid>, b1),
                           (parameter<double, hid, cls>, W2));

  auto forward(dimsum::grad::tape& t, const tensor<double, batch, emb>& x) {
    auto h = dimsum::tanh(dimsum::einsum<"batch emb, emb hid -> batch hid">(x, W1(t)) + b1(t));
    return dimsum::einsum<"batch hid, hid cls -> batch cls">(h, W2(t));
  }
  // The same loss on plain tensors, for finite differences.
  double loss_value(const tensor<double, batch, emb>& x, const tensor<double, batch, cls>& r) const {
    const tensor<double, batch, hid> h =
        dimsum::tanh(dimsum::einsum<"batch emb, emb hid -> batch hid">(x, W1.value) + b1.value);
    const tensor<double, batch, cls> y = dimsum::einsum<"batch hid, hid cls -> batch cls">(h, W2.value);
    return dimsum::eval(dimsum::sum<batch, cls>(y * r)).item();
  }
};
}  // namespace

TEST_CASE("nn_frozen: a struct of parameters read with p(tape) gets finite-difference gradients", "[nn][grad]") {
  two_layer m;
  m.W1 = tensor<double, emb, hid>::random_normal(1, emb{3}, hid{4});
  m.b1 = tensor<double, hid>::random_normal(2, hid{4});
  m.W2 = tensor<double, hid, cls>::random_normal(3, hid{4}, cls{2});
  const auto x = tensor<double, batch, emb>::random_normal(4, batch{2}, emb{3});
  const auto r = tensor<double, batch, cls>::random_normal(5, batch{2}, cls{2});
  {
    dimsum::grad::tape t;
    t.backward(dimsum::sum<batch, cls>(m.forward(t, x) * r));
  }
  auto check = [&](auto& p) {
    for (std::size_t i = 0; i < p.value.size(); ++i) {
      const double keep = p.value.data()[i], h = 1e-6;
      p.value.data()[i] = keep + h;
      const double up = m.loss_value(x, r);
      p.value.data()[i] = keep - h;
      const double down = m.loss_value(x, r);
      p.value.data()[i] = keep;
      REQUIRE(p.grad.data()[i] == Approx((up - down) / (2 * h)).epsilon(1e-7).margin(1e-9));
    }
  };
  check(m.W1);
  check(m.b1);
  check(m.W2);
}

namespace {
// The same model with the embedding an nn module frozen by its type.
struct finetune_module {
  BOOST_HANA_DEFINE_STRUCT(finetune_module, (nn::frozen<nn::embedding<double, vocab, emb>>, embed),
                           (nn::linear<double, emb, hid>, up), (parameter<double, hid, cls>, W_out));

  auto forward(dimsum::grad::tape& t, const tensor<std::int64_t, batch, posn>& ids) {
    return dimsum::einsum<"batch posn hid, hid cls -> batch posn cls">(dimsum::tanh(up(embed(t, ids))), W_out(t));
  }
};
}  // namespace

TEST_CASE("nn_frozen: nn::frozen<nn::embedding> fine-tunes as torch's requires_grad_(False), saved by name",
          "[nn][frozen][optim]") {
  STATIC_REQUIRE(std::is_same_v<nn::frozen<nn::embedding<double, vocab, emb>>,
                                nn::frozen_module<nn::embedding<double, vocab, emb>>>);
  const finetune loaded = load_finetune();
  finetune_module m;
  m.embed = nn::embedding<double, vocab, emb>(vocab{7}, emb{4});
  m.embed.update([&](auto& e) { e.weight = loaded.embed.value; });
  m.up = loaded.up;
  m.W_out = loaded.W_out.value;
  CHECK(!m.embed->weight.requires_grad);
  nn::set_requires_grad(m, true);  // the wrapper's type keeps it frozen
  CHECK(!m.embed->weight.requires_grad);
  CHECK(m.up.weight.requires_grad);
  std::vector<std::string> names;
  nn::for_each_parameter(m, [&](const std::string& n, const auto&) { names.push_back(n); });
  CHECK(names == std::vector<std::string>{"embed.weight", "up.weight", "up.bias", "W_out"});

  dimsum::optim::adamw opt({.lr = 0.05, .weight_decay = 0.1});
  const auto ids = dimsum::load_npy<tensor<std::int64_t, batch, posn>>(fixture("ids.npy"));
  const auto targets = dimsum::load_npy<tensor<std::int64_t, batch, posn>>(fixture("targets.npy"));
  for (int step = 0; step < 3; ++step) {
    nn::zero_grad(m);
    dimsum::grad::tape t;
    t.backward(dimsum::cross_entropy<cls>(m.forward(t, ids), targets));
    if (step == 0) {
      require_close(m.W_out.grad, fixture("grads/W_out.npy"));
      CHECK_THROWS_AS(dimsum::gradient(m.embed->weight), dimsum::grad::tape_error);
    }
    opt.step(m);
  }
  require_close(m.embed->weight.value, fixture("final/embed.npy"), 0.0);
  require_close(m.up.weight.value, fixture("final/up.weight.npy"));
  require_close(m.W_out.value, fixture("final/W_out.npy"));

  const auto dir = std::filesystem::temp_directory_path() / "dimsum_nn_frozen_module";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "model.safetensors").string();
  dimsum::save_safetensors(path, m);
  finetune_module fresh;
  fresh.embed = nn::embedding<double, vocab, emb>(vocab{7}, emb{4});
  fresh.up = nn::linear<double, emb, hid>(emb{4}, hid{5});
  fresh.W_out = tensor<double, hid, cls>(hid{5}, cls{3});
  dimsum::load_safetensors(path, fresh);
  require_close(fresh.embed->weight.value, fixture("final/embed.npy"), 0.0);
  CHECK(!fresh.embed->weight.requires_grad);
  std::filesystem::remove_all(dir);
}

TEST_CASE("nn_frozen: the var of a frozen parameter is a constant operand of einsum", "[nn][frozen][grad]") {
  dimsum::frozen_parameter<double, emb, hid> F(tensor<double, emb, hid>::random_normal(6, emb{3}, hid{4}));
  const auto x = tensor<double, batch, emb>::random_normal(7, batch{2}, emb{3});
  dimsum::grad::tape t;
  auto xv = t.watch(x);
  auto y = dimsum::einsum<"batch emb, emb hid -> batch hid">(xv, F(t));
  t.backward(dimsum::sum<batch, hid>(y * y));
  // d/dx sum(y^2) = 2 y F^T, by plain loops
  const auto& gx = dimsum::gradient(xv);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t e = 0; e < 3; ++e) {
      double want = 0;
      for (std::size_t h = 0; h < 4; ++h) {
        double yh = 0;
        for (std::size_t k = 0; k < 3; ++k) yh += x(batch{b}, emb{k}) * F.value(emb{k}, hid{h});
        want += 2 * yh * F.value(emb{e}, hid{h});
      }
      CHECK(gx(batch{b}, emb{e}) == Approx(want).epsilon(1e-13));
    }
}
