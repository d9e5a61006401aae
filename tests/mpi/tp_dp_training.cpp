// Tensor parallelism x data parallelism on one 2-D mesh under mpirun: a
// small character transformer (token and position embeddings, two pre-norm
// blocks of causal multi-head attention and a GELU MLP, a final layer norm,
// the unembedding, cross entropy) trained on `dist::mesh<data, model>`.
// Over `model`, Megatron-style: W_Q, W_K, W_V split by head (column
// parallel), W_O by head (row parallel, one all_reduce), W_in and b_in by
// d_mlp (column parallel), W_out by d_mlp (row parallel, one all_reduce);
// each region entered through dist::replicate<model>. Over `data`, each
// rank trains on its block of the batch and the gradients are averaged
// (dist::average_gradients<data>: a sharded parameter's block averaged
// with the same block on the other data ranks), or AdamW's moments are
// split over `data` (dist::sharded_adamw<data>, ZeRO-1). The reference is
// the same model written with plain grad::var operations in this process,
// on the whole batch with the whole weights: the loss at every AdamW step
// and the gathered parameters after the last one must equal it, on every
// mesh shape the world's ranks allow (1: 1 x 1; 2: 1 x 2 and 2 x 1;
// 4: 1 x 4, 2 x 2 and 4 x 1, data x model). The ZeRO state, saved after 3
// of 6 steps per model coordinate (through the mesh of that coordinate's
// data ranks), resumes on the same mesh bit for bit and on one data rank
// per model coordinate within the tolerance; saving or loading it over the
// 2-D mesh, whose model ranks hold different blocks, is refused.
#include <catch2/catch.hpp>

#include <mpi.h>

#include "world.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <dimsum/dimsum.hpp>
#include <dimsum/distributed/dist.hpp>
#include <dimsum/grad/grad.hpp>
#include <dimsum/nn/init.hpp>
#include <dimsum/nn/layer_norm.hpp>
#include <dimsum/nn/module.hpp>
#include <dimsum/optim/adamw.hpp>
#include <dimsum/optim/seed.hpp>

namespace dist = dimsum::dist;
namespace grad = dimsum::grad;
using dimsum::parameter;
using dimsum::tensor;

namespace {
DIMSUM_MESH_AXIS(data);
DIMSUM_MESH_AXIS(model);

DIMSUM_DIM(vocab);
DIMSUM_DIM(ctx);
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_model);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);
DIMSUM_DIM(d_mlp);

using layer_norm = dimsum::nn::layer_norm<float, d_model>;

struct attention_params {
  BOOST_HANA_DEFINE_STRUCT(attention_params, (parameter<float, d_model, nheads, d_head>, W_Q),
                           (parameter<float, d_model, nheads, d_head>, W_K),
                           (parameter<float, d_model, nheads, d_head>, W_V),
                           (parameter<float, nheads, d_head, d_model>, W_O), (parameter<float, d_model>, b_O));
};
struct mlp_params {
  BOOST_HANA_DEFINE_STRUCT(mlp_params, (parameter<float, d_model, d_mlp>, W_in), (parameter<float, d_mlp>, b_in),
                           (parameter<float, d_mlp, d_model>, W_out), (parameter<float, d_model>, b_out));
};
struct block_params {
  BOOST_HANA_DEFINE_STRUCT(block_params, (layer_norm, ln1), (attention_params, attn), (layer_norm, ln2),
                           (mlp_params, mlp));
};
/// The whole model (the reference holds it whole; each rank of the mesh
/// holds the same struct with its blocks of the split parameters).
struct lm {
  BOOST_HANA_DEFINE_STRUCT(lm, (parameter<float, vocab, d_model>, tok_embed), (parameter<float, ctx, d_model>, pos_embed),
                           (std::vector<block_params>, blocks), (layer_norm, ln_f),
                           (parameter<float, d_model, vocab>, W_U), (parameter<float, vocab>, b_U));
};

constexpr std::size_t V = 13, C = 8, B = 4, P = 8, D = 16, H = 4, DH = 4, M = 32, L = 2;

