// The nn/ modules as Hana structs: a user's model written as a struct of
// nn::linear, nn::embedding, nn::layer_norm and nn::multi_head_attention
// members gives nn/module.hpp's visitor every parameter with its dotted
// name (PyTorch's state_dict keys), a bias-less linear has no "bias" key,
// and zero_grad, parameter_count, summary and a .safetensors round trip
// work on it with no hand-written list.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include <dimsum/io/state_dict.hpp>
#include <dimsum/nn/nn.hpp>
#include <dimsum/nn/seeds/seeds.hpp>

namespace {
using dimsum::tensor;
namespace nn = dimsum::nn;
DIMSUM_DIM(vocab);
DIMSUM_DIM(d_model);
DIMSUM_DIM(d_mlp);
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(nheads);
DIMSUM_DIM(dim_k);

struct block {
  BOOST_HANA_DEFINE_STRUCT(block, (nn::layer_norm<float, d_model>, ln), (nn::linear<float, d_model, d_mlp>, up),
                           (nn::linear<float, d_mlp, d_model>, down));
};
struct tiny_lm {
  BOOST_HANA_DEFINE_STRUCT(tiny_lm, (nn::embedding<float, vocab, d_model>, embed), (std::vector<block>, blocks),
                           (nn::layer_norm<float, d_model>, ln_f), (nn::linear<float, d_model, vocab>, head));
};

tiny_lm make(std::size_t layers) {
  tiny_lm m;
  m.embed = nn::embedding<float, vocab, d_model>(vocab{11}, d_model{4});
  m.embed.reset_parameters(1);
  for (std::size_t i = 0; i < layers; ++i) {
    block b{nn::layer_norm<float, d_model>(d_model{4}), nn::linear<float, d_model, d_mlp>(d_model{4}, d_mlp{8}),
            nn::linear<float, d_mlp, d_model>(d_mlp{8}, d_model{4})};
    b.up.reset_parameters(10 + i);
    b.down.reset_parameters(20 + i);
    m.blocks.push_back(std::move(b));
  }
  m.ln_f = nn::layer_norm<float, d_model>(d_model{4});
  m.head = nn::linear<float, d_model, vocab>(d_model{4}, vocab{11}, false);  // no bias, as GPT's LM head
  m.head.reset_parameters(30);
  return m;
}

std::vector<std::string> names_of(const auto& m) {
  std::vector<std::string> names;
  nn::for_each_parameter(m, [&](const std::string& name, const auto&) { names.push_back(name); });
  return names;
}
}  // namespace

TEST_CASE("nn modules: a struct of modules gives PyTorch's dotted state-dict keys", "[nn_modules]") {
  const tiny_lm m = make(2);
  const std::vector<std::string> want{"embed.weight",         "blocks.0.ln.weight",   "blocks.0.ln.bias",
                                      "blocks.0.up.weight",   "blocks.0.up.bias",     "blocks.0.down.weight",
                                      "blocks.0.down.bias",   "blocks.1.ln.weight",   "blocks.1.ln.bias",
                                      "blocks.1.up.weight",   "blocks.1.up.bias",     "blocks.1.down.weight",
                                      "blocks.1.down.bias",   "ln_f.weight",          "ln_f.bias",
                                      "head.weight"};
  CHECK(names_of(m) == want);
  // 11*4 + 2 * (4 + 4 + 8*4 + 8 + 4*8 + 4) + 4 + 4 + 11*4, counted by hand.
  CHECK(nn::parameter_count(m) == 44 + 2 * 84 + 8 + 44);
  const std::string s = nn::summary(m);
  CHECK(s.find("blocks.1.down.weight  (d_model, d_mlp)  (4, 8)") != std::string::npos);
  CHECK(s.find("head.bias") == std::string::npos);
}

TEST_CASE("nn modules: zero_grad and a .safetensors round trip through the modules' parameters", "[nn_modules]") {
  tiny_lm m = make(1);
  m.blocks[0].up.weight.grad.fill(3.0f);
  nn::zero_grad(m);
  CHECK(m.blocks[0].up.weight.grad.data()[5] == 0.0f);

  const auto path = (std::filesystem::temp_directory_path() / "dimsum_nn_modules.safetensors").string();
  dimsum::save_safetensors(path, m);
  tiny_lm fresh = make(1);
  fresh.blocks[0].up.reset_parameters(99);  // different numbers before the load
  fresh.ln_f.weight.value.fill(5.0f);
  dimsum::load_safetensors(path, fresh);
  CHECK(fresh.blocks[0].up.weight.value.data()[7] == m.blocks[0].up.weight.value.data()[7]);
  CHECK(fresh.blocks[0].up.bias->value.data()[3] == m.blocks[0].up.bias->value.data()[3]);
  CHECK(fresh.ln_f.weight.value.data()[2] == 1.0f);
  CHECK(fresh.embed.weight.value.data()[40] == m.embed.weight.value.data()[40]);
  // A model whose head has a bias does not load the bias-less checkpoint.
  tiny_lm with_bias = make(1);
  with_bias.head = nn::linear<float, d_model, vocab>(d_model{4}, vocab{11});
  CHECK_THROWS_WITH(dimsum::load_safetensors(path, with_bias), Catch::Contains("missing keys 'head.bias'"));
  std::filesystem::remove(path);

  // The forward passes still run on tensors.
  tensor<std::int64_t, batch, posn> ids(batch{2}, posn{3});
  tensor<float, batch, posn, d_model> x = m.embed(ids);
  tensor<float, batch, posn, vocab> logits = m.head(m.ln_f(m.blocks[0].down(m.blocks[0].up(m.blocks[0].ln(x)))));
  CHECK(logits.extent<vocab>() == 11);
}

TEST_CASE("nn modules: multi_head_attention and the seed modules have their seeds' keys", "[nn_modules]") {
  nn::multi_head_attention<float, d_model, nheads, dim_k> mha(nheads{2}, d_model{4});
  CHECK(names_of(mha) == std::vector<std::string>{"q_linear.weight", "q_linear.bias", "k_linear.weight",
                                                  "k_linear.bias", "v_linear.weight", "v_linear.bias", "out.weight",
                                                  "out.bias"});
  nn::seeds::char_head<float, d_model, dim_k> head(d_model{4}, dim_k{3});
  CHECK(names_of(head) == std::vector<std::string>{"key.weight", "query.weight", "value.weight"});
  nn::seeds::self_attention_v2<float, d_model, dim_k> sa(d_model{4}, dim_k{3}, true);
  CHECK(nn::parameter_count(sa) == 3 * (4 * 3 + 3));
}
