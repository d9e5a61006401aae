// The tape forms of the nn modules: nn::embedding (emb(tape, ids)),
// nn::linear (lin(x) on a var, lin(tape, x) on a tensor), nn::layer_norm
// (ln(x) on a var) and seed 004's self_attention_v2 (sa(x) on a var) record
// on the tape and give their parameters gradients. Checked against PyTorch
// float64 autograd (tests/reference/make_nn_fixtures.py, and
// make_attention_grad_fixtures.py for SelfAttention_v2) and central finite
// differences of the tensor forms.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <dimsum/grad/grad.hpp>
#include <dimsum/io/npy_dir.hpp>
#include <dimsum/nn/embedding.hpp>
#include <dimsum/nn/layer_norm.hpp>
#include <dimsum/nn/linear.hpp>
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
  const auto want_grads = values_by_name(want);
  std::size_t checked = 0;
  nn::for_each_parameter(m, [&](const std::string& name, const auto& p) {
    const auto& w = want_grads.at(name);
    REQUIRE(w.size() == p.grad.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      INFO(name << "[" << i << "]");
      CHECK(p.grad.data()[i] == Approx(w[i]).margin(1e-12));
      ++checked;
    }
  });
  CHECK(checked == 7 * 4 + 5 * 4 + 5 + 5 + 5 + 3 * 5);
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
    // into a double module. dimsum runs in float32: each element within 1e-4
    // of its tensor's largest element plus 1e-5 of the module's, the bound
    // tests/unit/train_seed_attention_grads.cpp justifies for these fixtures.
    nn::seeds::self_attention_v2<double, d_in, d_out> want(d_in{3}, d_out{2}, bias);
    dimsum::load_npy_dir(fixtures + "attention_grad/" + c, want, dimsum::non_strict, dimsum::underscored);
    const auto want_grads = values_by_name(want);
    double module = 0;
    for (const auto& [name, g] : want_grads)
      for (double v : g) module = std::max(module, std::abs(v));
    std::size_t checked = 0;
    nn::for_each_parameter(sa, [&](const std::string& name, const auto& p) {
      const auto& w = want_grads.at(name);
      double scale = 0;
      for (double v : w) scale = std::max(scale, std::abs(v));
      for (std::size_t i = 0; i < w.size(); ++i) {
        INFO(name << "[" << i << "]");
        CHECK(std::abs(double(p.grad.data()[i]) - w[i]) <= 1e-4 * scale + 1e-5 * module);
        ++checked;
      }
    });
    CHECK(checked == (bias ? 3 * (6 + 2) : 3 * 6));
  }
}
