// The tape forms of the nn modules: nn::embedding (emb(tape, ids)),
// nn::linear (lin(x) on a var, lin(tape, x) on a tensor), nn::layer_norm
// (ln(x) on a var), seed 004's self_attention_v2 (sa(x) on a var), seed
// 003's nn::multi_head_attention (mha(q, k, v, mask) on vars) and seed 001's
// char_head (head.forward<...>(x) on a var) record on the tape and give
// their parameters gradients. Checked against PyTorch float64 autograd
// (tests/reference/make_nn_fixtures.py, and make_attention_grad_fixtures.py
// for SelfAttention_v2) and central finite differences of the tensor forms.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <dimsum/grad/grad.hpp>
#include <dimsum/io/npy_dir.hpp>
#include <dimsum/nn/attention.hpp>
#include <dimsum/nn/dropout.hpp>
#include <dimsum/nn/embedding.hpp>
#include <dimsum/nn/layer_norm.hpp>
#include <dimsum/nn/linear.hpp>
#include <dimsum/nn/seeds/char_head.hpp>
#include <dimsum/nn/seeds/self_attention.hpp>

namespace {
DIMSUM_DIM(vocab);
DIMSUM_DIM(emb);
DIMSUM_DIM(hid);
DIMSUM_DIM(cls);
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(token);
DIMSUM_DIM(d_in);
DIMSUM_DIM(d_out);
DIMSUM_DIM(nheads);
DIMSUM_DIM(dim_k);
DIMSUM_DIM(q_seq);
DIMSUM_DIM(kv_seq);
DIMSUM_DIM(head_size);
DIMSUM_DIM(q_time);
DIMSUM_DIM(k_time);
DIMSUM_DIM(one);  // the size-1 axis of seed 003's (batch, 1, kv_seq) padding mask

namespace nn = dimsum::nn;
using dimsum::tensor;

// The fixture script's model, by the same member names.
struct tiny {
  BOOST_HANA_DEFINE_STRUCT(tiny, (nn::embedding<double, vocab, emb>, embed), (nn::linear<double, emb, hid>, up),
                           (nn::layer_norm<double, hid>, ln), (nn::linear<double, hid, cls>, head));
};

tiny make_tiny() {
  tiny m;
  m.embed = nn::embedding<double, vocab, emb>(vocab{7}, emb{4});
  m.up = nn::linear<double, emb, hid>(emb{4}, hid{5});
  m.ln = nn::layer_norm<double, hid>(hid{5});
  m.head = nn::linear<double, hid, cls>(hid{5}, cls{3}, false);
  return m;
}

std::string fixture(const std::string& name) {
  return std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/nn/tape/" + name;
}

struct inputs {
  tensor<std::int64_t, batch, posn> ids = dimsum::load_npy<tensor<std::int64_t, batch, posn>>(fixture("ids.npy"));
  tensor<double, batch, emb> x = dimsum::load_npy<tensor<double, batch, emb>>(fixture("x.npy"));
  tensor<double, batch, posn, cls> r = dimsum::load_npy<tensor<double, batch, posn, cls>>(fixture("r.npy"));
  tensor<double, batch, hid> r2 = dimsum::load_npy<tensor<double, batch, hid>>(fixture("r2.npy"));
};

// The loss of the fixture script with the tensor forms (no tape).
double tensor_loss(const tiny& m, const inputs& in) {
  const tensor<double, batch, posn, cls> y = m.head(m.ln(m.up(m.embed(in.ids))));
  const tensor<double, batch, hid> y2 = m.up(in.x);
  return dimsum::eval(dimsum::sum<batch, posn, cls>(y * in.r)).item() +
         dimsum::eval(dimsum::sum<batch, hid>(y2 * in.r2)).item();
}

template <class M>
std::map<std::string, std::vector<double>> values_by_name(const M& m) {
  std::map<std::string, std::vector<double>> out;
  nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
    out[name].assign(p.value.data(), p.value.data() + p.value.size());
  });
  return out;
}

