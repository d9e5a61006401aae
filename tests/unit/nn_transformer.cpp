// nn::scaled_dot_product_attention on tensors and on vars, against PyTorch
// float64 fixtures of the plain-ops reference (forward, and the gradients of
// q, k and v of sum(out * r)), written by
// tests/reference/make_transformer_fixtures.py: no mask; causal with a
// padding mask and a scale; a sliding window after a key/value cache with an
// additive mask; grouped key/value heads with a per-head bool mask. Dropout
// against plain loops with the mask nn::dropout draws, and central finite
// differences of those loops. nn::rms_norm, nn::swiglu and nn::gelu_mlp
// against PyTorch float64 modules (output, input and parameter gradients),
// and rms_norm over an inner dim against plain loops; nn::rotary_attention
// against a PyTorch Llama-style attention, with and without a window;
// nn::transformer_block (and nn::pre_norm_block with Llama's parts) against
// Llama's pre-norm decoder layer.
// nn::transformer (embedding, two blocks, final norm, LM head) with tied and
// untied embeddings against a PyTorch Llama-style model: logits, the cross
// entropy and every parameter's gradient, then five AdamW steps with decay
// on the matrices only (each step's loss and the final parameters against
// torch.optim.AdamW's); tied, one table in the optimizer's states and in the
// checkpoint. Decoding with key/value caches (rotary_attention,
// transformer), a prompt then one token at a time, against the same
// PyTorch full causal forwards.

#include <dimsum/grad/grad.hpp>
#include <dimsum/nn/nn.hpp>
#include <dimsum/nn/scaled_dot_product_attention.hpp>
#include <dimsum/io/npy_dir.hpp>
#include <dimsum/io/state_dict.hpp>
#include <dimsum/nn/rotary_attention.hpp>
#include <dimsum/nn/transformer.hpp>
#include <dimsum/nn/transformer_block.hpp>
#include <dimsum/optim/optim.hpp>
#include <dimsum/ops/slice.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "golden.hpp"
#include "scoped_dir.hpp"

namespace {

using namespace dimsum;

DIMSUM_DIM(batch);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(heads);
DIMSUM_DIM(kv_heads);
DIMSUM_DIM(d_head);
DIMSUM_DIM(d_value);

constexpr double tol = 1e-12;

template <class KV>
struct sdpa_files {
  using QT = tensor<double, batch, q_posn, heads, d_head>;
  using KT = tensor<double, batch, k_posn, KV, d_head>;
  using VT = tensor<double, batch, k_posn, KV, d_value>;
  using OT = tensor<double, batch, q_posn, heads, d_value>;
  std::string dir;
  QT q;
  KT k;
  VT v;
  OT r;
  explicit sdpa_files(const std::string& name)
      : dir("transformer/" + name + "/"),
        q(golden::load<QT>(dir + "q.npy")),
        k(golden::load<KT>(dir + "k.npy")),
        v(golden::load<VT>(dir + "v.npy")),
        r(golden::load<OT>(dir + "r.npy")) {}
};

/// Runs attention `f(q, k, v)` on tensors and on vars of one tape, and
/// checks the output and the gradients of sum(out * r) against the case's
/// fixtures; `nodes` is the number of tape nodes the attention records
/// (1: one fused node).
template <class KV, class F>
void check_sdpa(const std::string& name, F f, std::size_t nodes) {
  INFO(name);
  sdpa_files<KV> c(name);
  golden::check(f(c.q, c.k, c.v), c.dir + "out.npy", tol, tol);
  grad::tape t;
  auto q = t.watch(c.q);
  auto k = t.watch(c.k);
  auto v = t.watch(c.v);
  const std::size_t leaves = t.size();
  auto out = f(q, k, v);
  CHECK(t.size() == leaves + nodes);
  golden::check(out.value(), c.dir + "out.npy", tol, tol);
  t.backward(sum<batch, q_posn, heads, d_value>(out * c.r));
  golden::check(gradient(q), c.dir + "grad_q.npy", tol, tol);
  golden::check(gradient(k), c.dir + "grad_k.npy", tol, tol);
  golden::check(gradient(v), c.dir + "grad_v.npy", tol, tol);
}

}  // namespace

TEST_CASE("scaled_dot_product_attention without a mask equals PyTorch's, forward and backward", "[nn][sdpa]") {
  check_sdpa<heads>("sdpa_plain", [](const auto& q, const auto& k, const auto& v) {
    return nn::scaled_dot_product_attention<q_posn, k_posn, d_head>(q, k, v);
  }, 1);
}

