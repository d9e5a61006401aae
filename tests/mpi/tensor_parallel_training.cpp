// Tensor-parallel training of seed 000's attention under mpirun: the heads
// of W_Q, W_K, W_V, W_O, b_Q, b_K, b_V split over mesh axis `model`, each
// rank's blocks watched on its own tape (dist::watch), the input entering
// the split region through dist::replicate (backward: all_reduce of the
// input gradient's parts), one all_reduce of the output (backward: the
// identity). Checked: loss and every gradient against PyTorch autograd in
// float64 (tests/reference/make_grad_fixtures.py; seed 000's 2 heads: 1 or
// 2 ranks) and against the single-process var layer with 8 heads (itself
// checked against PyTorch in tests/unit/grad_seed000.cpp) on 1, 2 and 4
// ranks; SGD and AdamW steps of the split model against the single-process
// steps; the adjoints of shard, all_gather and reduce_scatter against
// plain loops.
#include <catch2/catch.hpp>

#include <mpi.h>

#include "world.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <dimsum/dimsum.hpp>
#include <dimsum/distributed/dist.hpp>
#include <dimsum/grad/grad.hpp>
#include <dimsum/optim/optim.hpp>

#include "../../examples/attention.hpp"

namespace dist = dimsum::dist;
namespace grad = dimsum::grad;
using dimsum::tensor;
using seed000::batch;
using seed000::k_posn;
using seed000::posn;
using seed000::q_posn;

namespace {
DIMSUM_MESH_AXIS(model);
DIMSUM_DIM(d_model);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);

using weights = seed000::attention_weights<d_model, nheads, d_head>;
using split_heads = dist::split<nheads, model>;
using activations = tensor<float, batch, posn, d_model>;

std::string fixture(const std::string& name) { return std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/" + name; }

/// This rank's blocks of the heads of w (b_O whole): the parameters each
/// rank trains.
weights local_blocks(const dist::mesh<model>& m, const weights& w) {
  weights l;
  l.W_Q = dist::shard<split_heads>(m, w.W_Q.value).local();
  l.W_K = dist::shard<split_heads>(m, w.W_K.value).local();
  l.W_V = dist::shard<split_heads>(m, w.W_V.value).local();
  l.W_O = dist::shard<split_heads>(m, w.W_O.value).local();
  l.b_Q = dist::shard<split_heads>(m, w.b_Q.value).local();
  l.b_K = dist::shard<split_heads>(m, w.b_K.value).local();
  l.b_V = dist::shard<split_heads>(m, w.b_V.value).local();
  l.b_O = w.b_O.value;
  return l;
}

/// seed 000's attention on vars, tensor-parallel: `wl` holds this rank's
/// blocks; x is a var every rank holds in full.
grad::var<float, batch, posn, d_model> tensor_parallel_attention(grad::tape& t, const dist::mesh<model>& m,
                                                                  const grad::var<float, batch, posn, d_model>& x,
                                                                  weights& wl, bool fused) {
  const auto W_Q = dist::watch<split_heads>(t, m, wl.W_Q), W_K = dist::watch<split_heads>(t, m, wl.W_K),
             W_V = dist::watch<split_heads>(t, m, wl.W_V);
  const auto W_O = dist::watch<split_heads>(t, m, wl.W_O);
  const auto b_Q = dist::watch<split_heads>(t, m, wl.b_Q), b_K = dist::watch<split_heads>(t, m, wl.b_K),
             b_V = dist::watch<split_heads>(t, m, wl.b_V);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(W_Q)>,
                               dist::sharded<grad::var<float, nheads, d_model, d_head>, split_heads>>);
  // Megatron's f: identity forward, all_reduce of x's gradient backward.
  const auto xr = dist::replicate<model>(m, x);
  const auto q = dist::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(xr, W_Q) + b_Q;
  const auto k = dist::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(xr, W_K) + b_K;
  const auto v = dist::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(xr, W_V) + b_V;
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(q)>,
                               dist::sharded<grad::var<float, batch, posn, nheads, d_head>, split_heads>>);
  const float scale = std::sqrt(float(q.local().template extent<d_head>()));
  const auto z = [&] {
    if (!fused) {
      const auto scores =
          dist::einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(
              dist::rename<posn, q_posn>(q), dist::rename<posn, k_posn>(k)) /
          scale;
      const auto pattern = dist::softmax<k_posn>(
          dist::causal_mask<q_posn, k_posn>(scores, -std::numeric_limits<float>::infinity()));
      return dist::einsum<"batch k_posn nheads d_head, batch nheads q_posn k_posn -> batch q_posn nheads d_head">(
          dist::rename<posn, k_posn>(v), pattern);
    }
    return dist::map(
        [&](const auto& ql, const auto& kl, const auto& vl) {
          auto e = dimsum::einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
              dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(
                  dimsum::einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(
                      dimsum::rename<posn, q_posn>(ql), dimsum::rename<posn, k_posn>(kl)) /
                      scale,
                  -std::numeric_limits<float>::infinity())),
              dimsum::rename<posn, k_posn>(vl));
          static_assert(dimsum::uses_fused_attention_v<decltype(e)>);
          return e;
        },
        q, k, v);
  }();
  const auto partial_out = dist::einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(z, W_O);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(partial_out)>,
                               dist::sharded<grad::var<float, batch, q_posn, d_model>, dist::partial<model, nheads>>>);
  // Megatron's g: all_reduce forward, identity backward.
  const grad::var<float, batch, q_posn, d_model> out = dist::all_reduce(partial_out) + wl.b_O(t);
  return dimsum::rename<q_posn, posn>(out);
}