/// The model of the sizes above, every parameter drawn from its own seed
/// (layer-norm weights around 1, everything else around 0).
lm make_model() {
  lm m;
  m.tok_embed = parameter<float, vocab, d_model>(vocab{V}, d_model{D});
  m.pos_embed = parameter<float, ctx, d_model>(ctx{C}, d_model{D});
  m.blocks.resize(L);
  for (auto& b : m.blocks) {
    b.ln1 = layer_norm(d_model{D});
    b.ln2 = layer_norm(d_model{D});
    b.attn.W_Q = parameter<float, d_model, nheads, d_head>(d_model{D}, nheads{H}, d_head{DH});
    b.attn.W_K = parameter<float, d_model, nheads, d_head>(d_model{D}, nheads{H}, d_head{DH});
    b.attn.W_V = parameter<float, d_model, nheads, d_head>(d_model{D}, nheads{H}, d_head{DH});
    b.attn.W_O = parameter<float, nheads, d_head, d_model>(nheads{H}, d_head{DH}, d_model{D});
    b.attn.b_O = parameter<float, d_model>(d_model{D});
    b.mlp.W_in = parameter<float, d_model, d_mlp>(d_model{D}, d_mlp{M});
    b.mlp.b_in = parameter<float, d_mlp>(d_mlp{M});
    b.mlp.W_out = parameter<float, d_mlp, d_model>(d_mlp{M}, d_model{D});
    b.mlp.b_out = parameter<float, d_model>(d_model{D});
  }
  m.ln_f = layer_norm(d_model{D});
  m.W_U = parameter<float, d_model, vocab>(d_model{D}, vocab{V});
  m.b_U = parameter<float, vocab>(vocab{V});
  dimsum::optim::seed_parameters(m, 2024, [](const std::string& name, auto& p, std::uint64_t s) {
    const bool ln_weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    dimsum::nn::init::normal(p, s, ln_weight ? 1.0 : 0.0, ln_weight ? 0.1 : 0.2);
  });
  return m;
}

using ids_t = tensor<std::int64_t, batch, posn>;

/// The batch of `step`: B windows of P ids and their targets (the same on every rank).
std::pair<ids_t, ids_t> batch_of(std::uint64_t step) {
  ids_t x(batch{B}, posn{P}), y(batch{B}, posn{P});
  std::mt19937_64 gen(1000 + step);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x.data()[i] = std::int64_t(gen() % V);
    y.data()[i] = std::int64_t(gen() % V);
  }
  return {x, y};
}

tensor<std::int64_t, posn> positions(std::size_t n) {
  tensor<std::int64_t, posn> p(posn{n});
  for (std::size_t i = 0; i < n; ++i) p.data()[i] = std::int64_t(i);
  return p;
}

constexpr dimsum::fixed_string project = "batch posn d_model, d_model nheads d_head -> batch posn nheads d_head";
constexpr dimsum::fixed_string scores_of = "batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn";
constexpr dimsum::fixed_string weigh = "batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head";
constexpr dimsum::fixed_string out_proj = "batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model";
constexpr dimsum::fixed_string mlp_in = "batch posn d_model, d_model d_mlp -> batch posn d_mlp";
constexpr dimsum::fixed_string mlp_out = "batch posn d_mlp, d_mlp d_model -> batch posn d_model";
constexpr dimsum::fixed_string unembed = "batch posn d_model, d_model vocab -> batch posn vocab";

/// The heads' attention of q, k, v (batch, posn, nheads, d_head): causal, scaled.
template <class Q, class K, class Vv>
auto causal_attention(const Q& q, const K& k, const Vv& v, float scale) {
  return dimsum::einsum<weigh>(
      dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(
          dimsum::einsum<scores_of>(dimsum::rename<posn, q_posn>(q), dimsum::rename<posn, k_posn>(k)) * scale,
          -std::numeric_limits<float>::infinity())),
      dimsum::rename<posn, k_posn>(v));
}

// ------------------------------------------------------------ the reference

/// The mean cross entropy of the model on (x, y), in one process with the
/// whole weights: plain grad::var operations.
grad::var<float> single_loss(grad::tape& t, lm& m, const ids_t& x, const ids_t& y) {
  using dimsum::einsum;
  grad::var<float, batch, posn, d_model> h =
      dimsum::lookup<vocab>(m.tok_embed(t), x) + dimsum::lookup<ctx>(m.pos_embed(t), positions(x.extent<posn>()));
  for (auto& b : m.blocks) {
    const auto a = b.ln1(t, h);
    const float scale = 1.0f / std::sqrt(float(DH));
    const auto z = causal_attention(einsum<project>(a, b.attn.W_Q(t)), einsum<project>(a, b.attn.W_K(t)),
                                    einsum<project>(a, b.attn.W_V(t)), scale);
    h = h + dimsum::rename<q_posn, posn>(einsum<out_proj>(z, b.attn.W_O(t))) + b.attn.b_O(t);
    const auto c = b.ln2(t, h);
    h = h + einsum<mlp_out>(dimsum::gelu(einsum<mlp_in>(c, b.mlp.W_in(t)) + b.mlp.b_in(t)), b.mlp.W_out(t)) +
        b.mlp.b_out(t);
  }
  return dimsum::cross_entropy<vocab>(einsum<unembed>(m.ln_f(t, h), m.W_U(t)) + m.b_U(t), y);
}

