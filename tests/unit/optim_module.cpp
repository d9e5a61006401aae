// nn/module.hpp: parameters found by reflection (Hana struct adaptation),
// with dotted names through nested modules, std::array and std::vector.
#include <catch2/catch.hpp>

#include <array>
#include <string>
#include <utility>
#include <vector>

#include <dimsum/nn/module.hpp>

namespace {
DIMSUM_DIM(vocab);
DIMSUM_DIM(d_model);
DIMSUM_DIM(d_head, 4);
DIMSUM_DIM(nheads);

using dimsum::parameter;

struct attention {
  BOOST_HANA_DEFINE_STRUCT(attention, (parameter<float, nheads, d_model, d_head>, W_Q),
                           (parameter<float, nheads, d_head>, b_Q));
};
struct block {
  BOOST_HANA_DEFINE_STRUCT(block, (attention, attn), (parameter<float, d_model>, ln_w), (int, not_a_parameter),
                           (dimsum::tensor<float, d_model>, buffer));
};
struct model {
  BOOST_HANA_DEFINE_STRUCT(model, (parameter<float, vocab, d_model>, embed), (std::array<block, 2>, blocks),
                           (std::vector<parameter<float, d_model>>, extra), (std::vector<int>, ids));
};

// A struct adapted after its definition.
struct adapted {
  parameter<double, d_model> w;
  double scale = 1.0;
};
}  // namespace
BOOST_HANA_ADAPT_STRUCT(adapted, w, scale);

namespace {
model make_model() {
  model m;
  m.embed = parameter<float, vocab, d_model>(vocab{5}, d_model{3});
  for (auto& b : m.blocks) {
    b.attn.W_Q = parameter<float, nheads, d_model, d_head>(nheads{2}, d_model{3});
    b.attn.b_Q = parameter<float, nheads, d_head>(nheads{2});
    b.ln_w = parameter<float, d_model>(d_model{3});
  }
  m.extra.resize(2, parameter<float, d_model>(d_model{3}));
  return m;
}
}  // namespace

TEST_CASE("optim_module: for_each_parameter visits every parameter with its dotted name in order") {
  model m = make_model();
  std::vector<std::pair<std::string, std::size_t>> seen;
  dimsum::nn::for_each_parameter(m, [&](const std::string& name, auto& p) { seen.emplace_back(name, p.value.size()); });
  const std::vector<std::pair<std::string, std::size_t>> expected{
      {"embed", 15},          {"blocks.0.attn.W_Q", 24}, {"blocks.0.attn.b_Q", 8}, {"blocks.0.ln_w", 3},
      {"blocks.1.attn.W_Q", 24}, {"blocks.1.attn.b_Q", 8}, {"blocks.1.ln_w", 3},  {"extra.0", 3},
      {"extra.1", 3}};
  CHECK(seen == expected);
}

TEST_CASE("optim_module: the visitor gets the parameter itself, const through a const module") {
  model m = make_model();
  dimsum::nn::for_each_parameter(m, [](const std::string&, auto& p) { p.value.fill(2.0f); });
  CHECK(m.blocks[1].attn.W_Q.value(nheads{1}, d_model{2}, d_head{3}) == 2.0f);
  const model& c = m;
  dimsum::nn::for_each_parameter(c, [](const std::string&, auto& p) {
    STATIC_REQUIRE(std::is_const_v<std::remove_reference_t<decltype(p)>>);
  });
}

TEST_CASE("optim_module: parameter_count sums the element counts") {
  const model m = make_model();
  CHECK(dimsum::nn::parameter_count(m) == 15 + 2 * (24 + 8 + 3) + 2 * 3);
}

TEST_CASE("optim_module: zero_grad zeroes every gradient and sizes empty ones") {
  model m = make_model();
  m.embed.grad.fill(1.0f);
  m.blocks[0].attn.W_Q.grad = {};  // default extents: d_head = 4, the others 0
  dimsum::nn::zero_grad(m);
  CHECK(m.embed.grad(vocab{4}, d_model{2}) == 0.0f);
  CHECK(m.blocks[0].attn.W_Q.grad.extents() == std::array<std::size_t, 3>{2, 3, 4});
}

TEST_CASE("optim_module: BOOST_HANA_ADAPT_STRUCT works as well as DEFINE_STRUCT") {
  adapted a;
  a.w = parameter<double, d_model>(d_model{7});
  std::vector<std::string> names;
  dimsum::nn::for_each_parameter(a, [&](const std::string& name, auto&) { names.push_back(name); });
  CHECK(names == std::vector<std::string>{"w"});
  CHECK(dimsum::nn::parameter_count(a) == 7);
  STATIC_REQUIRE(dimsum::nn::module<adapted>);
  STATIC_REQUIRE(!dimsum::nn::module<int>);
}

TEST_CASE("optim_module: parameter_dim_names lists the dims by name") {
  CHECK(dimsum::nn::parameter_dim_names<parameter<float, nheads, d_model, d_head>>() == "nheads d_model d_head");
  CHECK(dimsum::nn::parameter_dim_names<parameter<float, d_model>>(", ") == "d_model");
  // A rank-0 parameter (a learned scale) has no dims; this compiles under
  // -Werror (the separator was an unused parameter there).
  CHECK(dimsum::nn::parameter_dim_names<parameter<float>>(", ").empty());
  struct scaled {
    BOOST_HANA_DEFINE_STRUCT(scaled, (parameter<float>, scale));
  } m;
  m.scale = parameter<float>(dimsum::tensor<float>{});
  CHECK(dimsum::nn::summary(m) ==
        "name   dims  extents  count\n"
        "scale  ()    ()       1\n"
        "total                 1\n");
}

TEST_CASE("optim_module: summary prints names, dims, extents and counts") {
  adapted a;
  a.w = parameter<double, d_model>(d_model{7});
  struct two {
    BOOST_HANA_DEFINE_STRUCT(two, (adapted, inner), (parameter<float, vocab, d_head>, head));
  } t;
  t.inner = a;
  t.head = parameter<float, vocab, d_head>(vocab{10});
  const std::string expected =
      "name     dims             extents  count\n"
      "inner.w  (d_model)        (7)      7\n"
      "head     (vocab, d_head)  (10, 4)  40\n"
      "total                              47\n";
  CHECK(dimsum::nn::summary(t) == expected);
}

TEST_CASE("optim_module: a std::vector of modules is visited as name.i.member") {
  struct stack_of_blocks {
    BOOST_HANA_DEFINE_STRUCT(stack_of_blocks, (std::vector<attention>, layers));
  } s;
  s.layers.resize(3);
  for (auto& l : s.layers) {
    l.W_Q = parameter<float, nheads, d_model, d_head>(nheads{1}, d_model{1});
    l.b_Q = parameter<float, nheads, d_head>(nheads{1});
  }
  std::vector<std::string> names;
  dimsum::nn::for_each_parameter(s, [&](const std::string& name, auto&) { names.push_back(name); });
  CHECK(names == std::vector<std::string>{"layers.0.W_Q", "layers.0.b_Q", "layers.1.W_Q", "layers.1.b_Q",
                                          "layers.2.W_Q", "layers.2.b_Q"});
  CHECK(dimsum::nn::parameter_count(s) == 3 * (4 + 4));
}