/// The single-process layer on vars (the code of tests/unit/grad_seed000.cpp).
grad::var<float, batch, posn, d_model> single_attention(grad::tape& t, const grad::var<float, batch, posn, d_model>& x,
                                                        weights& w) {
  using dimsum::einsum;
  auto q = einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w.W_Q(t)) + w.b_Q(t);
  auto k = einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w.W_K(t)) + w.b_K(t);
  auto v = einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w.W_V(t)) + w.b_V(t);
  const float scale = std::sqrt(float(w.W_Q.value.template extent<d_head>()));
  auto scores = einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(
      dimsum::rename<posn, q_posn>(q), dimsum::rename<posn, k_posn>(k));
  auto masked = dimsum::causal_mask<q_posn, k_posn>(scores / scale, -std::numeric_limits<float>::infinity());
  auto z = einsum<"batch k_posn nheads d_head, batch nheads q_posn k_posn -> batch q_posn nheads d_head">(
      dimsum::rename<posn, k_posn>(v), dimsum::softmax<k_posn>(masked));
  return dimsum::eval(dimsum::rename<q_posn, posn>(
      einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(z, w.W_O(t)) + w.b_O(t)));
}

/// |got - want| <= tol * max(1, max |want|) element by element.
template <class A, class B>
void expect_close(const A& got, const B& want, double tol, const std::string& what) {
  REQUIRE(got.extents() == want.extents());
  double scale = 1, worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) scale = std::max(scale, std::abs(double(want.data()[i])));
  for (std::size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(double(got.data()[i]) - double(want.data()[i])));
  INFO(what << " on rank " << world_rank() << " of " << world_size() << ": worst abs error " << worst << ", scale " << scale);
  CHECK(worst <= tol * scale);
}

/// This rank's block of a full tensor's heads.
template <class Tn>
Tn heads_block(const dist::mesh<model>& m, const Tn& full) {
  return dist::shard<split_heads>(m, full).local();
}

/// Every block parameter's gradient against the heads block of the full
/// one, and b_O's whole.
void expect_block_gradients(const dist::mesh<model>& m, const weights& tp, const weights& full, double tol) {
  expect_close(tp.W_Q.grad, heads_block(m, full.W_Q.grad), tol, "W_Q.grad");
  expect_close(tp.W_K.grad, heads_block(m, full.W_K.grad), tol, "W_K.grad");
  expect_close(tp.W_V.grad, heads_block(m, full.W_V.grad), tol, "W_V.grad");
  expect_close(tp.W_O.grad, heads_block(m, full.W_O.grad), tol, "W_O.grad");
  expect_close(tp.b_Q.grad, heads_block(m, full.b_Q.grad), tol, "b_Q.grad");
  expect_close(tp.b_K.grad, heads_block(m, full.b_K.grad), tol, "b_K.grad");
  expect_close(tp.b_V.grad, heads_block(m, full.b_V.grad), tol, "b_V.grad");
  expect_close(tp.b_O.grad, full.b_O.grad, tol, "b_O.grad");
}
void expect_block_values(const dist::mesh<model>& m, const weights& tp, const weights& full, double tol) {
  expect_close(tp.W_Q.value, heads_block(m, full.W_Q.value), tol, "W_Q");
  expect_close(tp.W_K.value, heads_block(m, full.W_K.value), tol, "W_K");
  expect_close(tp.W_V.value, heads_block(m, full.W_V.value), tol, "W_V");
  expect_close(tp.W_O.value, heads_block(m, full.W_O.value), tol, "W_O");
  expect_close(tp.b_Q.value, heads_block(m, full.b_Q.value), tol, "b_Q");
  expect_close(tp.b_K.value, heads_block(m, full.b_K.value), tol, "b_K");
  expect_close(tp.b_V.value, heads_block(m, full.b_V.value), tol, "b_V");
  expect_close(tp.b_O.value, full.b_O.value, tol, "b_O");
}
}  // namespace