/// Every parameter gradient of m against the one stored under `want` (a
/// module of m's kind loaded with PyTorch's gradients), each element within
/// `margin`; returns the number of elements checked.
template <class M>
std::size_t expect_grads(const M& m, const M& want, double margin) {
  const auto want_grads = values_by_name(want);
  std::size_t checked = 0;
  nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
    const auto& w = want_grads.at(name);
    REQUIRE(w.size() == p.grad.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      INFO(name << "[" << i << "]");
      CHECK(p.grad.data()[i] == Approx(w[i]).margin(margin));
      ++checked;
    }
  });
  return checked;
}

/// Every parameter gradient of a float module m against the float64 ones
/// stored under `want`: each element within 1e-4 of its tensor's largest
/// element plus 1e-5 of the module's largest, the bound
/// tests/unit/train_seed_attention_grads.cpp justifies for the seeds'
/// fixtures; returns the number of elements checked.
template <class M, class W>
std::size_t expect_grads_within_float32(const M& m, const W& want) {
  const auto want_grads = values_by_name(want);
  double module = 0;
  for (const auto& [name, g] : want_grads)
    for (double v : g) module = std::max(module, std::abs(v));
  std::size_t checked = 0;
  nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
    const auto& w = want_grads.at(name);
    REQUIRE(w.size() == p.grad.size());
    double scale = 0;
    for (double v : w) scale = std::max(scale, std::abs(v));
    for (std::size_t i = 0; i < w.size(); ++i) {
      INFO(name << "[" << i << "]");
      CHECK(std::abs(double(p.grad.data()[i]) - w[i]) <= 1e-4 * scale + 1e-5 * module);
      ++checked;
    }
  });
  return checked;
}

/// Every parameter gradient of m (filled by a backward pass) against the
/// central difference (loss(w + h) - loss(w - h)) / 2h of `loss`, a
/// function of m computing the same loss with the tensor forms; returns the
/// number of elements checked.
template <class M, class Loss>
std::size_t expect_finite_differences(M& m, Loss loss, double margin) {
  const double step = 1e-6;
  std::size_t checked = 0;
  nn::for_each_parameter(m, [&](const std::string& name, auto& p) {
    for (std::size_t i = 0; i < p.value.size(); ++i) {
      const double keep = p.value.data()[i];
      p.value.data()[i] = keep + step;
      const double plus = loss(m);
      p.value.data()[i] = keep - step;
      const double minus = loss(m);
      p.value.data()[i] = keep;
      INFO(name << "[" << i << "]");
      CHECK(p.grad.data()[i] == Approx((plus - minus) / (2 * step)).margin(margin));
      ++checked;
    }
  });
  return checked;
}

template <class T, dimsum::dimension... Ds>
void expect_values(const tensor<T, Ds...>& got, const std::string& path, double margin) {
  const auto want = dimsum::load_npy<tensor<double, Ds...>>(path);
  REQUIRE(got.extents() == want.extents());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(path << "[" << i << "]");
    CHECK(double(got.data()[i]) == Approx(want.data()[i]).margin(margin));
  }
}

// seed 003's MultiHeadAttention(num_heads=2, emb_dim=4, dim_k=3), as the fixtures.
using mha_t = nn::multi_head_attention<double, emb, nheads, dim_k>;
mha_t make_mha(const std::string& params) {
  mha_t m(nheads{2}, emb{4}, dim_k{3});
  if (!params.empty()) dimsum::load_npy_dir(params, m);  // strict: exactly the eight keys
  return m;
}

// seed 001's Head(head_size=3) over n_embd = 4, as the fixtures.
using head_t = nn::seeds::char_head<double, emb, head_size>;
head_t make_head(const std::string& params) {
  head_t m(emb{4}, head_size{3});
  if (!params.empty()) dimsum::load_npy_dir(params, m);
  return m;
}
}  // namespace

