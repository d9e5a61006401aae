// optim/param_groups.hpp: parameter groups of AdamW and SGD against
// torch.optim with param groups and a LambdaLR schedule (ten steps, float64
// fixtures from tests/reference/make_optim_fixtures.py), the selectors, a
// parameter taken by two groups, and checkpoints of a grouped optimizer
// (io/optimizer_state.hpp: PyTorch's param_groups layout, resume equals an
// uninterrupted run bit for bit, groups that do not fit are refused).
// Frozen parameters (parameter::requires_grad): a frozen embedding under a
// trained head against torch's requires_grad_(False), the tape's frozen
// scope, and checkpoints that leave a frozen parameter's state out.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <dimsum/grad/grad.hpp>
#include <dimsum/io/npy.hpp>
#include <dimsum/io/optimizer_state.hpp>
#include <dimsum/nn/embedding.hpp>
#include <dimsum/nn/linear.hpp>
#include <dimsum/optim/optim.hpp>

#include "scoped_dir.hpp"

namespace {
DIMSUM_DIM(tok, 5);
DIMSUM_DIM(row, 3);
DIMSUM_DIM(col, 4);
DIMSUM_DIM(out, 2);
DIMSUM_DIM(step);

using dimsum::parameter;
namespace optim = dimsum::optim;

struct embedding_t {
  BOOST_HANA_DEFINE_STRUCT(embedding_t, (parameter<double, tok, col>, weight));
};
struct head_t {
  BOOST_HANA_DEFINE_STRUCT(head_t, (parameter<double, out, col>, weight), (parameter<double, out>, bias));
};
struct model {
  BOOST_HANA_DEFINE_STRUCT(model, (embedding_t, embed), (parameter<double, row, col>, W), (parameter<double, col>, b),
                           (head_t, head));
};

const std::string dir = std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/optim/";
constexpr std::size_t steps = 10;

// The tensor of a parameter's values stacked over steps: (step, its dims).
template <class T, dimsum::dimension... Ds>
dimsum::tensor<double, step, Ds...> stacked_of(const parameter<T, Ds...>&);

model initial() {
  model m;
  dimsum::nn::for_each_parameter(m, [](const std::string& name, auto& p) {
    using P = std::remove_cvref_t<decltype(p)>;
    p = P(dimsum::load_npy<typename P::tensor_type>(dir + "groups_init_" + name + ".npy"));
  });
  return m;
}

// Sets the fixture gradients of step s.
void set_grads(model& m, std::size_t s) {
  dimsum::nn::for_each_parameter(m, [&](const std::string& name, auto& p) {
    const auto g = dimsum::load_npy<decltype(stacked_of(p))>(dir + "groups_grads_" + name + ".npy");
    std::memcpy(p.grad.data(), g.data() + s * p.grad.size(), p.grad.size() * sizeof(double));
  });
}

// The schedule of the fixtures: warmup 3 steps, total 10, floor 0.1 of each group's lr.
const optim::warmup_cosine_schedule schedule{.base_lr = 1.0, .warmup_steps = 3, .total_steps = 10, .min_lr = 0.1};

template <class Opt>
void run_steps(Opt& opt, model& m, std::size_t from, std::size_t to) {
  for (std::size_t s = from; s < to; ++s) {
    set_grads(m, s);
    opt.set_lr_factor(schedule.factor(s));
    opt.step(m);
  }
}

// The groups of the fixtures: the matrices in group 0 (with decay), the
// rank-1 parameters in group 1, the embedding in group 2.
optim::adamw grouped_adamw() {
  optim::adamw opt({.lr = 0.02, .weight_decay = 0.1});
  opt.add_group(optim::rank_is(1)).options.weight_decay = 0.0;
  opt.add_group(optim::name_matches("embed.*"), {.lr = 0.05, .beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.0});
  return opt;
}
optim::sgd grouped_sgd() {
  optim::sgd opt({.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  opt.add_group(optim::rank_is(1)).options.weight_decay = 0.0;
  opt.add_group(optim::name_matches("embed.*"), {.lr = 0.2, .momentum = 0.5});
  return opt;
}

// Ten steps compared with torch's parameters after each step. float64
// agrees with torch's float64 to a few ulps per step (as in
// optim_optimizers.cpp).
template <class Opt>
void check_against_torch(Opt opt, const std::string& c) {
  model m = initial();
  for (std::size_t s = 0; s < steps; ++s) {
    run_steps(opt, m, s, s + 1);
    dimsum::nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
      const auto want = dimsum::load_npy<decltype(stacked_of(p))>(dir + "groups_" + c + "_" + name + ".npy");
      const double* w = want.data() + s * p.value.size();
      for (std::size_t i = 0; i < p.value.size(); ++i) {
        INFO(c << " " << name << " element " << i << " after step " << s);
        CHECK(std::abs(p.value.data()[i] - w[i]) <= 1e-14 + 1e-13 * std::abs(w[i]));
      }
    });
  }
}

// Every parameter's values, in visiting order (compared bit for bit).
std::vector<double> values(const model& m) {
  std::vector<double> v;
  dimsum::nn::for_each_parameter(
      m, [&](const std::string&, const auto& p) { v.insert(v.end(), p.value.data(), p.value.data() + p.value.size()); });
  return v;
}

std::string params_of(const dimsum::safetensors_contents& c, std::size_t g) {
  return c.metadata.at("dimsum.optimizer.param_groups." + std::to_string(g) + ".params");
}
}  // namespace