TEST_CASE("scaled_dot_product_attention: causal, a padding mask and a scale", "[nn][sdpa]") {
  const auto mask = golden::load<tensor<bool, batch, k_posn>>("transformer/sdpa_causal_bool/mask.npy");
  check_sdpa<heads>("sdpa_causal_bool", [&](const auto& q, const auto& k, const auto& v) {
    return nn::scaled_dot_product_attention<q_posn, k_posn, d_head>(q, k, v, mask,
                                                                     {.is_causal = true, .scale = 0.3});
  }, 1);
}

TEST_CASE("scaled_dot_product_attention: a sliding window after a cache and an additive mask", "[nn][sdpa]") {
  const auto mask = golden::load<tensor<double, q_posn, k_posn>>("transformer/sdpa_additive_window/mask.npy");
  check_sdpa<heads>("sdpa_additive_window", [&](const auto& q, const auto& k, const auto& v) {
    return nn::scaled_dot_product_attention<q_posn, k_posn, d_head>(q, k, v, mask, {.window = 3, .offset = 3});
  }, 1);
}

TEST_CASE("scaled_dot_product_attention: grouped key/value heads with a per-head mask", "[nn][sdpa]") {
  const auto mask = golden::load<tensor<bool, heads, q_posn, k_posn>>("transformer/sdpa_gqa/mask.npy");
  // q's heads split into (kv_heads, group) and merged back: two nodes
  // around the fused one.
  check_sdpa<kv_heads>("sdpa_gqa", [&](const auto& q, const auto& k, const auto& v) {
    return nn::scaled_dot_product_attention<q_posn, k_posn, d_head, nn::grouped_kv<heads, kv_heads>>(
        q, k, v, mask, {.is_causal = true});
  }, 3);
}

TEST_CASE("scaled_dot_product_attention with a var and tensors: the tensors are constants", "[nn][sdpa]") {
  sdpa_files<heads> c("sdpa_plain");
  grad::tape t;
  auto q = t.watch(c.q);
  auto out = nn::scaled_dot_product_attention<q_posn, k_posn, d_head>(q, c.k, c.v);
  t.backward(sum<batch, q_posn, heads, d_value>(out * c.r));
  golden::check(gradient(q), c.dir + "grad_q.npy", tol, tol);
}

TEST_CASE("scaled_dot_product_attention: a head count that is not a multiple of the key/value heads",
          "[nn][sdpa]") {
  tensor<double, batch, q_posn, heads, d_head> q(batch{1}, q_posn{2}, heads{3}, d_head{2});
  tensor<double, batch, k_posn, kv_heads, d_head> k(batch{1}, k_posn{2}, kv_heads{2}, d_head{2});
  tensor<double, batch, k_posn, kv_heads, d_value> v(batch{1}, k_posn{2}, kv_heads{2}, d_value{2});
  auto call = [&] {
    return nn::scaled_dot_product_attention<q_posn, k_posn, d_head, nn::grouped_kv<heads, kv_heads>>(q, k, v);
  };
  CHECK_THROWS_AS(call(), shape_error);
  auto dropout_one = [&] {
    return nn::scaled_dot_product_attention<q_posn, k_posn, d_head, nn::grouped_kv<heads, kv_heads>>(
        q, k, v, nn::no_mask{}, {.dropout_p = 1.0});
  };
  CHECK_THROWS_WITH(dropout_one(), Catch::Contains("dropout_p must be in [0, 1)"));
}