TEST_CASE("tensor-parallel seed-000 attention on vars: loss and every gradient equal PyTorch's", "[mpi][seed000][grad]") {
  if (2 % world_size() != 0) {
    SUCCEED("seed 000's 2 heads do not split over " << world_size() << " ranks; the 8-head cases run here");
    return;
  }
  weights w(d_model{30}, nheads{2}, d_head{10});
  dimsum::load_npy_dir(fixture("seed000"), w, dimsum::non_strict);
  const auto x = dimsum::load_npy<activations>(fixture("seed000/x.npy"));
  const auto r = dimsum::load_npy<tensor<double, batch, posn, d_model>>(fixture("grad/seed000_r.npy"));
  const activations rf = dimsum::cast<float>(r);
  dist::mesh<model> m(MPI_COMM_WORLD, model{world_size()});
  for (bool fused : {false, true}) {
    INFO("fused " << fused);
    weights wl = local_blocks(m, w);
    grad::tape t;
    const auto xv = t.watch(x);
    const auto y = tensor_parallel_attention(t, m, xv, wl, fused);
    const auto loss = dimsum::einsum<>(y * rf);
    const auto want_loss = dimsum::load_npy<tensor<double>>(fixture("grad/seed000_loss.npy"));
    CHECK(loss.item() == Approx(want_loss.item()).margin(1e-4));
    t.backward(loss);
    auto want = [&](const std::string& name, const auto& got) {
      using W = dimsum::tensor_for_t<double, dimsum::dims_of_t<std::remove_cvref_t<decltype(got)>>>;
      return dimsum::load_npy<W>(fixture("grad/seed000_grad_" + name + ".npy"));
    };
    // Each rank's block of each split gradient is its heads of PyTorch's.
    expect_close(wl.W_Q.grad, heads_block(m, want("W_Q", w.W_Q.grad)), 2e-5, "W_Q.grad");
    expect_close(wl.W_K.grad, heads_block(m, want("W_K", w.W_K.grad)), 2e-5, "W_K.grad");
    expect_close(wl.W_V.grad, heads_block(m, want("W_V", w.W_V.grad)), 2e-5, "W_V.grad");
    expect_close(wl.W_O.grad, heads_block(m, want("W_O", w.W_O.grad)), 2e-5, "W_O.grad");
    expect_close(wl.b_Q.grad, heads_block(m, want("b_Q", w.b_Q.grad)), 2e-5, "b_Q.grad");
    expect_close(wl.b_K.grad, heads_block(m, want("b_K", w.b_K.grad)), 2e-5, "b_K.grad");
    expect_close(wl.b_V.grad, heads_block(m, want("b_V", w.b_V.grad)), 2e-5, "b_V.grad");
    expect_close(wl.b_O.grad, want("b_O", w.b_O.grad), 2e-5, "b_O.grad");
    // x's gradient: every rank's heads' parts, all_reduced by replicate's backward.
    expect_close(dimsum::gradient(xv), want("x", x), 2e-5, "x.grad");
  }
}