TEST_CASE("optim_groups: AdamW with decay on matrices only and a per-group schedule equals torch.optim.AdamW") {
  check_against_torch(grouped_adamw(), "adamw");
}

TEST_CASE("optim_groups: SGD with per-group momentum and decay equals torch.optim.SGD") {
  check_against_torch(grouped_sgd(), "sgd");
}

TEST_CASE("optim_groups: each parameter's group by name, rank and dims") {
  model m = initial();
  auto opt = grouped_adamw();
  CHECK(opt.group_count() == 3);
  CHECK(opt.group_of("embed.weight", m.embed.weight) == 2);
  CHECK(opt.group_of("W", m.W) == 0);
  CHECK(opt.group_of("b", m.b) == 1);
  CHECK(opt.group_of("head.weight", m.head.weight) == 0);
  CHECK(opt.group_of("head.bias", m.head.bias) == 1);
  CHECK(opt.group_options(1).weight_decay == 0.0);
  CHECK(opt.group_options(1).lr == 0.02);  // group 0's, as add_group(select) copies them
  CHECK(opt.group_options(2).beta1 == 0.8);
  CHECK_THROWS_WITH(opt.group_options(3), Catch::Contains("optimizer: no group 3 (there are 3)"));

  const dimsum::optim::parameter_info bias{"blocks.1.ln.bias", dimsum::dim_list<col>::names};
  CHECK(optim::name_matches("*.bias")(bias));
  CHECK(optim::name_matches("blocks.?.ln*")(bias));
  CHECK_FALSE(optim::name_matches("blocks.?.attn*")(bias));
  CHECK_FALSE(optim::name_matches("*.weight")(bias));
  CHECK(optim::name_matches("*")(bias));
  CHECK(optim::has_dim<col>()(bias));
  CHECK_FALSE(optim::has_dim<row>()(bias));
  CHECK((optim::rank_is(1) && !optim::name_matches("blocks.0.*"))(bias));
  CHECK_FALSE((optim::rank_is(2) || optim::has_dim<out>())(bias));
  CHECK(optim::selector([](const optim::parameter_info& p) { return p.name.size() == 16; })(bias));
}

TEST_CASE("optim_groups: a parameter two groups take is an optimizer_error, and the step changes nothing") {
  model m = initial();
  optim::adamw opt;
  opt.add_group(optim::rank_is(1));
  opt.add_group(optim::name_matches("head.*"));
  set_grads(m, 0);
  const model before = m;
  CHECK_THROWS_AS(opt.step(m), optim::optimizer_error);
  CHECK_THROWS_WITH(opt.step(m),
                    Catch::Contains("parameter 'head.bias' is taken by group 1 and group 2; a parameter belongs to one group"));
  CHECK(std::memcmp(m.W.value.data(), before.W.value.data(), 12 * sizeof(double)) == 0);
  CHECK(opt.states().size() == 0);
  // Options are checked when a group is added and at every step.
  CHECK_THROWS_WITH(opt.add_group(optim::rank_is(2), {.lr = -1.0}), Catch::Contains("adamw: invalid learning rate"));
  optim::adamw ok;
  ok.add_group(optim::rank_is(1)).options.beta2 = 1.0;
  CHECK_THROWS_WITH(ok.step(m), Catch::Contains("adamw: invalid beta2"));
  CHECK_THROWS_WITH(ok.set_lr_factor(-0.5), Catch::Contains("invalid lr factor"));
}