namespace {

using dq_t = tensor<double, batch, q_posn, heads, d_head>;
using dk_t = tensor<double, batch, k_posn, heads, d_head>;
using dv_t = tensor<double, batch, k_posn, heads, d_value>;
using do_t = tensor<double, batch, q_posn, heads, d_value>;
using dw_t = tensor<double, batch, heads, q_posn, k_posn>;

/// Causal attention with dropout by plain loops: weights softmax(q.k / 2)
/// over the keys at or before each query, times `drop` (0 or 1 / (1 - p)),
/// then summed against v. Returns sum(out * r); `out` receives out.
double dropout_loops(const dq_t& q, const dk_t& k, const dv_t& v, const dw_t& drop, const do_t& r, do_t* out) {
  const std::size_t B = q.extent<batch>(), L = q.extent<q_posn>(), S = k.extent<k_posn>(), H = q.extent<heads>(),
                    E = q.extent<d_head>(), C = v.extent<d_value>();
  double loss = 0;
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t i = 0; i < L; ++i) {
        std::vector<double> w(S, 0.0);
        double m = -std::numeric_limits<double>::infinity(), l = 0;
        for (std::size_t j = 0; j <= i; ++j) {
          double s = 0;
          for (std::size_t e = 0; e < E; ++e)
            s += q(batch{b}, q_posn{i}, heads{h}, d_head{e}) * k(batch{b}, k_posn{j}, heads{h}, d_head{e});
          w[j] = s / 2;
          m = std::max(m, w[j]);
        }
        for (std::size_t j = 0; j <= i; ++j) l += (w[j] = std::exp(w[j] - m));
        for (std::size_t c = 0; c < C; ++c) {
          double o = 0;
          for (std::size_t j = 0; j <= i; ++j)
            o += w[j] / l * drop(batch{b}, heads{h}, q_posn{i}, k_posn{j}) * v(batch{b}, k_posn{j}, heads{h}, d_value{c});
          if (out) (*out)(batch{b}, q_posn{i}, heads{h}, d_value{c}) = o;
          loss += o * r(batch{b}, q_posn{i}, heads{h}, d_value{c});
        }
      }
  return loss;
}

}  // namespace

TEST_CASE("scaled_dot_product_attention with dropout equals plain loops with nn::dropout's mask", "[nn][sdpa]") {
  sdpa_files<heads> c("sdpa_causal_bool");  // 5 queries over 5 keys, d_head 4
  const double p = 0.25;
  const std::uint64_t seed = 7;
  // the mask nn::dropout draws for the weights' dims (batch, heads, q_posn, k_posn)
  dw_t ones(batch{2}, heads{2}, q_posn{5}, k_posn{5});
  ones.fill(1.0);
  const dw_t drop = nn::dropout(p, true, seed)(ones);
  do_t want(batch{2}, q_posn{5}, heads{2}, d_value{3});
  dropout_loops(c.q, c.k, c.v, drop, c.r, &want);
  const nn::attention_options o{.is_causal = true, .dropout_p = p, .seed = seed};
  const auto got = nn::scaled_dot_product_attention<q_posn, k_posn, d_head>(c.q, c.k, c.v, nn::no_mask{}, o);
  for (std::size_t n = 0; n < want.size(); ++n) CHECK(got.data()[n] == Approx(want.data()[n]).margin(1e-12));

  grad::tape t;
  auto q = t.watch(c.q);
  auto k = t.watch(c.k);
  auto v = t.watch(c.v);
  auto out = nn::scaled_dot_product_attention<q_posn, k_posn, d_head>(q, k, v, nn::no_mask{}, o);
  for (std::size_t n = 0; n < want.size(); ++n) CHECK(out.value().data()[n] == Approx(want.data()[n]).margin(1e-12));
  t.backward(sum<batch, q_posn, heads, d_value>(out * c.r));
  // central differences of the loops, along every element of q, k and v
  auto fd = [&](auto& x, const auto& g) {
    const double h = 1e-6;
    for (std::size_t n = 0; n < x.size(); ++n) {
      const double x0 = x.data()[n];
      x.data()[n] = x0 + h;
      const double up = dropout_loops(c.q, c.k, c.v, drop, c.r, nullptr);
      x.data()[n] = x0 - h;
      const double down = dropout_loops(c.q, c.k, c.v, drop, c.r, nullptr);
      x.data()[n] = x0;
      CHECK(g.data()[n] == Approx((up - down) / (2 * h)).margin(1e-7));
    }
  };
  fd(c.q, gradient(q));
  fd(c.k, gradient(k));
  fd(c.v, gradient(v));
}

// --- modules: rms_norm, swiglu, gelu_mlp ---