TEST_CASE("nn_tape: modules called on vars give every parameter PyTorch's gradient") {
  tiny m = make_tiny();
  dimsum::load_npy_dir(fixture("params"), m);  // strict: exactly the six keys of the state dict
  const inputs in;

  dimsum::grad::tape t;
  auto h = m.embed(t, in.ids);        // self.embed(ids): a var (batch, posn, emb)
  auto y = m.head(m.ln(m.up(h)));     // self.head(self.ln(self.up(h)))
  auto x = t.watch(in.x);             // an input whose gradient we want
  auto y2 = m.up(x);
  static_assert(std::is_same_v<decltype(y), dimsum::grad::var<double, batch, posn, cls>>);
  static_assert(std::is_same_v<decltype(y2), dimsum::grad::var<double, batch, hid>>);
  auto loss = dimsum::sum<batch, posn, cls>(y * in.r) + dimsum::sum<batch, hid>(y2 * in.r2);
  t.backward(loss);

  const double want_loss = dimsum::load_npy<tensor<double>>(fixture("loss.npy")).item();
  CHECK(loss.item() == Approx(want_loss).epsilon(1e-13));
  const auto want_y = dimsum::load_npy<tensor<double, batch, posn, cls>>(fixture("y.npy"));
  for (std::size_t i = 0; i < want_y.size(); ++i) CHECK(y.value().data()[i] == Approx(want_y.data()[i]).margin(1e-13));

  // PyTorch's gradients, read into a second model by the same dotted names.
  tiny want = make_tiny();
  dimsum::load_npy_dir(fixture("grads"), want);
  CHECK(expect_grads(m, want, 1e-12) == 7 * 4 + 5 * 4 + 5 + 5 + 5 + 3 * 5);
  const auto want_gx = dimsum::load_npy<tensor<double, batch, emb>>(fixture("grad_x.npy"));
  const auto& gx = dimsum::gradient<batch, emb>(x);
  for (std::size_t i = 0; i < want_gx.size(); ++i) CHECK(gx.data()[i] == Approx(want_gx.data()[i]).margin(1e-12));

  // Id 1 occurs three times: its row's gradient is the sum of three rows.
  double row1 = 0;
  for (std::size_t e = 0; e < 4; ++e) row1 += std::abs(m.embed.weight.grad(vocab{1}, emb{e}));
  CHECK(row1 > 0);
  for (std::size_t e = 0; e < 4; ++e) CHECK(m.embed.weight.grad(vocab{2}, emb{e}) == 0.0);  // id 2 never occurs
}

TEST_CASE("nn_tape: the gradients equal central finite differences of the tensor forms") {
  tiny m = make_tiny();
  dimsum::load_npy_dir(fixture("params"), m);
  const inputs in;
  {
    dimsum::grad::tape t;
    auto y = m.head(m.ln(m.up(m.embed(t, in.ids))));
    auto y2 = m.up(t, in.x);  // a tensor input: a constant of the tape
    t.backward(dimsum::sum<batch, posn, cls>(y * in.r) + dimsum::sum<batch, hid>(y2 * in.r2));
  }
  const double step = 1e-6;
  std::size_t checked = 0;
  nn::for_each_parameter(m, [&](const std::string& name, auto& p) {
    for (std::size_t i = 0; i < p.value.size(); ++i) {
      const double keep = p.value.data()[i];
      p.value.data()[i] = keep + step;
      const double plus = tensor_loss(m, in);
      p.value.data()[i] = keep - step;
      const double minus = tensor_loss(m, in);
      p.value.data()[i] = keep;
      INFO(name << "[" << i << "]");
      CHECK(p.grad.data()[i] == Approx((plus - minus) / (2 * step)).margin(1e-7));
      ++checked;
    }
  });
  CHECK(checked == 78);
}

TEST_CASE("nn_tape: a module's var form computes what its tensor form does, and accumulates over calls") {
  nn::linear<double, emb, hid> lin(emb{4}, hid{5});
  lin.reset_parameters(11);
  const auto x = tensor<double, batch, emb>::random_normal(5, batch{3}, emb{4});
  const tensor<double, batch, hid> want = lin(x);
  dimsum::grad::tape t;
  auto a = lin(t.constant(x));
  auto b = lin(t, x);
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(a.value().data()[i] == want.data()[i]);
    CHECK(b.value().data()[i] == want.data()[i]);
  }
  // Two calls, each watched once: the bias gradient is the sum of both,
  // d/db sum(a) + d/db sum(b) = 2 * batch for every element.
  t.backward(dimsum::sum<batch, hid>(a) + dimsum::sum<batch, hid>(b));
  for (std::size_t o = 0; o < 5; ++o) CHECK(lin.bias->grad(hid{o}) == 6.0);
  // d/dW[o, e] = 2 * sum over the batch of x[., e]
  for (std::size_t e = 0; e < 4; ++e) {
    double col = 0;
    for (std::size_t n = 0; n < 3; ++n) col += x(batch{n}, emb{e});
    CHECK(lin.weight.grad(hid{2}, emb{e}) == Approx(2 * col).epsilon(1e-14));
  }
}