TEST_CASE("optim_groups: a grouped optimizer's checkpoint has PyTorch's param_groups and resumes bit for bit") {
  const test::scoped_dir tmp("optim_groups");
  const std::string path = (tmp / "optimizer.safetensors").string();
  model whole = initial();
  auto uninterrupted = grouped_adamw();
  run_steps(uninterrupted, whole, 0, steps);

  model first = initial();
  auto before = grouped_adamw();
  run_steps(before, first, 0, 4);
  dimsum::save_optimizer_state(path, first, before);
  const auto file = dimsum::read_safetensors(path);
  CHECK(file.metadata.at("dimsum.optimizer.param_groups") == "3");
  CHECK(params_of(file, 0) == "W,head.weight");
  CHECK(params_of(file, 1) == "b,head.bias");
  CHECK(params_of(file, 2) == "embed.weight");
  CHECK(file.metadata.at("dimsum.optimizer.param_groups.0.weight_decay") == "0.1");
  CHECK(file.metadata.at("dimsum.optimizer.param_groups.1.weight_decay") == "0");
  CHECK(file.metadata.at("dimsum.optimizer.param_groups.2.lr") == "0.05");
  CHECK(file.metadata.at("dimsum.optimizer.param_groups.2.beta1") == "0.8");

  // The same groups with other options: the file's replace them.
  optim::adamw after({.lr = 0.5});
  after.add_group(optim::rank_is(1));
  after.add_group(optim::name_matches("embed.*"));
  dimsum::load_optimizer_state(path, first, after);
  CHECK(after.group_options(0).lr == 0.02);
  CHECK(after.group_options(1).weight_decay == 0.0);
  CHECK(after.group_options(2).beta2 == 0.99);
  run_steps(after, first, 4, steps);
  CHECK(values(first) == values(whole));
}

TEST_CASE("optim_groups: a checkpoint whose groups do not fit the optimizer's is refused; one without groups loads") {
  const test::scoped_dir tmp("optim_groups_errors");
  const std::string path = (tmp / "optimizer.safetensors").string(), bad = (tmp / "bad.safetensors").string();
  model m = initial();
  auto saved = grouped_adamw();
  run_steps(saved, m, 0, 2);
  dimsum::save_optimizer_state(path, m, saved);

  optim::adamw plain({.lr = 0.5});
  CHECK_THROWS_WITH(dimsum::load_optimizer_state(path, m, plain),
                    Catch::Contains("holds 3 parameter groups but the optimizer has 1; add the same groups"));
  CHECK(plain.options.lr == 0.5);
  optim::adamw other({.lr = 0.5});
  other.add_group(optim::rank_is(1));
  other.add_group(optim::name_matches("head.weight"));
  CHECK_THROWS_WITH(dimsum::load_optimizer_state(path, m, other),
                    Catch::Contains("group 0 holds the parameters 'W,head.weight' in the checkpoint but "
                                    "'embed.weight,W' in the optimizer"));
  CHECK(other.options.lr == 0.5);

  // A file written before optimizers had groups: its options are
  // "dimsum.optimizer.<option>"; it loads into a one-group optimizer.
  optim::adamw one({.lr = 0.03, .weight_decay = 0.2});
  run_steps(one, m, 0, 1);
  dimsum::save_optimizer_state(path, m, one);
  auto c = dimsum::read_safetensors(path);
  std::vector<std::string> group_keys;
  for (const auto& [k, v] : c.metadata)
    if (k.rfind("dimsum.optimizer.param_groups", 0) == 0) group_keys.push_back(k);
  for (const auto& k : group_keys) {
    const std::string prefix = "dimsum.optimizer.param_groups.0.";
    if (k.rfind(prefix, 0) == 0 && k != prefix + "params") c.metadata["dimsum.optimizer." + k.substr(prefix.size())] = c.metadata[k];
    c.metadata.erase(k);
  }
  dimsum::write_safetensors(bad, c);
  optim::adamw loaded;
  dimsum::load_optimizer_state(bad, m, loaded);
  CHECK(loaded.options.lr == 0.03);
  CHECK(loaded.options.weight_decay == 0.2);
  CHECK(loaded.state<parameter<double, row, col>>("W").step == 1);
}

