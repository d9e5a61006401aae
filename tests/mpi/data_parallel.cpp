// Data-parallel training under mpirun: the training example's transformer
// (examples/char_transformer_model.hpp) with the batch split over the mesh
// axis `data`, each rank's gradients averaged by dist::average_gradients
// before each AdamW step. Every rank also trains the same model on the
// whole batch in one process; after the steps the losses and every
// parameter must agree (float32: the per-rank means are summed in another
// order than the whole batch's mean).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <mpi.h>

#include "world.hpp"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <dimsum/distributed/dist.hpp>
#include <dimsum/optim/adamw.hpp>

#include "../../examples/char_transformer_forward.hpp"

namespace dist = dimsum::dist;
using char_lm::batch;
using char_lm::posn;

namespace {
DIMSUM_MESH_AXIS(data);


char_lm::config small_config(std::size_t layers = 1) {
  char_lm::config c;
  c.vocab = 11;
  c.context = 8;
  c.d_model = 16;
  c.n_layers = layers;
  c.n_heads = 2;
  c.d_mlp = 32;
  return c;
}

char_lm::model small_model() {
  auto m = char_lm::make_model(small_config());
  char_lm::init_model(m, 1234);
  return m;
}

// A fixed batch of 8 windows of 6 ids and their next ids (the same on every rank).
std::pair<char_lm::ids_t, char_lm::ids_t> fixed_batch(std::uint64_t seed) {
  char_lm::ids_t x(batch{8}, posn{6}), y(batch{8}, posn{6});
  std::mt19937_64 gen(seed);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x.data()[i] = std::int64_t(gen() % 11);
    y.data()[i] = std::int64_t(gen() % 11);
  }
  return {x, y};
}

// One AdamW step of `model` on the whole batch of `step`, in this process; returns the loss.
float whole_batch_step(char_lm::model& model, dimsum::optim::adamw& opt, std::uint64_t step) {
  const auto [x, y] = fixed_batch(100 + step);
  dimsum::nn::zero_grad(model);
  float loss_value = 0;
  {
    dimsum::grad::tape t;
    auto loss = char_lm::loss(t, model, x, y);
    loss_value = loss.item();
    t.backward(loss);
  }
  opt.step(model);
  return loss_value;
}