// ------------------------------------------------------------ the mesh

using mesh2 = dist::mesh<data, model>;
using split_heads = dist::split<nheads, model>;
using split_mlp = dist::split<d_mlp, model>;

/// This rank's blocks of the full model's split parameters; the others whole.
lm local_blocks(const mesh2& m, const lm& full) {
  lm l = full;
  for (std::size_t i = 0; i < full.blocks.size(); ++i) {
    const auto& f = full.blocks[i];
    auto& b = l.blocks[i];
    b.attn.W_Q = dist::shard<split_heads>(m, f.attn.W_Q.value).local();
    b.attn.W_K = dist::shard<split_heads>(m, f.attn.W_K.value).local();
    b.attn.W_V = dist::shard<split_heads>(m, f.attn.W_V.value).local();
    b.attn.W_O = dist::shard<split_heads>(m, f.attn.W_O.value).local();
    b.mlp.W_in = dist::shard<split_mlp>(m, f.mlp.W_in.value).local();
    b.mlp.b_in = dist::shard<split_mlp>(m, f.mlp.b_in.value).local();
    b.mlp.W_out = dist::shard<split_mlp>(m, f.mlp.W_out.value).local();
  }
  return l;
}

/// The whole model again from every rank's blocks (all_gather over `model`).
lm gathered(const mesh2& m, const lm& local) {
  lm f = local;
  auto whole = [&]<class Dim, class Pl, class T, class... Ds>(std::type_identity<Dim>, std::type_identity<Pl>,
                                                              const parameter<T, Ds...>& p) {
    return dist::all_gather<Dim>(dist::from_local<Pl>(m, p.value));
  };
  for (std::size_t i = 0; i < local.blocks.size(); ++i) {
    const auto& l = local.blocks[i];
    auto& b = f.blocks[i];
    const std::type_identity<nheads> h;
    const std::type_identity<d_mlp> e;
    b.attn.W_Q = whole(h, std::type_identity<split_heads>{}, l.attn.W_Q);
    b.attn.W_K = whole(h, std::type_identity<split_heads>{}, l.attn.W_K);
    b.attn.W_V = whole(h, std::type_identity<split_heads>{}, l.attn.W_V);
    b.attn.W_O = whole(h, std::type_identity<split_heads>{}, l.attn.W_O);
    b.mlp.W_in = whole(e, std::type_identity<split_mlp>{}, l.mlp.W_in);
    b.mlp.b_in = whole(e, std::type_identity<split_mlp>{}, l.mlp.b_in);
    b.mlp.W_out = whole(e, std::type_identity<split_mlp>{}, l.mlp.W_out);
  }
  return f;
}