TEST_CASE("nn_tape: a var on no tape cannot be given to a module") {
  nn::linear<double, emb, hid> lin(emb{4}, hid{5});
  nn::layer_norm<double, hid> ln(hid{5});
  dimsum::grad::var<double, batch, emb> orphan;  // on no tape
  dimsum::grad::var<double, batch, hid> orphan_h;
  CHECK_THROWS_AS(lin(orphan), dimsum::grad::tape_error);
  CHECK_THROWS_WITH(lin(orphan), Catch::StartsWith("nn::linear: the input var is on no tape"));
  CHECK_THROWS_WITH(ln(orphan_h), Catch::StartsWith("nn::layer_norm: the input var is on no tape"));
}

TEST_CASE("nn_tape: SelfAttention_v2 called on a var gives PyTorch's gradients, with and without qkv bias") {
  const std::string fixtures = std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/";
  const auto inputs = dimsum::load_npy<tensor<float, token, d_in>>(fixtures + "seed004/inputs.npy");
  for (bool bias : {false, true}) {
    const std::string c = bias ? "seed004_sa_v2_bias" : "seed004_sa_v2";
    INFO(c);
    nn::seeds::self_attention_v2<float, d_in, d_out> sa(d_in{3}, d_out{2}, bias);
    dimsum::load_npy_dir(fixtures + (bias ? "seed004/sa_v2_bias" : "seed004/sa_v2"), sa, dimsum::non_strict,
                         dimsum::underscored);
    dimsum::grad::tape t;
    auto context = sa(t.constant(inputs));  // sa_v2(inputs)
    static_assert(std::is_same_v<decltype(context), dimsum::grad::var<float, token, d_out>>);
    const tensor<float, token, d_out> untaped = sa(inputs);
    for (std::size_t i = 0; i < untaped.size(); ++i) CHECK(context.value().data()[i] == untaped.data()[i]);
    const auto r = dimsum::load_npy<tensor<float, token, d_out>>(fixtures + "attention_grad/" + c + "/r.npy");
    t.backward(dimsum::sum<token, d_out>(context * r));

    // PyTorch's float64 gradients (W_query_weight.npy, ...) read by member name
    // into a double module; dimsum runs in float32.
    nn::seeds::self_attention_v2<double, d_in, d_out> want(d_in{3}, d_out{2}, bias);
    dimsum::load_npy_dir(fixtures + "attention_grad/" + c, want, dimsum::non_strict, dimsum::underscored);
    CHECK(expect_grads_within_float32(sa, want) == (bias ? 3 * (6 + 2) : 3 * 6));
  }
}