// The gradients of `model` on this rank's block of the batch of `step`;
// returns the mean of the ranks' losses.
float block_gradients(const dist::mesh<data>& m, char_lm::model& model, std::uint64_t step) {
  const auto [x, y] = fixed_batch(100 + step);
  const auto x_mine = dist::shard<dist::split<batch, data>>(m, x).local();
  const auto y_mine = dist::shard<dist::split<batch, data>>(m, y).local();
  dimsum::nn::zero_grad(model);
  float loss_mine = 0;
  {
    dimsum::grad::tape t;
    auto loss = char_lm::loss(t, model, x_mine, y_mine);
    loss_mine = loss.item();
    t.backward(loss);
  }
  float loss_sum = 0;
  MPI_Allreduce(&loss_mine, &loss_sum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return loss_sum / float(world_size());
}

// The largest difference between two models' parameters, element by element.
double worst_difference(char_lm::model& a, char_lm::model& b) {
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

const dimsum::optim::adamw_options adamw_opts{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2};
}  // namespace

TEST_CASE("data-parallel AdamW steps equal single-process training on the whole batch", "[mpi][data_parallel]") {
  const int n = world_size();
  dist::mesh<data> m(MPI_COMM_WORLD, data{n});
  auto single = small_model();
  auto parallel = small_model();
  dimsum::optim::adamw opt_single(adamw_opts), opt_parallel(adamw_opts);
  std::size_t bytes = 0;
  for (std::uint64_t step = 0; step < 4; ++step) {
    const float loss_single = whole_batch_step(single, opt_single, step);
    // This rank's block of the batch, gradients averaged over `data`.
    const float loss_mean = block_gradients(m, parallel, step);
    dist::reset_traffic();
    bytes = dist::average_gradients<data>(m, parallel);
    // One all-reduce of every float gradient; a ring sends 2 (n - 1) / n of it.
    CHECK(dist::traffic_counter().calls == 1);
    CHECK(dist::traffic_counter().payload_bytes == dimsum::nn::parameter_count(parallel) * sizeof(float));
    CHECK(dist::traffic_counter().ring_bytes ==
          2 * (std::size_t(n) - 1) * dimsum::nn::parameter_count(parallel) * sizeof(float) / std::size_t(n));
    opt_parallel.step(parallel);
    // The mean of the ranks' losses is the whole batch's loss.
    CHECK(std::abs(loss_mean - loss_single) < 1e-5f);
  }
  CHECK(bytes == dimsum::nn::parameter_count(parallel) * sizeof(float));
  const double worst = worst_difference(single, parallel);
  INFO("worst parameter difference " << worst);
  // AdamW's first steps move each weight by about lr = 1e-2; float32
  // summation order changes the gradients in their last bits, which moves
  // the updates by far less than 1e-5.
  CHECK(worst < 1e-5);
}

TEST_CASE("AdamW with its moments split over the data axis equals single-process training", "[mpi][zero]") {
  const int n = world_size();
  dist::mesh<data> m(MPI_COMM_WORLD, data{n});
  auto single = small_model();
  auto parallel = small_model();
  dimsum::optim::adamw opt_single(adamw_opts);
  dist::sharded_adamw<data> opt_parallel(adamw_opts);
  const std::size_t count = dimsum::nn::parameter_count(parallel);
  const std::size_t block = (count + std::size_t(n) - 1) / std::size_t(n);
  for (std::uint64_t step = 0; step < 4; ++step) {
    const float loss_single = whole_batch_step(single, opt_single, step);
    const float loss_mean = block_gradients(m, parallel, step);
    CHECK(std::abs(loss_mean - loss_single) < 1e-5f);
    dist::reset_traffic();
    opt_parallel.step(m, parallel);
    // a reduce-scatter of the gradients and an all-gather of the parameters:
    // together the ring bytes of one all-reduce of the (padded) gradients
    CHECK(dist::traffic_counter().calls == 2);
    CHECK(dist::traffic_counter().ring_bytes == 2 * (std::size_t(n) - 1) * block * sizeof(float));
  }
  // each rank keeps the two moments of its block only
  CHECK(opt_parallel.state_elements() == 2 * block);
  const double worst = worst_difference(single, parallel);
  INFO("worst parameter difference " << worst);
  CHECK(worst < 1e-5);
}

TEST_CASE("a replicated model saved by save_module loads on the mesh and in one process", "[mpi][checkpoint]") {
  const int n = world_size();
  dist::mesh<data> m(MPI_COMM_WORLD, data{n});
  auto trained = small_model();
  for (std::size_t i = 0; i < trained.blocks[0].attn.W_Q.value.size(); ++i)
    trained.blocks[0].attn.W_Q.value.data()[i] = float(i) * 0.5f;  // differs from a fresh model
  const std::string dir = shared_dir("module");
  dist::save_module(m, dir, trained);
  // Every rank loads it (collective) into a freshly initialised model ...
  auto on_mesh = small_model();
  char_lm::init_model(on_mesh, 99);
  dist::load_module(m, dir, on_mesh);
  // ... and so does one process, without the mesh.
  auto alone = small_model();
  char_lm::init_model(alone, 7);
  dist::load_module(dir, alone);
  std::vector<const float*> want;
  dimsum::nn::for_each_parameter(trained, [&](const std::string&, const auto& p) { want.push_back(p.value.data()); });
  std::size_t bad = 0, i = 0;
  auto compare = [&](const std::string&, const auto& p) {
    for (std::size_t j = 0; j < p.value.size(); ++j) bad += p.value.data()[j] != want[i][j];
    ++i;
  };
  dimsum::nn::for_each_parameter(on_mesh, compare);
  i = 0;
  dimsum::nn::for_each_parameter(alone, compare);
  CHECK(bad == 0);
  // A model of another shape does not load, on any rank.
  auto deeper = char_lm::make_model(small_config(2));
  CHECK_THROWS_WITH(dist::load_module(m, dir, deeper), Catch::Contains("missing 'blocks.1."));
  remove_dir(dir);
}

#include "mpi_catch_main.hpp"
