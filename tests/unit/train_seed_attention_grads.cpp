// Every parameter gradient of seed 003's MultiHeadAttention (padding masks
// and a causal target mask; self- and cross-attention) and of seed 004's
// SelfAttention_v2 (with and without qkv bias) against PyTorch autograd in
// float64 (tests/reference/make_attention_grad_fixtures.py: the seeds' own classes,
// the float32 weights and inputs of fixtures/seed003/ and fixtures/seed004/,
// loss sum(out * r) with a fixed random r).
//
// nn::multi_head_attention and nn::seeds::self_attention_v2 hold their weights as
// parameters but run on tensors only (no tape form), so the forward is written here on
// grad vars from the same weights, op for op as the modules (and the seeds)
// do it: Linear = einsum with the (out, in) weight plus the bias;
// view + transpose into heads = rearrange of the (nheads dim_k) axis;
// scores / sqrt(dim_k); masked_fill(mask == 0, -1e9) with the (batch,
// kv_seq) padding mask broadcast by name over heads and query positions
// (the (batch, q_seq, kv_seq) target mask over heads); softmax over the
// keys; nn.Dropout(0.0) in eval mode is the identity and is left out; the
// weighted sum of values merged back into (nheads dim_k); the output Linear.
// SelfAttention_v2: three Linears, queries @ keys.T / sqrt(d_out), softmax
// over the key tokens, @ values.
//
// Tolerance: dimsum runs in float32 (the parameters' type, as the modules
// are used), the reference is float64. Each gradient element must be within
// 1e-4 of the largest element of its own gradient tensor plus 1e-5 of the
// largest gradient element of the whole module. The second term is for
// gradients that are zero in exact arithmetic but come out of float32 as
// rounding noise of the other gradients' size: the key bias of seed 003
// (softmax is invariant to shifting a whole row of scores, so d loss / d b_K
// is 0; PyTorch's float64 gives ~1e-15, dimsum's float32 5e-7 to 5e-6 next
// to module gradients of 10 to 42). Measured: every other gradient within
// 3e-7 of its tensor's largest element. The bounds leave a margin, while a
// wrong mask changes the gradients at the 1e-1 relative level (tried: with
// the mask's meaning inverted, most elements of the four weights fail).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include <dimsum/grad/grad.hpp>

#include "golden.hpp"

using dimsum::parameter;
using dimsum::tensor;
namespace grad = dimsum::grad;

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(nheads);
DIMSUM_DIM(q_seq);
DIMSUM_DIM(kv_seq);
DIMSUM_DIM(emb_dim);
DIMSUM_DIM(dim_k);
DIMSUM_DIM(one);  // the size-1 axis of the seed's (batch, 1, kv_seq) mask
struct features : dimsum::dim<"nheads_dim_k"> {};
DIMSUM_DIM(token);
DIMSUM_DIM(k_token);
DIMSUM_DIM(d_in);
DIMSUM_DIM(d_out);

using golden::load;
template <class P>
P load_parameter(const std::string& rel) {
  return P(load<typename P::tensor_type>(rel));
}

template <class P>
using reference_t = dimsum::tensor_for_t<double, dimsum::dims_of_t<typename P::tensor_type>>;

/// The largest |element| of the reference gradients of the named parameters.
template <class... P>
double module_scale(const std::string& c, std::initializer_list<const char*> names, const P&...) {
  double scale = 0;
  auto it = names.begin();
  auto one = [&]<class Q>(const Q*) {
    const auto want = load<reference_t<Q>>("attention_grad/" + c + "/" + *it++ + ".npy");
    for (std::size_t i = 0; i < want.size(); ++i) scale = std::max(scale, std::abs(want.data()[i]));
  };
  (one(static_cast<const P*>(nullptr)), ...);
  return scale;
}

/// p.grad against attention_grad/<case>/<name>.npy (float64): within 1e-4
/// of the tensor's largest element plus 1e-5 of the module's (see above).
template <class P>
void expect_grad(const P& p, const std::string& c, const std::string& name, double module) {
  using W = reference_t<P>;
  const W want = load<W>("attention_grad/" + c + "/" + name + ".npy");
  REQUIRE(want.extents() == p.grad.extents());
  double scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) scale = std::max(scale, std::abs(want.data()[i]));
  std::size_t bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = std::abs(double(p.grad.data()[i]) - want.data()[i]);
    worst = std::max(worst, d);
    if (!(d <= 1e-4 * scale + 1e-5 * module)) ++bad;
  }
  INFO(c << ": gradient of " << name << ": " << bad << " of " << want.size() << " elements off; largest difference "
         << worst << ", largest gradient " << scale << ", of the module " << module);
  CHECK(bad == 0);
}

// --- seed 003 ---

struct mha_params {
  parameter<float, features, emb_dim> q_w, k_w, v_w;
  parameter<float, features> q_b, k_b, v_b;
  parameter<float, emb_dim, features> o_w;
  parameter<float, emb_dim> o_b;
};