namespace {

DIMSUM_DIM(posn);
DIMSUM_DIM(d_model);
DIMSUM_DIM(d_ff);

using xm_t = tensor<double, batch, posn, d_model>;

/// Elements of `get(p)` for m's parameters p (the gradient or the value)
/// that differ from the values of `want` (a module of the same type holding
/// PyTorch's numbers) by more than tol, and the number of elements compared.
template <class M, class Get>
std::pair<std::size_t, std::size_t> mismatches(const M& m, const M& want, Get get, double tol) {
  std::vector<std::vector<double>> wants;
  nn::for_each_parameter(want, [&](const std::string&, const auto& p) {
    wants.emplace_back(p.value.data(), p.value.data() + p.value.size());
  });
  std::size_t i = 0, bad = 0, n = 0;
  nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
    const auto& w = wants[i++];
    const auto& got = get(p);
    REQUIRE(got.size() == w.size());
    for (std::size_t e = 0; e < w.size(); ++e, ++n)
      if (!(std::abs(got.data()[e] - w[e]) <= tol * (1 + std::abs(w[e])))) {
        UNSCOPED_INFO(name << "[" << e << "]: got " << got.data()[e] << ", want " << w[e]);
        ++bad;
      }
  });
  return {bad, n};
}

/// mismatches of m's gradients.
template <class M>
std::pair<std::size_t, std::size_t> grad_mismatches(const M& m, const M& want, double tol) {
  return mismatches(m, want, [](const auto& p) -> const auto& { return p.grad; }, tol);
}

/// Module m (built by make) on the case's x: the tensor form's output, the
/// tape form's output and the gradients of x and of every parameter equal
/// PyTorch's; `count` is the number of parameter elements.
template <class Make>
void check_module(const std::string& name, Make make, std::size_t count) {
  INFO(name);
  const std::string dir = "transformer/" + name + "/";
  auto m = make();
  dimsum::load_npy_dir(golden::fixture(dir + "params"), m);  // strict: exactly the state dict's keys
  const auto x0 = golden::load<xm_t>(dir + "x.npy");
  const auto r = golden::load<xm_t>(dir + "r.npy");
  golden::check(m(x0), dir + "y.npy", tol, tol);

  grad::tape t;
  auto x = t.watch(x0);
  auto y = m(x);
  static_assert(std::is_same_v<decltype(y), grad::var<double, batch, posn, d_model>>);
  golden::check(y.value(), dir + "y.npy", tol, tol);
  t.backward(sum<batch, posn, d_model>(y * r));
  golden::check(gradient(x), dir + "grad_x.npy", tol, tol);
  auto want = make();
  dimsum::load_npy_dir(golden::fixture(dir + "grads"), want);
  const auto [bad, n] = grad_mismatches(m, want, tol);
  CHECK(bad == 0);
  CHECK(n == count);
}

}  // namespace

TEST_CASE("nn::rms_norm equals PyTorch's RMSNorm, forward and backward", "[nn][modules]") {
  check_module("rms_norm", [] { return nn::rms_norm<double, d_model>(d_model{4}); }, 4);
}

TEST_CASE("nn::swiglu equals Llama's MLP in PyTorch, forward and backward", "[nn][modules]") {
  check_module("swiglu", [] { return nn::swiglu<double, d_model, d_ff>(d_model{4}, d_ff{6}); }, 3 * 24);
}

TEST_CASE("nn::gelu_mlp equals GPT-2's MLP in PyTorch, forward and backward", "[nn][modules]") {
  check_module("gelu_mlp", [] { return nn::gelu_mlp<double, d_model, d_ff>(d_model{4}, d_ff{6}); }, 2 * 24 + 6 + 4);
}