/// The mean cross entropy of this rank's block of the batch, tensor-parallel
/// over `model`: `l` holds this rank's blocks.
grad::var<float> tp_loss(grad::tape& t, const mesh2& m, lm& l, const ids_t& x, const ids_t& y) {
  grad::var<float, batch, posn, d_model> h =
      dimsum::lookup<vocab>(l.tok_embed(t), x) + dimsum::lookup<ctx>(l.pos_embed(t), positions(x.extent<posn>()));
  for (auto& b : l.blocks) {
    // Attention: heads split over `model`; f (replicate) in, g (all_reduce) out.
    const auto W_Q = dist::watch<split_heads>(t, m, b.attn.W_Q), W_K = dist::watch<split_heads>(t, m, b.attn.W_K),
               W_V = dist::watch<split_heads>(t, m, b.attn.W_V);
    const auto W_O = dist::watch<split_heads>(t, m, b.attn.W_O);
    const auto a = dist::replicate<model>(m, b.ln1(t, h));
    const auto q = dist::einsum<project>(a, W_Q), k = dist::einsum<project>(a, W_K), v = dist::einsum<project>(a, W_V);
    const float scale = 1.0f / std::sqrt(float(DH));
    const auto z = dist::map(
        [scale](const auto& ql, const auto& kl, const auto& vl) {
          auto e = causal_attention(ql, kl, vl, scale);
          static_assert(dimsum::uses_fused_attention_v<decltype(e)>);
          return e;
        },
        q, k, v);
    const auto attn_part = dist::einsum<out_proj>(z, W_O);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(attn_part)>,
                                 dist::sharded<grad::var<float, batch, q_posn, d_model>, dist::partial<model, nheads>>>);
    h = h + dimsum::rename<q_posn, posn>(dist::all_reduce(attn_part)) + b.attn.b_O(t);
    // MLP: d_mlp split over `model`.
    const auto W_in = dist::watch<split_mlp>(t, m, b.mlp.W_in);
    const auto b_in = dist::watch<split_mlp>(t, m, b.mlp.b_in);
    const auto W_out = dist::watch<split_mlp>(t, m, b.mlp.W_out);
    const auto c = dist::replicate<model>(m, b.ln2(t, h));
    const auto pre = dist::einsum<mlp_in>(c, W_in) + b_in;
    const auto act = dist::map([](const auto& p) { return dimsum::gelu(p); }, pre);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(act)>,
                                 dist::sharded<grad::var<float, batch, posn, d_mlp>, split_mlp>>);
    h = h + dist::all_reduce(dist::einsum<mlp_out>(act, W_out)) + b.mlp.b_out(t);
  }
  return dimsum::cross_entropy<vocab>(dimsum::einsum<unembed>(l.ln_f(t, h), l.W_U(t)) + l.b_U(t), y);
}

const dimsum::optim::adamw_options adamw_opts{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2};
constexpr int steps = 5;

/// The reference run: per step the whole batch's loss; `m` ends trained.
std::vector<float> single_run(lm& m) {
  dimsum::optim::adamw opt(adamw_opts);
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    const auto [x, y] = batch_of(std::uint64_t(s));
    dimsum::nn::zero_grad(m);
    grad::tape t;
    auto loss = single_loss(t, m, x, y);
    losses.push_back(loss.item());
    t.backward(loss);
    opt.step(m);
  }
  return losses;
}

/// This rank's gradients of its block of the batch of `step` (l: its
/// blocks); returns the mean of the data ranks' losses, the whole batch's.
float block_gradients(const mesh2& m, lm& l, int step) {
  const auto [x, y] = batch_of(std::uint64_t(step));
  const auto x_mine = dist::shard<dist::split<batch, data>>(m, x).local();
  const auto y_mine = dist::shard<dist::split<batch, data>>(m, y).local();
  dimsum::nn::zero_grad(l);
  float mine = 0, sum = 0;
  {
    grad::tape t;
    auto loss = tp_loss(t, m, l, x_mine, y_mine);
    mine = loss.item();
    t.backward(loss);
  }
  MPI_Allreduce(&mine, &sum, 1, MPI_FLOAT, MPI_SUM, m.comm<data>());
  return sum / float(m.axis_size<data>());
}

/// The largest difference between two models' parameters, element by element.
double worst_difference(lm& a, lm& b) {
  std::vector<std::pair<std::string, const float*>> want;
  dimsum::nn::for_each_parameter(a, [&](const std::string& name, auto& p) { want.emplace_back(name, p.value.data()); });
  std::size_t i = 0;
  double worst = 0;
  dimsum::nn::for_each_parameter(b, [&](const std::string& name, auto& p) {
    REQUIRE(want[i].first == name);
    for (std::size_t j = 0; j < p.value.size(); ++j)
      worst = std::max(worst, double(std::abs(p.value.data()[j] - want[i].second[j])));
    ++i;
  });
  return worst;
}

/// The mesh shapes (data, model) of the world's ranks: every factorisation.
std::vector<std::pair<int, int>> mesh_shapes() {
  std::vector<std::pair<int, int>> s;
  const int n = world_size();
  for (int tp = 1; tp <= n; ++tp)
    if (n % tp == 0) s.emplace_back(n / tp, tp);
  return s;
}

/// The parameter elements a rank of a mesh with `tp` ranks along `model` holds.
std::size_t elements_per_rank(std::size_t tp) {
  const std::size_t split = L * (4 * D * H * DH + D * M + M + M * D);
  const std::size_t whole = V * D + C * D + L * (4 * D + D + D) + 2 * D + D * V + V;
  return whole + split / tp;
}

