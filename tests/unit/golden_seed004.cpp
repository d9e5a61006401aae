// Seed 004 (self-attention v1/v2) against PyTorch: the weightless 6x3
// "Your journey starts with one step" example, the step-by-step x_2 query,
// SelfAttention_v1 (manual_seed(123)) and SelfAttention_v2 (manual_seed(789),
// without and with qkv_bias).
#include "golden.hpp"

#include <dimsum/nn/nn.hpp>
#include <dimsum/io/npy_dir.hpp>
#include <dimsum/nn/seeds/seeds.hpp>

using dimsum::tensor;
namespace nn = dimsum::nn;

namespace seed004 {
DIMSUM_DIM(token);
DIMSUM_DIM(k_token);
DIMSUM_DIM(d_in);
DIMSUM_DIM(d_out);
}  // namespace seed004
using namespace seed004;
using dimsum::einsum;
using dimsum::rename;
using dimsum::softmax;

TEST_CASE("golden seed 004: weightless self-attention", "[golden][seed004]") {
  auto inputs = golden::load<tensor<float, token, d_in>>("seed004/inputs.npy");
  auto keys = rename<token, k_token>(inputs);
  auto query = dimsum::select<token>(inputs, 1);  // inputs[1]
  auto scores_2 = dimsum::eval(einsum<"k_token d_in, d_in -> k_token">(keys, query));
  golden::check(scores_2, "seed004/weightless/attn_scores_2.npy");
  golden::check(scores_2 / dimsum::sum<k_token>(scores_2), "seed004/weightless/attn_scores_2_sumnorm.npy");
  auto weights_2 = dimsum::eval(softmax<k_token>(scores_2));
  golden::check(weights_2, "seed004/weightless/attn_weights_2.npy");
  golden::check(einsum<"k_token, k_token d_in -> d_in">(weights_2, keys), "seed004/weightless/context_vec_2.npy");
  auto scores = dimsum::eval(einsum<"token d_in, k_token d_in -> token k_token">(inputs, keys));  // inputs @ inputs.T
  golden::check(scores, "seed004/weightless/attn_scores.npy");
  auto weights = dimsum::eval(softmax<k_token>(scores));
  golden::check(weights, "seed004/weightless/attn_weights.npy");
  golden::check(einsum<"token k_token, k_token d_in -> token d_in">(weights, keys), "seed004/weightless/context_vecs.npy");
}

TEST_CASE("golden seed 004: trainable weights, step by step for x_2", "[golden][seed004]") {
  auto inputs = golden::load<tensor<float, token, d_in>>("seed004/inputs.npy");
  auto W_query = golden::load<tensor<float, d_in, d_out>>("seed004/sa_v1/W_query.npy");
  auto W_key = golden::load<tensor<float, d_in, d_out>>("seed004/sa_v1/W_key.npy");
  auto W_value = golden::load<tensor<float, d_in, d_out>>("seed004/sa_v1/W_value.npy");
  auto x_2 = dimsum::select<token>(inputs, 1);
  auto query_2 = dimsum::eval(einsum<"d_in, d_in d_out -> d_out">(x_2, W_query));
  auto key_2 = dimsum::eval(einsum<"d_in, d_in d_out -> d_out">(x_2, W_key));
  golden::check(query_2, "seed004/trainable_x2/query_2.npy");
  golden::check(key_2, "seed004/trainable_x2/key_2.npy");
  golden::check(einsum<"d_in, d_in d_out -> d_out">(x_2, W_value), "seed004/trainable_x2/value_2.npy");
  golden::check(einsum<"d_out, d_out -> ">(query_2, key_2), "seed004/trainable_x2/attn_score_22.npy");
  auto keys = dimsum::eval(einsum<"k_token d_in, d_in d_out -> k_token d_out">(rename<token, k_token>(inputs), W_key));
  auto values = dimsum::eval(einsum<"k_token d_in, d_in d_out -> k_token d_out">(rename<token, k_token>(inputs), W_value));
  auto scores_2 = dimsum::eval(einsum<"d_out, k_token d_out -> k_token">(query_2, keys));
  golden::check(scores_2, "seed004/trainable_x2/attn_scores_2.npy");
  auto weights_2 = dimsum::eval(softmax<k_token>(scores_2 / std::sqrt(2.0f)));
  golden::check(weights_2, "seed004/trainable_x2/attn_weights_2.npy");
  golden::check(einsum<"k_token, k_token d_out -> d_out">(weights_2, values), "seed004/trainable_x2/context_vec_2.npy");
}