TEST_CASE("rms_norm over a dim other than the last, with a constant weight", "[nn][modules]") {
  // Plain loops: y[b, d, p] = x[b, d, p] / sqrt(mean_d x[b, d, p]^2 + eps) * w[d].
  tensor<double, batch, d_model, posn> x(batch{2}, d_model{3}, posn{2});
  tensor<double, d_model> w(d_model{3});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = std::sin(1.0 + double(i));
  for (std::size_t d = 0; d < 3; ++d) w(d_model{d}) = 0.5 + double(d);
  const double eps = 1e-5;
  auto want = [&](const auto& xs, std::size_t b, std::size_t d, std::size_t p) {
    double ms = 0;
    for (std::size_t e = 0; e < 3; ++e) ms += xs(batch{b}, d_model{e}, posn{p}) * xs(batch{b}, d_model{e}, posn{p});
    return xs(batch{b}, d_model{d}, posn{p}) / std::sqrt(ms / 3 + eps) * w(d_model{d});
  };
  const auto y = rms_norm<d_model>(x, w, eps);
  grad::tape t;
  auto xv = t.watch(x);
  auto yv = rms_norm<d_model>(xv, w, eps);
  t.backward(sum<batch, d_model, posn>(yv * yv));
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t d = 0; d < 3; ++d)
      for (std::size_t p = 0; p < 2; ++p) {
        CHECK(y(batch{b}, d_model{d}, posn{p}) == Approx(want(x, b, d, p)).margin(1e-14));
        CHECK(yv.value()(batch{b}, d_model{d}, posn{p}) == Approx(want(x, b, d, p)).margin(1e-14));
      }
  // central differences of sum(y^2) by the loops
  auto loss = [&](const auto& xs) {
    double s = 0;
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t d = 0; d < 3; ++d)
        for (std::size_t p = 0; p < 2; ++p) s += want(xs, b, d, p) * want(xs, b, d, p);
    return s;
  };
  auto xs = x;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double x0 = xs.data()[i], h = 1e-6;
    xs.data()[i] = x0 + h;
    const double up = loss(xs);
    xs.data()[i] = x0 - h;
    const double down = loss(xs);
    xs.data()[i] = x0;
    CHECK(gradient(xv).data()[i] == Approx((up - down) / (2 * h)).margin(1e-7));
  }
}

TEST_CASE("nn::rotary_attention equals Llama's attention in PyTorch (RoPE, grouped heads, causal)", "[nn][modules]") {
  auto make = [] { return nn::rotary_attention<double, posn, d_model, heads, kv_heads, d_head>(d_model{8}, heads{4}, kv_heads{2}, d_head{4}); };
  check_module("rotary_attention", make, 16 * 8 + 2 * 8 * 8 + 8 * 16);
  check_module("rotary_attention_window", [&] {
    auto m = make();
    m.window = 3;
    return m;
  }, 16 * 8 + 2 * 8 * 8 + 8 * 16);
}

TEST_CASE("nn::transformer_block equals Llama's pre-norm decoder layer in PyTorch", "[nn][modules]") {
  check_module("transformer_block", [] {
    return nn::transformer_block<double, posn, d_model, heads, kv_heads, d_head, d_ff>(
        d_model{8}, heads{4}, kv_heads{2}, d_head{4}, d_ff{12});
  }, 8 + (16 * 8 + 2 * 8 * 8 + 8 * 16) + 8 + 3 * 8 * 12);
}

TEST_CASE("nn::pre_norm_block of rms_norm, rotary_attention and swiglu equals Llama's decoder layer in PyTorch",
          "[nn][modules]") {
  // The generic block with Llama's parts has transformer_block's names, so
  // the same PyTorch fixtures (LlamaDecoderLayer) check it.
  using norm = nn::rms_norm<double, d_model>;
  using attention = nn::rotary_attention<double, posn, d_model, heads, kv_heads, d_head>;
  using mlp = nn::swiglu<double, d_model, d_ff>;
  check_module("transformer_block", [] {
    return nn::pre_norm_block<norm, attention, mlp>(norm(d_model{8}), attention(d_model{8}, heads{4}, kv_heads{2}, d_head{4}),
                                                    norm(d_model{8}), mlp(d_model{8}, d_ff{12}));
  }, 8 + (16 * 8 + 2 * 8 * 8 + 8 * 16) + 8 + 3 * 8 * 12);
}

// --- nn::transformer ---