TEST_CASE("nn_tape: multi_head_attention on vars, cross-attention with a padding mask, gives PyTorch's gradients") {
  const std::string dir = fixture("mha_cross/");
  mha_t mha = make_mha(dir + "params");  // dropout p = 0.1, not training: eval mode, the identity
  const auto q_in = dimsum::load_npy<tensor<double, batch, q_seq, emb>>(dir + "q_in.npy");
  const auto kv_in = dimsum::load_npy<tensor<double, batch, kv_seq, emb>>(dir + "kv_in.npy");
  const auto mask = dimsum::load_npy<tensor<bool, batch, kv_seq>>(dir + "mask.npy");
  const auto r = dimsum::load_npy<tensor<double, batch, q_seq, emb>>(dir + "r.npy");

  dimsum::grad::tape t;
  auto q = t.watch(q_in);
  auto kv = t.watch(kv_in);  // keys and values: its gradient is the sum of both
  auto out = mha(q, kv, kv, mask);  // output, _ = mha(q, kv, kv, mask)
  static_assert(std::is_same_v<decltype(out), dimsum::grad::var<double, batch, q_seq, emb>>);
  auto loss = dimsum::sum<batch, q_seq, emb>(out * r);
  t.backward(loss);

  CHECK(loss.item() == Approx(dimsum::load_npy<tensor<double>>(dir + "loss.npy").item()).epsilon(1e-13));
  expect_values(out.value(), dir + "output.npy", 1e-13);
  CHECK(expect_grads(mha, make_mha(dir + "grads"), 1e-12) == 3 * (6 * 4 + 6) + 4 * 6 + 4);
  expect_values(dimsum::gradient(q), dir + "grad_q_in.npy", 1e-12);
  expect_values(dimsum::gradient(kv), dir + "grad_kv_in.npy", 1e-12);

  // The tensor form, on the unfused path, gives the same output.
  const auto untaped = mha(q_in, kv_in, kv_in, mask);
  for (std::size_t i = 0; i < untaped.output.size(); ++i)
    CHECK(out.value().data()[i] == Approx(untaped.output.data()[i]).margin(1e-14));

  // Inputs in other dim orders (found by name): heads are split at another
  // position and read through other strides; the same numbers come out.
  mha_t again = make_mha(dir + "params");
  const tensor<double, emb, q_seq, batch> q_perm = q_in;
  const tensor<double, kv_seq, emb, batch> kv_perm = kv_in;
  dimsum::grad::tape t2;
  auto qp = t2.watch(q_perm);
  auto kvp = t2.watch(kv_perm);
  auto out2 = again(qp, kvp, kvp, mask);
  static_assert(std::is_same_v<decltype(out2), dimsum::grad::var<double, batch, q_seq, emb>>);
  t2.backward(dimsum::sum<batch, q_seq, emb>(out2 * r));
  expect_values(out2.value(), dir + "output.npy", 1e-13);
  CHECK(expect_grads(again, make_mha(dir + "grads"), 1e-12) == 3 * (6 * 4 + 6) + 4 * 6 + 4);
  const tensor<double, batch, q_seq, emb> gq = dimsum::gradient(qp);
  const tensor<double, batch, kv_seq, emb> gkv = dimsum::gradient(kvp);
  expect_values(gq, dir + "grad_q_in.npy", 1e-12);
  expect_values(gkv, dir + "grad_kv_in.npy", 1e-12);
}

TEST_CASE("nn_tape: multi_head_attention on vars, self-attention with a fully masked query row, p = 0 in training") {
  const std::string dir = fixture("mha_self_masked_row/");
  mha_t mha = make_mha(dir + "params");
  mha.drop = nn::dropout(0.0, true);  // training, p = 0: the identity, and the fused path
  const auto x_in = dimsum::load_npy<tensor<double, batch, q_seq, emb>>(dir + "q_in.npy");
  const auto mask = dimsum::load_npy<tensor<bool, batch, q_seq, kv_seq>>(dir + "mask.npy");
  const auto r = dimsum::load_npy<tensor<double, batch, q_seq, emb>>(dir + "r.npy");

  dimsum::grad::tape t;
  auto x = t.watch(x_in);
  auto kv = dimsum::rename<q_seq, kv_seq>(x);  // the key positions: the same var under a second name
  mha_t::trace<batch, q_seq, kv_seq> tr;
  auto out = mha(x, kv, kv, mask, &tr);
  t.backward(dimsum::sum<batch, q_seq, emb>(out * r));

  expect_values(out.value(), dir + "output.npy", 1e-13);
  CHECK(expect_grads(mha, make_mha(dir + "grads"), 1e-12) == 3 * (6 * 4 + 6) + 4 * 6 + 4);
  expect_values(dimsum::gradient(x), dir + "grad_q_in.npy", 1e-12);

  // The trace holds the tensor form's intermediates. Query 2 of batch 1
  // sees no key: its attention is the mean of that batch's values.
  mha_t::trace<batch, q_seq, kv_seq> want;
  const tensor<double, batch, kv_seq, emb> kv_in = dimsum::rename<q_seq, kv_seq>(x_in);
  (void)mha(x_in, kv_in, kv_in, mask, &want);
  for (std::size_t i = 0; i < want.concat.size(); ++i) {
    CHECK(tr.q_lin.data()[i] == want.q_lin.data()[i]);
    CHECK(tr.concat.data()[i] == Approx(want.concat.data()[i]).margin(1e-14));
  }
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t c = 0; c < 3; ++c) {
      double mean = 0;
      for (std::size_t j = 0; j < 4; ++j) mean += tr.v_heads(batch{1}, nheads{h}, kv_seq{j}, dim_k{c}) / 4;
      CHECK(tr.attn(batch{1}, nheads{h}, q_seq{2}, dim_k{c}) == Approx(mean).margin(1e-14));
    }
}

