// Seed 003 (multi-head and cross-attention with padding masks) against
// PyTorch: the manual_seed(42) scaled-dot-product demo, and
// MultiHeadAttention for self- and cross-attention, with a padding mask
// (batch, 1, kv_seq) broadcast by name and with a causal target mask.
#include "golden.hpp"

#include <dimsum/nn/nn.hpp>

using dimsum::tensor;
namespace nn = dimsum::nn;

namespace seed003 {
DIMSUM_DIM(batch);
DIMSUM_DIM(nheads);
DIMSUM_DIM(q_seq);
DIMSUM_DIM(kv_seq);
DIMSUM_DIM(emb_dim);
DIMSUM_DIM(dim_k);
DIMSUM_DIM(one);  // the size-1 axis of the seed's (batch, 1, kv_seq) mask
struct features : dimsum::dim<"nheads_dim_k"> {};
}  // namespace seed003
using namespace seed003;

TEST_CASE("golden seed 003: the manual_seed(42) scaled dot-product demo", "[golden][seed003]") {
  auto q = golden::load<tensor<float, batch, nheads, q_seq, emb_dim>>("seed003/demo/q.npy");
  auto k = golden::load<tensor<float, batch, nheads, kv_seq, emb_dim>>("seed003/demo/k.npy");
  auto v = golden::load<tensor<float, batch, nheads, kv_seq, emb_dim>>("seed003/demo/v.npy");
  auto r = nn::dot_product_attention<q_seq, kv_seq, emb_dim>(q, k, v);
  golden::check(r.scores, "seed003/demo/scores.npy");
  golden::check(r.weights, "seed003/demo/softscores.npy");
  golden::check(r.output, "seed003/demo/output.npy");
  // The seed's aside: softmax over the query positions instead (dim=-2).
  golden::check(dimsum::softmax<q_seq>(r.scores), "seed003/demo/softscores_dim_q.npy");
}

namespace {
using mha_t = nn::multi_head_attention<float, emb_dim, nheads, dim_k, features>;

mha_t load_mha() {
  mha_t m(nheads{6}, emb_dim{5}, dim_k{4}, 0.0);
  auto lin = [](const std::string& n) {
    return std::pair{golden::fixture("seed003/mha/" + n + "_weight.npy"), golden::fixture("seed003/mha/" + n + "_bias.npy")};
  };
  auto [qw, qb] = lin("q_linear");
  auto [kw, kb] = lin("k_linear");
  auto [vw, vb] = lin("v_linear");
  auto [ow, ob] = lin("out");
  m.q_linear = nn::linear<float, emb_dim, features>::load(qw, qb);
  m.k_linear = nn::linear<float, emb_dim, features>::load(kw, kb);
  m.v_linear = nn::linear<float, emb_dim, features>::load(vw, vb);
  m.out = nn::linear<float, features, emb_dim>::load(ow, ob);
  return m;
}

template <class Mask>
void check_case(const std::string& dir, bool cross, const Mask& mask) {
  auto m = load_mha();
  auto q_in = golden::load<tensor<float, batch, q_seq, emb_dim>>(dir + "/q_in.npy");
  mha_t::trace<batch, q_seq, kv_seq> t;
  auto r = [&] {
    if (cross) {
      auto kv_in = golden::load<tensor<float, batch, kv_seq, emb_dim>>(dir + "/kv_in.npy");
      return m(q_in, kv_in, kv_in, mask, &t);
    }
    // Self-attention: the same tensor, its positions renamed (a view, no copy).
    auto kv = dimsum::rename<q_seq, kv_seq>(q_in);
    return m(q_in, kv, kv, mask, &t);
  }();
  golden::check(t.q_lin, dir + "/q_lin.npy");
  golden::check(t.k_lin, dir + "/k_lin.npy");
  golden::check(t.v_lin, dir + "/v_lin.npy");
  golden::check(t.q_heads, dir + "/q_heads.npy");
  golden::check(t.k_heads, dir + "/k_heads.npy");
  golden::check(t.v_heads, dir + "/v_heads.npy");
  golden::check(nn::dot_product_attention<q_seq, kv_seq, dim_k>(t.q_heads, t.k_heads, t.v_heads).scores,
                dir + "/scores_unmasked.npy");
  golden::check(r.scores, dir + "/scores.npy");
  golden::check(r.weights, dir + "/softscores.npy");
  golden::check(t.attn, dir + "/attn.npy");
  golden::check(t.concat, dir + "/concat.npy");
  golden::check(r.output, dir + "/output.npy");
}

// The seed's (batch, 1, kv_seq) padding mask as a (batch, kv_seq) mask.
tensor<bool, batch, kv_seq> padding_mask(const std::string& dir) {
  auto m = golden::load<tensor<bool, batch, one, kv_seq>>(dir + "/mask.npy");
  return dimsum::select<one>(m, 0);
}
}  // namespace