TEST_CASE("tensor-parallel attention on vars with 8 heads: loss and gradients equal the single-process layer's",
          "[mpi][grad]") {
  const auto w0 = weights::random(31, d_model{24}, nheads{8}, d_head{6});
  const auto x = activations::random_uniform(5, batch{3}, posn{9}, d_model{24});
  const auto r = activations::random_normal(6, batch{3}, posn{9}, d_model{24});
  dist::mesh<model> m(MPI_COMM_WORLD, model{world_size()});

  weights full = w0;
  grad::tape ts;
  const auto xs = ts.watch(x);
  const auto single_loss = dimsum::einsum<>(single_attention(ts, xs, full) * r);
  ts.backward(single_loss);

  weights wl = local_blocks(m, w0);
  grad::tape t;
  const auto xv = t.watch(x);
  const auto loss = dimsum::einsum<>(tensor_parallel_attention(t, m, xv, wl, /*fused=*/true) * r);
  CHECK(loss.item() == Approx(single_loss.item()).epsilon(1e-5).margin(1e-5));
  t.backward(loss);
  expect_block_gradients(m, wl, full, 2e-5);
  expect_close(dimsum::gradient(xv), dimsum::gradient(xs), 2e-5, "x.grad");

  // The gradient of a watched block, read through its sharded var, is placed
  // as the block is.
  grad::tape t2;
  weights wl2 = local_blocks(m, w0);
  const auto W = dist::watch<split_heads>(t2, m, wl2.W_Q);
  const auto s = dimsum::einsum<>(dist::all_reduce(dist::einsum<"nheads d_model d_head -> d_model">(W)));
  t2.backward(s);
  const auto g = dist::gradient(W);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(g)>,
                               dist::sharded<tensor<float, nheads, d_model, d_head>, split_heads>>);
  for (std::size_t i = 0; i < g.local().size(); ++i) CHECK(g.local().data()[i] == 1.0f);
  CHECK(g.extent<nheads>() == 8);
}

TEST_CASE("SGD and AdamW steps of the tensor-parallel attention equal the single-process steps", "[mpi][optim]") {
  const auto w0 = weights::random(41, d_model{16}, nheads{4}, d_head{4});
  const auto x = activations::random_uniform(7, batch{2}, posn{6}, d_model{16});
  const auto r = activations::random_normal(8, batch{2}, posn{6}, d_model{16});
  if (4 % world_size() != 0) return;
  dist::mesh<model> m(MPI_COMM_WORLD, model{world_size()});
  auto run = [&](auto& opt_full, auto& opt_tp) {
    weights full = w0;
    weights wl = local_blocks(m, w0);
    // b_K's gradient is 0 in exact arithmetic (softmax ignores a constant
    // added to a row of scores), so in float32 it is rounding noise, which
    // AdamW normalises into steps of size lr with random signs: frozen in
    // both models, it stays as it is (and its gradient at zeros).
    full.b_K.requires_grad = false;
    wl.b_K.requires_grad = false;
    for (int step = 0; step < 3; ++step) {
      INFO("step " << step);
      dimsum::nn::zero_grad(full);
      dimsum::nn::zero_grad(wl);
      grad::tape ts;
      const auto ls = dimsum::einsum<>(single_attention(ts, ts.constant(x), full) * r);
      ts.backward(ls);
      grad::tape t;
      const auto l = dimsum::einsum<>(tensor_parallel_attention(t, m, t.constant(x), wl, step % 2 == 0) * r);
      CHECK(l.item() == Approx(ls.item()).epsilon(1e-5).margin(1e-5));
      t.backward(l);
      expect_block_gradients(m, wl, full, 2e-5);
      opt_full.step(full);
      opt_tp.step(wl);
      expect_block_values(m, wl, full, 2e-5);
    }
  };
  SECTION("sgd with momentum") {
    dimsum::optim::sgd a({.lr = 0.1, .momentum = 0.9}), b({.lr = 0.1, .momentum = 0.9});
    run(a, b);
  }
  SECTION("adamw") {
    dimsum::optim::adamw a({.lr = 1e-2, .weight_decay = 0.1}), b({.lr = 1e-2, .weight_decay = 0.1});
    run(a, b);
  }
}