TEST_CASE("nn_tape: multi_head_attention's gradients equal central finite differences of its tensor form") {
  const std::string dir = fixture("mha_cross/");
  mha_t mha = make_mha(dir + "params");
  const auto q_in = dimsum::load_npy<tensor<double, batch, q_seq, emb>>(dir + "q_in.npy");
  const auto kv_in = dimsum::load_npy<tensor<double, batch, kv_seq, emb>>(dir + "kv_in.npy");
  const auto mask = dimsum::load_npy<tensor<bool, batch, kv_seq>>(dir + "mask.npy");
  const auto r = dimsum::load_npy<tensor<double, batch, q_seq, emb>>(dir + "r.npy");
  {
    dimsum::grad::tape t;
    t.backward(dimsum::sum<batch, q_seq, emb>(mha(t.constant(q_in), kv_in, kv_in, mask) * r));  // k, v: tensors
  }
  const auto loss = [&](mha_t& m) {
    return dimsum::eval(dimsum::sum<batch, q_seq, emb>(m(q_in, kv_in, kv_in, mask).output * r)).item();
  };
  CHECK(expect_finite_differences(mha, loss, 1e-7) == 3 * (6 * 4 + 6) + 4 * 6 + 4);
}

TEST_CASE("nn_tape: multi_head_attention with dropout in training draws the tensor form's mask, the same in both passes") {
  const std::string dir = fixture("mha_cross/");
  mha_t mha = make_mha(dir + "params");
  mha.drop = nn::dropout(0.5, true, 7);
  const auto q_in = dimsum::load_npy<tensor<double, batch, q_seq, emb>>(dir + "q_in.npy");
  const auto kv_in = dimsum::load_npy<tensor<double, batch, kv_seq, emb>>(dir + "kv_in.npy");
  const auto mask = dimsum::load_npy<tensor<bool, batch, kv_seq>>(dir + "mask.npy");
  const auto r = dimsum::load_npy<tensor<double, batch, q_seq, emb>>(dir + "r.npy");

  const auto untaped = mha(q_in, kv_in, kv_in, mask);  // the tensor form draws with seed 7
  CHECK(mha.drop.seed == 8);
  mha.drop.seed = 7;
  dimsum::grad::tape t;
  auto out = mha(t.constant(q_in), kv_in, kv_in, mask);
  CHECK(mha.drop.seed == 8);  // one mask per call, as the tensor form
  // The attention on this path is six nodes (scores, scale, mask, softmax,
  // dropout, weighted sum); without dropout it is one fused node, and the
  // layers around it are the same.
  {
    mha.drop.training = false;
    dimsum::grad::tape fused;
    (void)mha(fused.constant(q_in), kv_in, kv_in, mask);
    CHECK(t.size() == fused.size() + 5);
    mha.drop.training = true;
  }
  for (std::size_t i = 0; i < untaped.output.size(); ++i)
    CHECK(out.value().data()[i] == Approx(untaped.output.data()[i]).margin(1e-14));
  // The output differs from eval mode's: the mask dropped something.
  mha.drop.training = false;
  const auto eval_mode = mha(q_in, kv_in, kv_in, mask);
  double differs = 0;
  for (std::size_t i = 0; i < eval_mode.output.size(); ++i)
    differs = std::max(differs, std::abs(eval_mode.output.data()[i] - untaped.output.data()[i]));
  CHECK(differs > 1e-3);
  mha.drop.training = true;

  t.backward(dimsum::sum<batch, q_seq, emb>(out * r));
  // Finite differences of the tensor form with the same mask (seed 7 each
  // time): the backward used the forward's mask, or these would differ.
  const auto loss = [&](mha_t& m) {
    m.drop.seed = 7;
    return dimsum::eval(dimsum::sum<batch, q_seq, emb>(m(q_in, kv_in, kv_in, mask).output * r)).item();
  };
  CHECK(expect_finite_differences(mha, loss, 1e-7) == 3 * (6 * 4 + 6) + 4 * 6 + 4);
}