namespace {

DIMSUM_DIM(vocab);
DIMSUM_DIM(step);

// the blocks are the transformer_block case's type (d_ff: its MLP is the swiglu case's)
using lm_t = nn::transformer<double, vocab, posn, d_model, heads, kv_heads, d_head, d_ff>;
using ids_t = tensor<std::int64_t, batch, posn>;
using logits_t = tensor<double, batch, posn, vocab>;

lm_t make_lm(nn::embeddings head) {
  return lm_t(vocab{11}, d_model{8}, heads{4}, kv_heads{2}, d_head{4}, d_ff{12}, 2, head);
}

// The parameter elements of the fixtures' model: the table (11 x 8), two
// blocks, the final norm, and the head's own weight when untied.
constexpr std::size_t block_count = 8 + (16 * 8 + 2 * 8 * 8 + 8 * 16) + 8 + 3 * 8 * 12;
constexpr std::size_t lm_count(nn::embeddings head) {
  return 11 * 8 + 2 * block_count + 8 + (head == nn::embeddings::untied ? 11 * 8 : 0);
}

/// The logits, the cross entropy and every parameter's gradient of the
/// case's model on its ids and targets equal PyTorch's.
void check_lm(const std::string& name, nn::embeddings head) {
  INFO(name);
  const std::string dir = "transformer/" + name + "/";
  lm_t m = make_lm(head);
  CHECK(m.tied() == (head == nn::embeddings::tied));
  dimsum::load_npy_dir(golden::fixture(dir + "params"), m);  // strict: exactly PyTorch's named_parameters
  const auto ids = golden::load<ids_t>(dir + "ids.npy");
  const auto targets = golden::load<ids_t>(dir + "targets.npy");
  golden::check(m(ids), dir + "logits.npy", tol, tol);

  grad::tape t;
  auto logits = m(t, ids);
  static_assert(std::is_same_v<decltype(logits), grad::var<double, batch, posn, vocab>>);
  golden::check(logits.value(), dir + "logits.npy", tol, tol);
  auto loss = cross_entropy<vocab>(logits, targets);
  const auto want_loss = golden::load<tensor<double>>(dir + "loss.npy");
  CHECK(loss.item() == Approx(want_loss()).epsilon(1e-13));
  t.backward(loss);
  lm_t want = make_lm(head);
  dimsum::load_npy_dir(golden::fixture(dir + "grads"), want);
  const auto [bad, n] = grad_mismatches(m, want, tol);
  CHECK(bad == 0);
  CHECK(n == lm_count(head));
  CHECK(nn::parameter_count(m) == lm_count(head));
}

/// Five AdamW steps (decay 0.1 on the matrices, none on the norms) from the
/// case's parameters: each step's loss and the parameters after the fifth
/// equal torch.optim.AdamW's (float64 both: a few ulps per step).
void check_lm_steps(const std::string& name, nn::embeddings head, std::size_t parameters) {
  INFO(name);
  const std::string dir = "transformer/" + name + "/";
  lm_t m = make_lm(head);
  dimsum::load_npy_dir(golden::fixture(dir + "params"), m);
  using steps_t = tensor<std::int64_t, step, batch, posn>;
  const auto xs = golden::load<steps_t>(dir + "steps_ids.npy");
  const auto ys = golden::load<steps_t>(dir + "steps_targets.npy");
  const auto losses = golden::load<tensor<double, step>>(dir + "steps_losses.npy");
  optim::adamw opt({.lr = 1e-2, .weight_decay = 0.1});
  opt.add_group(optim::rank_is(1)).options.weight_decay = 0.0;
  for (std::size_t s = 0; s < losses.extent<step>(); ++s) {
    const ids_t x = select<step>(xs, s), y = select<step>(ys, s);
    nn::zero_grad(m);
    grad::tape t;
    auto loss = cross_entropy<vocab>(m(t, x), y);
    INFO("step " << s);
    CHECK(loss.item() == Approx(losses(step{s})).epsilon(1e-12));
    t.backward(loss);
    opt.step(m);
  }
  // one optimizer state per parameter: the tied table is one
  CHECK(opt.states().size() == parameters);
  lm_t want = make_lm(head);
  dimsum::load_npy_dir(golden::fixture(dir + "final"), want);
  const auto [bad, n] = mismatches(m, want, [](const auto& p) -> const auto& { return p.value; }, 1e-11);
  CHECK(bad == 0);
  CHECK(n == nn::parameter_count(m));
}

}  // namespace

TEST_CASE("nn::transformer with untied embeddings equals PyTorch: logits, cross entropy, gradients", "[nn][modules]") {
  check_lm("transformer_untied", nn::embeddings::untied);
}

TEST_CASE("nn::transformer with tied embeddings: one table, its gradient the lookup's plus the head's",
          "[nn][modules]") {
  check_lm("transformer_tied", nn::embeddings::tied);
  std::vector<std::string> names;
  nn::for_each_parameter(make_lm(nn::embeddings::tied), [&](const std::string& n, const auto&) { names.push_back(n); });
  REQUIRE(names.size() == 20);
  CHECK(names.front() == "embed_tokens.weight");
  CHECK(names[1] == "layers.0.input_layernorm.weight");
  CHECK(names.back() == "norm.weight");
  // the checkpoint holds those 20 tensors (no "lm_head.weight") and loads
  // into a fresh tied model
  lm_t m = make_lm(nn::embeddings::tied);
  dimsum::load_npy_dir(golden::fixture("transformer/transformer_tied/params"), m);
  const test::scoped_dir tmp("nn_transformer_tied");
  const std::string path = (tmp / "lm.safetensors").string();
  dimsum::save_safetensors(path, m);
  const auto file = dimsum::read_safetensors(path);
  std::vector<std::string> keys;
  for (const auto& [k, t] : file.tensors) keys.push_back(k);
  std::sort(names.begin(), names.end());
  CHECK(keys == names);
  lm_t fresh = make_lm(nn::embeddings::tied);
  dimsum::load_safetensors(path, fresh);
  const auto ids = golden::load<ids_t>("transformer/transformer_tied/ids.npy");
  golden::check(fresh(ids), "transformer/transformer_tied/logits.npy", tol, tol);
}