mha_params load_mha() {
  using W = parameter<float, features, emb_dim>;
  using B = parameter<float, features>;
  return {load_parameter<W>("seed003/mha/q_linear_weight.npy"),
          load_parameter<W>("seed003/mha/k_linear_weight.npy"),
          load_parameter<W>("seed003/mha/v_linear_weight.npy"),
          load_parameter<B>("seed003/mha/q_linear_bias.npy"),
          load_parameter<B>("seed003/mha/k_linear_bias.npy"),
          load_parameter<B>("seed003/mha/v_linear_bias.npy"),
          load_parameter<parameter<float, emb_dim, features>>("seed003/mha/out_weight.npy"),
          load_parameter<parameter<float, emb_dim>>("seed003/mha/out_bias.npy")};
}

/// The seed's (batch, 1, kv_seq) padding mask as a (batch, kv_seq) mask.
tensor<bool, batch, kv_seq> padding_mask(const std::string& dir) {
  auto m = load<tensor<bool, batch, one, kv_seq>>(dir + "/mask.npy");
  tensor<bool, batch, kv_seq> out(batch{m.extent<batch>()}, kv_seq{m.extent<kv_seq>()});
  std::copy(m.data(), m.data() + m.size(), out.data());
  return out;
}

/// MultiHeadAttention.forward(q, kv, kv, mask) on the tape, then sum(out * r).
template <class Mask>
void mha_case(const std::string& c, const tensor<float, batch, q_seq, emb_dim>& q_in,
              const tensor<float, batch, kv_seq, emb_dim>& kv_in, const Mask& mask) {
  using dimsum::einsum;
  using dimsum::rearrange;
  mha_params p = load_mha();
  {
    grad::tape t;
    auto q = einsum<"batch q_seq emb_dim, nheads_dim_k emb_dim -> batch q_seq nheads_dim_k">(q_in, t.watch(p.q_w)) +
             t.watch(p.q_b);
    auto k = einsum<"batch kv_seq emb_dim, nheads_dim_k emb_dim -> batch kv_seq nheads_dim_k">(kv_in, t.watch(p.k_w)) +
             t.watch(p.k_b);
    auto v = einsum<"batch kv_seq emb_dim, nheads_dim_k emb_dim -> batch kv_seq nheads_dim_k">(kv_in, t.watch(p.v_w)) +
             t.watch(p.v_b);
    // view(batch, -1, num_heads, dim_k).transpose(1, 2)
    auto qh = rearrange<"batch q_seq (nheads dim_k) -> batch nheads q_seq dim_k">(q, nheads{6});
    auto kh = rearrange<"batch kv_seq (nheads dim_k) -> batch nheads kv_seq dim_k">(k, nheads{6});
    auto vh = rearrange<"batch kv_seq (nheads dim_k) -> batch nheads kv_seq dim_k">(v, nheads{6});
    // dot_product_attention(q, k, v, dim_k, mask, dropout)
    auto scores = einsum<"batch nheads q_seq dim_k, batch nheads kv_seq dim_k -> batch nheads q_seq kv_seq">(qh, kh) /
                  std::sqrt(4.0f);
    auto masked = dimsum::masked_fill(scores, !mask, -1e9f);  // mask (batch, [q_seq,] kv_seq) broadcast by name
    auto weights = dimsum::softmax<kv_seq>(masked);
    // attn.transpose(1, 2).contiguous().view(batch, -1, num_heads * dim_k)
    auto concat =
        einsum<"batch nheads q_seq kv_seq, batch nheads kv_seq dim_k -> batch q_seq nheads_dim_k(nheads dim_k)">(weights,
                                                                                                               vh);
    auto out = einsum<"batch q_seq nheads_dim_k, emb_dim nheads_dim_k -> batch q_seq emb_dim">(concat, t.watch(p.o_w)) +
               t.watch(p.o_b);
    const auto r = load<tensor<float, batch, q_seq, emb_dim>>("attention_grad/" + c + "/r.npy");
    t.backward(einsum<>(out * r));
  }
  const double m = module_scale(c,
                                {"q_linear_weight", "q_linear_bias", "k_linear_weight", "k_linear_bias",
                                 "v_linear_weight", "v_linear_bias", "out_weight", "out_bias"},
                                p.q_w, p.q_b, p.k_w, p.k_b, p.v_w, p.v_b, p.o_w, p.o_b);
  expect_grad(p.q_w, c, "q_linear_weight", m);
  expect_grad(p.q_b, c, "q_linear_bias", m);
  expect_grad(p.k_w, c, "k_linear_weight", m);
  expect_grad(p.k_b, c, "k_linear_bias", m);
  expect_grad(p.v_w, c, "v_linear_weight", m);
  expect_grad(p.v_b, c, "v_linear_bias", m);
  expect_grad(p.o_w, c, "out_weight", m);
  expect_grad(p.o_b, c, "out_bias", m);
}