TEST_CASE("the adjoints of shard, all_gather and reduce_scatter on vars", "[mpi][grad]") {
  const int n = world_size(), me = world_rank();
  dist::mesh<model> m(MPI_COMM_WORLD, model{n});
  const std::size_t H = 2 * std::size_t(n), M = 3;
  // full(h, c) = h + 10 c; c(h, c) = 1 + h * c, the same on every rank.
  tensor<double, nheads, d_model> full(nheads{H}, d_model{M}), c(nheads{H}, d_model{M});
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t j = 0; j < M; ++j) {
      full(nheads{h}, d_model{j}) = double(h) + 10.0 * double(j);
      c(nheads{h}, d_model{j}) = 1.0 + double(h * j);
    }

  SECTION("shard: backward all_gathers the blocks' gradients into the full var's") {
    // loss = sum over every head of (shard(v) * c_block)^2 / 2, summed over
    // ranks by all_reduce: d loss / d v = v * c^2 everywhere.
    grad::tape t;
    const auto v = t.watch(full);
    const auto s = dist::shard<split_heads>(m, v);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(s)>,
                                 dist::sharded<grad::var<double, nheads, d_model>, split_heads>>);
    const auto cs = dist::shard<split_heads>(m, c);
    const auto sc = s * cs;
    const auto loss = dimsum::einsum<>(dist::all_reduce(dist::einsum<"nheads d_model -> d_model">(sc * sc))) * 0.5;
    t.backward(loss);
    const auto& g = dimsum::gradient(v);
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t j = 0; j < M; ++j) {
        const double cc = c(nheads{h}, d_model{j});
        CHECK(g(nheads{h}, d_model{j}) == Approx(full(nheads{h}, d_model{j}) * cc * cc));
      }
  }
  SECTION("all_gather: backward takes this rank's block of the gradient") {
    // v_r = this rank's block; loss = sum(all_gather(v) * c): d loss / d v_r = c's block.
    grad::tape t;
    tensor<double, nheads, d_model> mine = dist::shard<split_heads>(m, full).local();
    const auto v = t.watch(mine);
    const auto gathered = dist::all_gather<nheads>(dist::sharded<grad::var<double, nheads, d_model>, split_heads>(v, m.comms()));
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(gathered)>, grad::var<double, nheads, d_model>>);
    CHECK(gathered.value()(nheads{H - 1}, d_model{2}) == full(nheads{H - 1}, d_model{2}));
    const auto loss = dimsum::einsum<>(gathered * c);
    t.backward(loss);
    const auto& g = dimsum::gradient(v);
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t j = 0; j < M; ++j) CHECK(g(nheads{h}, d_model{j}) == c(nheads{2 * std::size_t(me) + h}, d_model{j}));
  }
  SECTION("reduce_scatter: backward all_gathers the gradient into every part") {
    // Rank r's part p_r = (r + 1) * full; the sum is S = n (n + 1) / 2 * full;
    // reduce_scatter gives each rank its heads of S; loss = sum over ranks of
    // sum(block * c_block) = sum(S * c): d loss / d p_r = c, on every rank.
    grad::tape t;
    const auto p = t.watch(dimsum::eval(full * double(me + 1)));
    // A partial sum over `model` made directly: each rank's part of the sum.
    const dist::sharded<grad::var<double, nheads, d_model>, dist::partial<model, d_head>> ps(p, m.comms());
    const auto scattered = dist::reduce_scatter<nheads>(ps);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(scattered)>,
                                 dist::sharded<grad::var<double, nheads, d_model>, split_heads>>);
    const double total = double(n) * double(n + 1) / 2.0;
    for (std::size_t h = 0; h < 2; ++h)
      CHECK(scattered.local().value()(nheads{h}, d_model{1}) == total * full(nheads{2 * std::size_t(me) + h}, d_model{1}));
    const auto loss = dimsum::einsum<>(
        dist::all_reduce(dist::einsum<"nheads d_model -> d_model">(scattered * dist::shard<split_heads>(m, c))));
    t.backward(loss);
    const auto& g = dimsum::gradient(p);
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t j = 0; j < M; ++j) CHECK(g(nheads{h}, d_model{j}) == Approx(c(nheads{h}, d_model{j})));
  }
}