// Tolerances (float32): the loss is about ln 13 = 2.6, summed over 32
// positions from sums of at most 32 products; the mesh sums the same terms
// in another order (each rank's heads and d_mlp columns, then an
// all_reduce; each data rank's positions, then the mean), so the losses
// differ by a few float32 roundings of 2.6 (about 1e-6): 1e-5 is ten times
// that. AdamW's first steps move each weight by about lr = 1e-2 along the
// sign of its moments; gradients that differ in their last bits move the
// updates by far less than 1e-5 over 5 steps (the measured worst is a few
// 1e-7, see the INFO lines).
constexpr float loss_tolerance = 1e-5f;
constexpr double parameter_tolerance = 1e-5;
}  // namespace

TEST_CASE("tensor x data parallel AdamW steps of a character transformer equal single-process training",
          "[mpi][tp_dp]") {
  lm single = make_model();
  const std::vector<float> want = single_run(single);
  for (const auto& [dp, tp] : mesh_shapes()) {
    INFO("mesh data=" << dp << " x model=" << tp << ", rank " << world_rank());
    mesh2 m(MPI_COMM_WORLD, data{dp}, model{tp});
    lm l = local_blocks(m, make_model());
    CHECK(dimsum::nn::parameter_count(l) == elements_per_rank(std::size_t(tp)));
    dimsum::optim::adamw opt(adamw_opts);
    for (int s = 0; s < steps; ++s) {
      INFO("step " << s);
      dist::reset_traffic();
      const float loss = block_gradients(m, l, s);
      CHECK(std::abs(loss - want[std::size_t(s)]) <= loss_tolerance);
      // Over `model`, per block: the all_reduces of the attention's and the
      // MLP's outputs (forward) and the replicates' all_reduces of the layer
      // norms' gradients (backward), each of this rank's windows x d_model.
      const std::size_t activation_bytes = (B / std::size_t(dp)) * P * D * sizeof(float);
      CHECK(dist::traffic_counter().calls == 4 * L);
      CHECK(dist::traffic_counter().payload_bytes == 4 * L * activation_bytes);
      CHECK(dist::traffic_counter().ring_bytes == 4 * L * (2 * (std::size_t(tp) - 1) * activation_bytes / std::size_t(tp)));
      // The split parameters' blocks are averaged with the same blocks on
      // the other data ranks; the whole ones with the whole ones.
      dist::reset_traffic();
      const std::size_t bytes = dist::average_gradients<data>(m, l);
      CHECK(bytes == elements_per_rank(std::size_t(tp)) * sizeof(float));
      CHECK(dist::traffic_counter().calls == 1);
      opt.step(l);
    }
    lm whole = gathered(m, l);
    const double worst = worst_difference(single, whole);
    INFO("worst parameter difference " << worst);
    CHECK(worst <= parameter_tolerance);
    // Every rank holds the same whole model after the gather (the data
    // ranks' copies of a block stayed equal).
    float first = whole.blocks[1].mlp.W_out.value.data()[7], lo = 0, hi = 0;
    MPI_Allreduce(&first, &lo, 1, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&first, &hi, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi);
  }
}

TEST_CASE("tensor-parallel training with AdamW's moments split over the data axis (ZeRO-1) equals single-process training",
          "[mpi][tp_dp][zero]") {
  lm single = make_model();
  const std::vector<float> want = single_run(single);
  for (const auto& [dp, tp] : mesh_shapes()) {
    INFO("mesh data=" << dp << " x model=" << tp << ", rank " << world_rank());
    mesh2 m(MPI_COMM_WORLD, data{dp}, model{tp});
    lm l = local_blocks(m, make_model());
    dist::sharded_adamw<data> opt(adamw_opts);
    for (int s = 0; s < steps; ++s) {
      INFO("step " << s);
      const float loss = block_gradients(m, l, s);
      CHECK(std::abs(loss - want[std::size_t(s)]) <= loss_tolerance);
      opt.step(m, l);
    }
    // Each rank keeps the moments of 1/dp of its model rank's parameters.
    const std::size_t count = elements_per_rank(std::size_t(tp));
    CHECK(opt.state_elements() == 2 * ((count + std::size_t(dp) - 1) / std::size_t(dp)));
    lm whole = gathered(m, l);
    const double worst = worst_difference(single, whole);
    INFO("worst parameter difference " << worst);
    CHECK(worst <= parameter_tolerance);
  }
}