TEST_CASE("golden seed 003: multi-head self-attention", "[golden][seed003]") {
  check_case("seed003/mha_self", false, nn::no_mask{});
}
TEST_CASE("golden seed 003: multi-head self-attention with a padding mask", "[golden][seed003]") {
  check_case("seed003/mha_self_padmask", false, padding_mask("seed003/mha_self_padmask"));
}
TEST_CASE("golden seed 003: multi-head self-attention with a causal target mask", "[golden][seed003]") {
  auto mask = golden::load<tensor<bool, batch, q_seq, kv_seq>>("seed003/mha_self_causalmask/mask.npy");
  check_case("seed003/mha_self_causalmask", false, mask);
}
TEST_CASE("golden seed 003: encoder-decoder cross-attention, q_seq != kv_seq", "[golden][seed003]") {
  check_case("seed003/mha_cross", true, nn::no_mask{});
}
TEST_CASE("golden seed 003: cross-attention with a padding mask", "[golden][seed003]") {
  check_case("seed003/mha_cross_padmask", true, padding_mask("seed003/mha_cross_padmask"));
  check_case("seed003/mha_cross_rand_padmask", true, padding_mask("seed003/mha_cross_rand_padmask"));
}

TEST_CASE("golden seed 003: multi-head attention finds its dims by name, in any layout", "[golden][seed003]") {
  // The seed's cross-attention with a padding mask, every input permuted:
  // q (emb, batch, q_seq), k (kv_seq, emb, batch), v (emb, kv_seq, batch),
  // the mask (kv_seq, batch). The results are PyTorch's.
  const std::string dir = "seed003/mha_cross_padmask";
  auto m = load_mha();
  tensor<float, emb_dim, batch, q_seq> q = golden::load<tensor<float, batch, q_seq, emb_dim>>(dir + "/q_in.npy");
  auto kv_in = golden::load<tensor<float, batch, kv_seq, emb_dim>>(dir + "/kv_in.npy");
  tensor<float, kv_seq, emb_dim, batch> k = kv_in;
  tensor<float, emb_dim, kv_seq, batch> v = kv_in;
  tensor<bool, kv_seq, batch> mask = padding_mask(dir);
  mha_t::trace<batch, q_seq, kv_seq> t;
  auto r = m(q, k, v, mask, &t);
  static_assert(std::is_same_v<decltype(r.output), tensor<float, batch, q_seq, emb_dim>>);
  golden::check(t.q_heads, dir + "/q_heads.npy");
  golden::check(r.scores, dir + "/scores.npy");
  golden::check(r.weights, dir + "/softscores.npy");
  golden::check(r.output, dir + "/output.npy");
  // A lazy query, with k and v in the seed's order, works the same way.
  auto r2 = m(q * 1.0f, kv_in, kv_in, mask);
  golden::check(r2.output, dir + "/output.npy");
}