TEST_CASE("nn_tape: char_head on a var gives PyTorch's gradients and its tensor form's output") {
  const std::string dir = fixture("char_head/");
  head_t head = make_head(dir + "params");
  const auto x_in = dimsum::load_npy<tensor<double, batch, posn, emb>>(dir + "x.npy");
  const auto r = dimsum::load_npy<tensor<double, batch, posn, head_size>>(dir + "r.npy");

  dimsum::grad::tape t;
  auto x = t.watch(x_in);
  auto out = head.forward<posn, q_time, k_time>(x);  // head(x)
  static_assert(std::is_same_v<decltype(out), dimsum::grad::var<double, batch, posn, head_size>>);
  auto loss = dimsum::sum<batch, posn, head_size>(out * r);
  t.backward(loss);

  CHECK(loss.item() == Approx(dimsum::load_npy<tensor<double>>(dir + "loss.npy").item()).epsilon(1e-13));
  expect_values(out.value(), dir + "out.npy", 1e-13);
  CHECK(expect_grads(head, make_head(dir + "grads"), 1e-12) == 3 * 3 * 4);
  expect_values(dimsum::gradient(x), dir + "grad_x.npy", 1e-12);

  const tensor<double, batch, posn, head_size> untaped = head.forward<posn, q_time, k_time>(x_in);
  for (std::size_t i = 0; i < untaped.size(); ++i) CHECK(out.value().data()[i] == Approx(untaped.data()[i]).margin(1e-14));
}

TEST_CASE("nn_tape: char_head's gradients equal central finite differences of its tensor form") {
  const std::string dir = fixture("char_head/");
  head_t head = make_head(dir + "params");
  const auto x_in = dimsum::load_npy<tensor<double, batch, posn, emb>>(dir + "x.npy");
  const auto r = dimsum::load_npy<tensor<double, batch, posn, head_size>>(dir + "r.npy");
  {
    dimsum::grad::tape t;
    t.backward(dimsum::sum<batch, posn, head_size>(head.forward<posn, q_time, k_time>(t.constant(x_in)) * r));
  }
  const auto loss = [&](const head_t& m) {
    const tensor<double, batch, posn, head_size> y = m.forward<posn, q_time, k_time>(x_in);
    return dimsum::eval(dimsum::sum<batch, posn, head_size>(y * r)).item();
  };
  CHECK(expect_finite_differences(head, loss, 1e-7) == 3 * 3 * 4);
}

TEST_CASE("nn_tape: attention modules refuse a var on no tape") {
  mha_t mha = make_mha("");
  head_t head = make_head("");
  dimsum::grad::var<double, batch, q_seq, emb> orphan_q;
  dimsum::grad::var<double, batch, posn, emb> orphan_x;
  const tensor<double, batch, kv_seq, emb> kv(batch{1}, kv_seq{2}, emb{4});
  CHECK_THROWS_WITH(mha(orphan_q, kv, kv), Catch::StartsWith("nn::multi_head_attention: the input var is on no tape"));
  CHECK_THROWS_WITH((head.forward<posn, q_time, k_time>(orphan_x)), Catch::StartsWith("nn::linear: the input var is on no tape"));
}