namespace {
DIMSUM_DIM(vocab, 6);
DIMSUM_DIM(d, 4);
DIMSUM_DIM(cls, 3);
DIMSUM_DIM(batch, 5);

struct frozen_model {
  BOOST_HANA_DEFINE_STRUCT(frozen_model, (dimsum::nn::embedding<double, vocab, d>, embed),
                           (dimsum::nn::linear<double, d, cls>, head));
};

frozen_model frozen_initial() {
  frozen_model m;
  m.head = dimsum::nn::linear<double, d, cls>(d{}, cls{});
  dimsum::nn::for_each_parameter(m, [](const std::string& name, auto& p) {
    using P = std::remove_cvref_t<decltype(p)>;
    p = P(dimsum::load_npy<typename P::tensor_type>(dir + "frozen_init_" + name + ".npy"));
  });
  return m;
}

// Row s of a (step, batch) fixture of integers stored as float64.
dimsum::tensor<std::int64_t, batch> ids_of(const std::string& name, std::size_t s) {
  const auto all = dimsum::load_npy<dimsum::tensor<double, step, batch>>(dir + name + ".npy");
  dimsum::tensor<std::int64_t, batch> r;
  for (std::size_t i = 0; i < 5; ++i) r.data()[i] = std::int64_t(all.data()[s * 5 + i]);
  return r;
}

// One training step of the fixtures' model; returns the loss.
template <class Opt>
double frozen_step(frozen_model& m, Opt& opt, std::size_t s) {
  dimsum::nn::zero_grad(m);
  dimsum::grad::tape t;
  auto logits = m.head(m.embed(t, ids_of("frozen_ids", s)));
  auto loss = dimsum::cross_entropy<cls>(logits, ids_of("frozen_targets", s));
  t.backward(loss);
  opt.step(m);
  return loss.item();
}
}  // namespace

TEST_CASE("optim_frozen: a frozen embedding under a trained head equals torch's requires_grad_(False) with AdamW") {
  frozen_model m = frozen_initial();
  dimsum::nn::set_requires_grad(m.embed, false);
  CHECK_FALSE(m.embed.weight.requires_grad);
  CHECK(m.head.weight.requires_grad);
  const auto embed0 = m.embed.weight.value;
  optim::adamw opt({.lr = 0.05, .weight_decay = 0.01});
  const auto losses = dimsum::load_npy<dimsum::tensor<double, step>>(dir + "frozen_loss.npy");
  for (std::size_t s = 0; s < 4; ++s) {
    INFO("step " << s);
    CHECK(std::abs(frozen_step(m, opt, s) - losses.data()[s]) <= 1e-13);
    dimsum::nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
      const auto want = dimsum::load_npy<decltype(stacked_of(p))>(dir + "frozen_" + name + ".npy");
      const double* w = want.data() + s * p.value.size();
      for (std::size_t i = 0; i < p.value.size(); ++i) {
        INFO(name << " element " << i);
        CHECK(std::abs(p.value.data()[i] - w[i]) <= 1e-14 + 1e-13 * std::abs(w[i]));
      }
    });
  }
  // The embedding: not moved (not even by weight decay), no gradient, no optimizer state.
  CHECK(std::memcmp(m.embed.weight.value.data(), embed0.data(), 24 * sizeof(double)) == 0);
  for (std::size_t i = 0; i < 24; ++i) CHECK(m.embed.weight.grad.data()[i] == 0.0);
  CHECK_THROWS_AS(dimsum::gradient(m.embed.weight), dimsum::grad::tape_error);
  CHECK_THROWS_WITH(dimsum::gradient(m.embed.weight), Catch::Contains("gradient(p): the parameter is frozen"));
  CHECK_FALSE(opt.states().has(0));
  CHECK(opt.state<parameter<double, cls, d>>("head.weight").step == 4);
}