namespace {
template <class Module>
void check_trace(const Module& m, const std::string& dir) {
  auto inputs = golden::load<tensor<float, token, d_in>>("seed004/inputs.npy");
  nn::seeds::self_attention_trace<float, token, d_out> t;
  auto context = m(inputs, &t);
  golden::check(t.queries, dir + "/queries.npy");
  golden::check(t.keys, dir + "/keys.npy");
  golden::check(t.values, dir + "/values.npy");
  golden::check(t.attn_scores, dir + "/attn_scores.npy");
  golden::check(t.attn_weights, dir + "/attn_weights.npy");
  golden::check(context, dir + "/context.npy");
}
}  // namespace

TEST_CASE("golden seed 004: SelfAttention_v1 with the manual_seed(123) weights", "[golden][seed004]") {
  nn::seeds::self_attention_v1<float, d_in, d_out> sa(d_in{3}, d_out{2});
  dimsum::load_npy_dir(golden::fixture("seed004/sa_v1"), sa, dimsum::non_strict);  // W_query.npy, ... by member name
  check_trace(sa, "seed004/sa_v1");
  // The seed's printed output, first and last rows.
  auto inputs = golden::load<tensor<float, token, d_in>>("seed004/inputs.npy");
  auto c = sa(inputs);
  CHECK(c(token{0}, d_out{0}) == Approx(0.2996).margin(1e-4));
  CHECK(c(token{0}, d_out{1}) == Approx(0.8053).margin(1e-4));
  CHECK(c(token{5}, d_out{1}) == Approx(0.8040).margin(1e-4));
}

TEST_CASE("golden seed 004: SelfAttention_v2 with the manual_seed(789) Linear layers", "[golden][seed004]") {
  for (bool bias : {false, true}) {
    const std::string dir = bias ? "seed004/sa_v2_bias" : "seed004/sa_v2";
    nn::seeds::self_attention_v2<float, d_in, d_out> sa(d_in{3}, d_out{2}, bias);
    // W_query.weight (and W_query.bias with qkv_bias) from W_query_weight.npy, ...
    dimsum::load_npy_dir(golden::fixture(dir), sa, dimsum::non_strict, dimsum::underscored);
    check_trace(sa, dir);
  }
  // The seed's printed v2 output, first row.
  nn::seeds::self_attention_v2<float, d_in, d_out> sa(d_in{3}, d_out{2});
  using lin = nn::linear<float, d_in, d_out>;
  sa.W_query = lin::load(golden::fixture("seed004/sa_v2/W_query_weight.npy"));
  sa.W_key = lin::load(golden::fixture("seed004/sa_v2/W_key_weight.npy"));
  sa.W_value = lin::load(golden::fixture("seed004/sa_v2/W_value_weight.npy"));
  auto c = sa(golden::load<tensor<float, token, d_in>>("seed004/inputs.npy"));
  CHECK(c(token{0}, d_out{0}) == Approx(-0.0739).margin(1e-4));
  CHECK(c(token{0}, d_out{1}) == Approx(0.0713).margin(1e-4));
  // The tokens are found by name: inputs laid out (d_in, token) give the
  // same context (token, d_out) as PyTorch.
  tensor<float, d_in, token> transposed = golden::load<tensor<float, token, d_in>>("seed004/inputs.npy");
  golden::check(sa(transposed), "seed004/sa_v2/context.npy");
}