TEST_CASE("sequence_gather: all_gather forward, reduce_scatter of the gradient's parts backward", "[mpi][grad]") {
  // Megatron's sequence parallelism: x's positions split over `model`,
  // gathered into a column-parallel projection y = x W (W's heads split):
  // loss = sum(y^2), so d loss / d x = 2 sum_{h,e} y W and d loss / d W =
  // 2 sum_p x y, each rank computing the part of d x from its heads.
  const int n = world_size(), me = world_rank();
  dist::mesh<model> m(MPI_COMM_WORLD, model{n});
  const std::size_t P = 3 * std::size_t(n), M = 4, H = 2 * std::size_t(n), E = 2;
  using split_posn = dist::split<posn, model>;
  tensor<double, posn, d_model> x(posn{P}, d_model{M});
  tensor<double, d_model, nheads, d_head> w(d_model{M}, nheads{H}, d_head{E});
  for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = std::sin(0.7 * double(i) + 0.3);
  for (std::size_t i = 0; i < w.size(); ++i) w.data()[i] = std::cos(0.45 * double(i) - 0.2);
  // The reference, in plain loops.
  std::vector<double> y(P * H * E, 0.0), gx(P * M, 0.0), gw(M * H * E, 0.0);
  for (std::size_t p = 0; p < P; ++p)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t e = 0; e < E; ++e)
        for (std::size_t j = 0; j < M; ++j)
          y[(p * H + h) * E + e] += x(posn{p}, d_model{j}) * w(d_model{j}, nheads{h}, d_head{e});
  for (std::size_t p = 0; p < P; ++p)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t e = 0; e < E; ++e)
        for (std::size_t j = 0; j < M; ++j) {
          const double yy = y[(p * H + h) * E + e];
          gx[p * M + j] += 2 * yy * w(d_model{j}, nheads{h}, d_head{e});
          gw[(j * H + h) * E + e] += 2 * yy * x(posn{p}, d_model{j});
        }
  const tensor<double, d_model, nheads, d_head> w_mine = dist::shard<split_heads>(m, w).local();
  // Both ways of entering the heads' region with the gathered positions.
  for (const bool fused : {true, false}) {
    INFO((fused ? "sequence_gather" : "replicate(all_gather)"));
    grad::tape t;
    const auto xv = t.watch(x);
    const auto wv = t.watch(w_mine);
    const auto xs = dist::shard<split_posn>(m, xv);
    const dist::sharded<grad::var<double, d_model, nheads, d_head>, split_heads> ws(wv, m.comms());
    auto project = [&](const auto& full) {
      const auto yv = dist::einsum<"posn d_model, d_model nheads d_head -> posn nheads d_head">(full, ws);
      return dimsum::einsum<>(dist::all_reduce(dist::einsum<"posn nheads d_head -> posn">(yv * yv)));
    };
    dist::reset_traffic();
    if (fused) {
      const auto g = dist::sequence_gather<posn>(xs);
      static_assert(std::is_same_v<std::remove_cvref_t<decltype(g)>,
                                   dist::replicated<grad::var<double, posn, d_model>, model>>);
      t.backward(project(g));
    } else {
      t.backward(project(dist::replicate<model>(m, dist::all_gather<posn>(xs))));
    }
    const auto traffic = dist::traffic_counter();
    double loss = 0;
    for (double v : y) loss += v * v;
    const auto& dx = dimsum::gradient(xv);
    const auto& dw = dimsum::gradient(wv);
    for (std::size_t p = 0; p < P; ++p)
      for (std::size_t j = 0; j < M; ++j) CHECK(dx(posn{p}, d_model{j}) == Approx(gx[p * M + j]).epsilon(1e-12));
    for (std::size_t j = 0; j < M; ++j)
      for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t e = 0; e < E; ++e)
          CHECK(dw(d_model{j}, nheads{h}, d_head{e}) ==
                Approx(gw[(j * H + 2 * std::size_t(me) + h) * E + e]).epsilon(1e-12));
    // Backward's collectives on the gathered value: one reduce-scatter of
    // its P x M gradient ((n - 1) / n of it on the ring) for sequence_gather,
    // an all-reduce (twice that) for replicate(all_gather); the forward's
    // all_gather, all_reduce of the loss terms and shard's backward
    // all_gather are the same in both.
    const std::uint64_t full_bytes = P * M * sizeof(double);
    const std::uint64_t common = (std::uint64_t(n) - 1) * (P / std::size_t(n)) * M * sizeof(double)  // forward all_gather
                                 + 2 * (std::uint64_t(n) - 1) * P * sizeof(double) / std::uint64_t(n)  // the loss's all_reduce
                                 + (std::uint64_t(n) - 1) * (P / std::size_t(n)) * M * sizeof(double);  // shard's backward
    CHECK(traffic.ring_bytes == common + (fused ? 1 : 2) * (std::uint64_t(n) - 1) * full_bytes / std::uint64_t(n));
    (void)loss;
  }
}