TEST_CASE("nn::transformer: five AdamW steps with two groups equal torch.optim.AdamW's, tied and untied",
          "[nn][modules][optim]") {
  check_lm_steps("transformer_untied", nn::embeddings::untied, 21);
  check_lm_steps("transformer_tied", nn::embeddings::tied, 20);
}

// --- decoding with key/value caches ---

TEST_CASE("nn::rotary_attention with a key/value cache: a prompt then one token at a time equals the causal forward",
          "[nn][modules][kv_cache]") {
  for (const std::size_t window : {std::size_t{0}, std::size_t{3}}) {
    const std::string dir = std::string("transformer/") + (window ? "rotary_attention_window/" : "rotary_attention/");
    INFO(dir);
    nn::rotary_attention<double, posn, d_model, heads, kv_heads, d_head> m(d_model{8}, heads{4}, kv_heads{2},
                                                                          d_head{4});
    m.window = window;
    dimsum::load_npy_dir(golden::fixture(dir + "params"), m);
    const auto x = golden::load<xm_t>(dir + "x.npy");      // (batch 2, posn 5, d_model 8)
    const auto want = golden::load<xm_t>(dir + "y.npy");
    auto cache = m.make_cache(5, batch{2});
    static_assert(std::is_same_v<decltype(cache), kv_cache<double, decltype(m)::key_posn, batch,
                                                           decltype(m)::key_posn, kv_heads, d_head>>);
    // positions [0, 2) as a prompt, then 2, 3 and 4 one by one
    const std::size_t bounds[] = {0, 2, 3, 4, 5};
    for (std::size_t c = 0; c + 1 < std::size(bounds); ++c) {
      const std::size_t p0 = bounds[c], p1 = bounds[c + 1];
      const xm_t y = m(slice<posn>(x, p0, p1), cache);
      CHECK(cache.size() == p1);
      REQUIRE(y.extent<posn>() == p1 - p0);
      for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t p = p0; p < p1; ++p)
          for (std::size_t d = 0; d < 8; ++d)
            CHECK(y(batch{b}, posn{p - p0}, d_model{d}) ==
                  Approx(want(batch{b}, posn{p}, d_model{d})).margin(1e-12));
    }
    // full: refused, and the cache keeps its five positions
    CHECK_THROWS_AS(m(slice<posn>(x, 0, 1), cache), shape_error);
    CHECK(cache.size() == 5);
  }
}

TEST_CASE("nn::transformer with key/value caches: decoding token by token equals PyTorch's logits",
          "[nn][modules][kv_cache]") {
  const std::string dir = "transformer/transformer_tied/";
  lm_t m = make_lm(nn::embeddings::tied);
  dimsum::load_npy_dir(golden::fixture(dir + "params"), m);
  const auto ids = golden::load<ids_t>(dir + "ids.npy");
  const auto want = golden::load<logits_t>(dir + "logits.npy");
  auto cache = m.make_cache(8, batch{2});
  REQUIRE(cache.size() == 2);
  for (std::size_t p = 0; p < 5; ++p) {
    const logits_t logits = m(slice<posn>(ids, p, p + 1), cache);
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t v = 0; v < 11; ++v)
        CHECK(logits(batch{b}, posn{0}, vocab{v}) == Approx(want(batch{b}, posn{p}, vocab{v})).margin(1e-12));
  }
  CHECK(cache[0].size() == 5);
  CHECK(cache[1].size() == 5);
  auto one = m.make_cache(8, batch{2});
  one.pop_back();
  CHECK_THROWS_WITH(m(ids, one), Catch::Contains("1 key/value caches for 2 layers"));
}