TEST_CASE("the ZeRO state of a tensor-parallel model, saved per model coordinate, resumes on fewer data ranks",
          "[mpi][tp_dp][zero][checkpoint]") {
  lm single = make_model();
  dimsum::optim::adamw single_opt(adamw_opts);
  std::vector<float> want;
  for (int s = 0; s < 6; ++s) {
    const auto [x, y] = batch_of(std::uint64_t(s));
    dimsum::nn::zero_grad(single);
    grad::tape t;
    auto loss = single_loss(t, single, x, y);
    want.push_back(loss.item());
    t.backward(loss);
    single_opt.step(single);
  }
  for (const auto& [dp, tp] : mesh_shapes()) {
    INFO("saved on mesh data=" << dp << " x model=" << tp << ", rank " << world_rank());
    const std::string dir = shared_dir("tp-zero");
    mesh2 m(MPI_COMM_WORLD, data{dp}, model{tp});
    // Each coordinate of `model` saves its blocks' state through the mesh of its data ranks.
    const dist::mesh<data> mine(m.comm<data>(), data{dp});
    const std::string coord = std::to_string(m.coord<model>());
    lm l = local_blocks(m, make_model());
    dist::sharded_adamw<data> opt(adamw_opts);
    std::vector<float> uninterrupted;
    for (int s = 0; s < 6; ++s) {
      if (s == 3) {
        if (tp > 1) {
          // One checkpoint over the 2-D mesh would keep one model rank's
          // moments only: refused on every rank.
          CHECK_THROWS_WITH(dist::save_optimizer_state(m, dir + "/both", l, opt),
                            Catch::Contains("the ranks along mesh axis 'model' hold different parameter values") &&
                                Catch::Contains("through a mesh of axis 'data' alone"));
          // A model every rank holds whole (copies along `model`) saves through the 2-D mesh.
          lm copies = make_model();
          dist::sharded_adamw<data> fresh(adamw_opts);
          CHECK_NOTHROW(dist::save_optimizer_state(m, dir + "/copies", copies, fresh));
        }
        dist::save_module(mine, dir + "/model-" + coord, l);
        dist::save_optimizer_state(mine, dir + "/optim-" + coord, l, opt);
      }
      uninterrupted.push_back(block_gradients(m, l, s));
      opt.step(m, l);
    }
    for (int s = 0; s < 6; ++s) CHECK(std::abs(uninterrupted[std::size_t(s)] - want[std::size_t(s)]) <= loss_tolerance);
    // Resumed on the same mesh, and on one data rank per model coordinate
    // (the first tp ranks).
    for (const int dp2 : {dp, 1}) {
      if (dp2 == 1 && dp == 1) continue;
      INFO("resumed on mesh data=" << dp2 << " x model=" << tp);
      MPI_Comm c = first_ranks(dp2 * tp);
      if (c != MPI_COMM_NULL) {
        mesh2 m2(c, data{dp2}, model{tp});
        const dist::mesh<data> mine2(m2.comm<data>(), data{dp2});
        const std::string coord2 = std::to_string(m2.coord<model>());
        lm r = local_blocks(m2, make_model());
        dist::sharded_adamw<data> opt2({.lr = 0.5});  // the checkpoint restores the options
        if (tp > 1) {
          // Loading one coordinate's state over the 2-D mesh is refused too, and leaves opt2 as it was.
          CHECK_THROWS_WITH(dist::load_optimizer_state(m2, dir + "/optim-" + coord2, r, opt2),
                            Catch::Contains("loading optimizer state from checkpoint '" + dir + "/optim-" + coord2 +
                                            "': the ranks along mesh axis 'model' hold different parameter values"));
          CHECK(opt2.state_elements() == 0);
        }
        dist::load_module(mine2, dir + "/model-" + coord2, r);
        dist::load_optimizer_state(mine2, dir + "/optim-" + coord2, r, opt2);
        const std::size_t count = elements_per_rank(std::size_t(tp));
        CHECK(opt2.state_elements() == 2 * ((count + std::size_t(dp2) - 1) / std::size_t(dp2)));
        for (int s = 3; s < 6; ++s) {
          INFO("step " << s);
          const float loss = block_gradients(m2, r, s);
          opt2.step(m2, r);
          CHECK(std::abs(loss - want[std::size_t(s)]) <= loss_tolerance);
          // on the mesh that saved it: the same operations, the same bits
          if (dp2 == dp) CHECK(loss == uninterrupted[std::size_t(s)]);
        }
        lm whole = gathered(m2, r);
        CHECK(worst_difference(single, whole) <= parameter_tolerance);
        MPI_Comm_free(&c);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }
    remove_dir(dir);
  }
}