TEST_CASE("optim_frozen: a frozen parameter watched is a constant; a frozen scope freezes every parameter watched in it") {
  frozen_model m = frozen_initial();
  m.head.weight.requires_grad = false;
  {
    dimsum::grad::tape t;
    auto [w, b] = t.watch(m.head.weight, *m.head.bias);
    CHECK_FALSE(w.requires_grad());
    CHECK(b.requires_grad());
    t.backward(dimsum::sum<cls, d>(w * w) + dimsum::sum<cls>(b * 3.0));
    for (std::size_t i = 0; i < 12; ++i) CHECK(m.head.weight.grad.data()[i] == 0.0);
    for (std::size_t i = 0; i < 3; ++i) CHECK(m.head.bias->grad.data()[i] == 3.0);
    CHECK_THROWS_WITH(dimsum::gradient(w), Catch::Contains("gradient(v): v is a frozen parameter watched as a constant"));
  }
  m.head.weight.requires_grad = true;
  dimsum::nn::zero_grad(m);
  dimsum::grad::tape t;
  dimsum::tensor<double, batch, d> x;
  x.fill(1.0);
  auto y = [&] {
    auto frozen = t.freeze_parameters();
    return m.head(t, x);  // the module watches its parameters: as constants here
  }();
  CHECK_FALSE(y.requires_grad());
  auto z = m.head(t, x);  // after the scope: trained
  CHECK(z.requires_grad());
  t.backward(dimsum::sum<batch, cls>(y + z));
  for (std::size_t i = 0; i < 12; ++i) CHECK(m.head.weight.grad.data()[i] == 5.0);  // from z only: sum over batch of x
}

TEST_CASE("optim_frozen: a checkpoint leaves out a frozen parameter's state and resumes bit for bit") {
  const test::scoped_dir tmp("optim_frozen");
  const std::string path = (tmp / "optimizer.safetensors").string();
  frozen_model whole = frozen_initial(), first = frozen_initial();
  dimsum::nn::set_requires_grad(whole.embed, false);
  dimsum::nn::set_requires_grad(first.embed, false);
  optim::adamw uninterrupted({.lr = 0.05, .weight_decay = 0.01}), before({.lr = 0.05, .weight_decay = 0.01});
  for (std::size_t s = 0; s < 4; ++s) frozen_step(whole, uninterrupted, s);
  for (std::size_t s = 0; s < 2; ++s) frozen_step(first, before, s);
  dimsum::save_optimizer_state(path, first, before);
  const auto file = dimsum::read_safetensors(path);
  CHECK(file.metadata.at("dimsum.optimizer.states") == "2");
  CHECK(file.tensors.count("embed.weight.exp_avg") == 0);
  CHECK(file.tensors.count("head.weight.exp_avg") == 1);
  optim::adamw after;
  dimsum::load_optimizer_state(path, first, after);
  for (std::size_t s = 2; s < 4; ++s) frozen_step(first, after, s);
  CHECK(std::memcmp(first.head.weight.value.data(), whole.head.weight.value.data(), 12 * sizeof(double)) == 0);
  CHECK(std::memcmp(first.head.bias->value.data(), whole.head.bias->value.data(), 3 * sizeof(double)) == 0);
  // Unfrozen, the embedding needs a state the file does not have.
  dimsum::nn::set_requires_grad(first.embed, true);
  optim::adamw other;
  CHECK_THROWS_WITH(dimsum::load_optimizer_state(path, first, other),
                    Catch::Contains("missing keys 'embed.weight.exp_avg'"));
  // Saved unfrozen before its first step: the state that step will start from.
  dimsum::save_optimizer_state(path, first, after);
  const auto unfrozen = dimsum::read_safetensors(path);
  CHECK(unfrozen.metadata.at("dimsum.optimizer.states") == "3");
  std::int64_t embed_step = -1;
  std::memcpy(&embed_step, unfrozen.tensors.at("embed.weight.step").data.data(), 8);
  CHECK(embed_step == 0);
}