TEST_CASE("nn_tape: multi_head_attention on float vars gives seed 003's PyTorch gradients within float32 tolerance") {
  // The seed's weights and inputs (float32) and PyTorch's float64 gradients
  // of them (make_attention_grad_fixtures.py), as
  // tests/unit/train_seed_attention_grads.cpp writes the module op by op;
  // here it is the module's own tape form, fused, with that test's tolerance.
  const std::string fixtures = std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/";
  for (const std::string c : {"cross_padmask", "self_causalmask"}) {
    INFO(c);
    const bool cross = c == "cross_padmask";
    const std::string dir = fixtures + "seed003/mha_" + c + "/";
    nn::multi_head_attention<float, emb, nheads, dim_k> mha(nheads{6}, emb{5}, dim_k{4});
    dimsum::load_npy_dir(fixtures + "seed003/mha", mha, dimsum::non_strict, dimsum::underscored);
    const auto q_in = dimsum::load_npy<tensor<float, batch, q_seq, emb>>(dir + "q_in.npy");
    const auto r = dimsum::load_npy<tensor<float, batch, q_seq, emb>>(fixtures + "attention_grad/seed003_" + c + "/r.npy");
    dimsum::grad::tape t;
    auto q = t.constant(q_in);
    if (cross) {
      // the seed's (batch, 1, kv_seq) padding mask as (batch, kv_seq)
      const auto m = dimsum::load_npy<tensor<bool, batch, one, kv_seq>>(dir + "mask.npy");
      tensor<bool, batch, kv_seq> mask(batch{m.extent<batch>()}, kv_seq{m.extent<kv_seq>()});
      std::copy(m.data(), m.data() + m.size(), mask.data());
      const auto kv = dimsum::load_npy<tensor<float, batch, kv_seq, emb>>(dir + "kv_in.npy");
      t.backward(dimsum::sum<batch, q_seq, emb>(mha(q, kv, kv, mask) * r));
    } else {
      const auto mask = dimsum::load_npy<tensor<bool, batch, q_seq, kv_seq>>(dir + "mask.npy");
      auto kv = dimsum::rename<q_seq, kv_seq>(q);
      t.backward(dimsum::sum<batch, q_seq, emb>(mha(q, kv, kv, mask) * r));
    }
    nn::multi_head_attention<double, emb, nheads, dim_k> want(nheads{6}, emb{5}, dim_k{4});
    dimsum::load_npy_dir(fixtures + "attention_grad/seed003_" + c, want, dimsum::non_strict, dimsum::underscored);
    CHECK(expect_grads_within_float32(mha, want) == 3 * (24 * 5 + 24) + 5 * 24 + 5);
  }
}

TEST_CASE("nn_tape: nn::dropout called on a var draws the tensor form's mask and uses it in the backward") {
  const tensor<double, batch, emb> x = tensor<double, batch, emb>::random_normal(3, batch{4}, emb{5});
  nn::dropout drop(0.25, true, 11);
  const tensor<double, batch, emb> ones = tensor<double, batch, emb>::ones(batch{4}, emb{5});
  const auto mask = drop(ones);  // the tensor form with seed 11: each element 0 or 1 / (1 - 0.25)
  CHECK(drop.seed == 12);
  drop.seed = 11;
  dimsum::grad::tape t;
  auto v = t.watch(x);
  auto y = drop(v);
  CHECK(drop.seed == 12);  // one mask per call, as the tensor form
  static_assert(std::is_same_v<decltype(y), decltype(v)>);
  t.backward(dimsum::sum<batch, emb>(y));
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double m = mask.data()[i];
    CHECK((m == 0.0 || m == 1.0 / 0.75));
    dropped += m == 0.0;
    CHECK(y.value().data()[i] == x.data()[i] * m);
    CHECK(dimsum::gradient(v).data()[i] == m);  // d sum(x * m) / dx
  }
  CHECK(dropped > 0);
  CHECK(dropped < x.size());
  // In inference, and at p = 0, the var itself: no node, no mask drawn.
  drop.training = false;
  dimsum::grad::tape t2;
  auto w = t2.watch(x);
  const std::size_t nodes = t2.size();
  auto same = drop(w);
  CHECK(t2.size() == nodes);
  CHECK(same.node() == w.node());
  CHECK(drop.seed == 12);
}