void mha_cross_case(const std::string& c, const std::string& dir) {
  mha_case(c, load<tensor<float, batch, q_seq, emb_dim>>(dir + "/q_in.npy"),
           load<tensor<float, batch, kv_seq, emb_dim>>(dir + "/kv_in.npy"), padding_mask(dir));
}

// --- seed 004 ---

/// SelfAttention_v2.forward(x) on the tape, then sum(context * r); with
/// qkv_bias when Bias.
template <bool Bias>
void sa_v2_case(const std::string& c, const std::string& dir) {
  using dimsum::einsum;
  using dimsum::rename;
  using W = parameter<float, d_out, d_in>;
  using B = parameter<float, d_out>;
  W wq = load_parameter<W>(dir + "/W_query_weight.npy"), wk = load_parameter<W>(dir + "/W_key_weight.npy"),
    wv = load_parameter<W>(dir + "/W_value_weight.npy");
  B bq(d_out{2}), bk(d_out{2}), bv(d_out{2});
  if constexpr (Bias) {
    bq = load_parameter<B>(dir + "/W_query_bias.npy");
    bk = load_parameter<B>(dir + "/W_key_bias.npy");
    bv = load_parameter<B>(dir + "/W_value_bias.npy");
  }
  const auto x = load<tensor<float, token, d_in>>("seed004/inputs.npy");
  {
    grad::tape t;
    auto linear = [&](W& w, B& b) {
      auto y = einsum<"token d_in, d_out d_in -> token d_out">(x, t.watch(w));
      if constexpr (Bias) {
        return y + t.watch(b);
      } else {
        (void)b;
        return y;
      }
    };
    auto keys = linear(wk, bk);
    auto queries = linear(wq, bq);
    auto values = linear(wv, bv);
    auto scores = einsum<"token d_out, k_token d_out -> token k_token">(queries, rename<token, k_token>(keys));
    auto weights = dimsum::softmax<k_token>(scores / std::sqrt(2.0f));  // keys.shape[-1] ** 0.5
    auto context = einsum<"token k_token, k_token d_out -> token d_out">(weights, rename<token, k_token>(values));
    const auto r = load<tensor<float, token, d_out>>("attention_grad/" + c + "/r.npy");
    t.backward(einsum<>(context * r));
  }
  double m = module_scale(c, {"W_query_weight", "W_key_weight", "W_value_weight"}, wq, wk, wv);
  if constexpr (Bias) m = std::max(m, module_scale(c, {"W_query_bias", "W_key_bias", "W_value_bias"}, bq, bk, bv));
  expect_grad(wq, c, "W_query_weight", m);
  expect_grad(wk, c, "W_key_weight", m);
  expect_grad(wv, c, "W_value_weight", m);
  if constexpr (Bias) {
    expect_grad(bq, c, "W_query_bias", m);
    expect_grad(bk, c, "W_key_bias", m);
    expect_grad(bv, c, "W_value_bias", m);
  }
}
}  // namespace

TEST_CASE("seed 003 gradients: cross-attention with a padding mask", "[grad][seed003][e2e]") {
  mha_cross_case("seed003_cross_padmask", "seed003/mha_cross_padmask");
}

TEST_CASE("seed 003 gradients: cross-attention on random rows, two padded keys", "[grad][seed003][e2e]") {
  mha_cross_case("seed003_cross_rand_padmask", "seed003/mha_cross_rand_padmask");
}

TEST_CASE("seed 003 gradients: self-attention with a padding mask", "[grad][seed003][e2e]") {
  const std::string dir = "seed003/mha_self_padmask";
  const auto x = load<tensor<float, batch, q_seq, emb_dim>>(dir + "/q_in.npy");
  const tensor<float, batch, kv_seq, emb_dim> kv = dimsum::rename<q_seq, kv_seq>(x);
  mha_case("seed003_self_padmask", x, kv, padding_mask(dir));
}

TEST_CASE("seed 003 gradients: self-attention with a causal target mask", "[grad][seed003][e2e]") {
  const std::string dir = "seed003/mha_self_causalmask";
  const auto x = load<tensor<float, batch, q_seq, emb_dim>>(dir + "/q_in.npy");
  const tensor<float, batch, kv_seq, emb_dim> kv = dimsum::rename<q_seq, kv_seq>(x);
  mha_case("seed003_self_causalmask", x, kv, load<tensor<bool, batch, q_seq, kv_seq>>(dir + "/mask.npy"));
}

TEST_CASE("seed 004 gradients: SelfAttention_v2", "[grad][seed004][e2e]") {
  sa_v2_case<false>("seed004_sa_v2", "seed004/sa_v2");
}

TEST_CASE("seed 004 gradients: SelfAttention_v2 with qkv bias", "[grad][seed004][e2e]") {
  sa_v2_case<true>("seed004_sa_v2_bias", "seed004/sa_v2_bias");
}
