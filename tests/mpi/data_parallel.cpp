// Data-parallel training under mpirun: the training example's transformer
// (examples/char_transformer_model.hpp) with the batch split over the mesh
// axis `data`, each rank's gradients averaged by dist::average_gradients
// before each AdamW step. Every rank also trains the same model on the
// whole batch in one process; after the steps the losses and every
// parameter must agree (float32: the per-rank means are summed in another
// order than the whole batch's mean).
#include <catch2/catch.hpp>

#include <mpi.h>

#include "world.hpp"

#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <dimsum/distributed/dist.hpp>
#include <dimsum/distributed/gradient_reducer.hpp>
#include <dimsum/optim/adamw.hpp>

#include "../../examples/char_transformer_forward.hpp"

namespace dist = dimsum::dist;
using char_lm::batch;
using char_lm::posn;

namespace {
DIMSUM_MESH_AXIS(data);
DIMSUM_DIM(feat);

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
float block_gradients(const dist::mesh<data>& m, char_lm::model& model, std::uint64_t step,
                      dist::gradient_reducer<data>* reducer = nullptr) {
  // (on the mesh's ranks, which may be fewer than the world's)
  const auto [x, y] = fixed_batch(100 + step);
  const auto x_mine = dist::shard<dist::split<batch, data>>(m, x).local();
  const auto y_mine = dist::shard<dist::split<batch, data>>(m, y).local();
  dimsum::nn::zero_grad(model);
  float loss_mine = 0;
  {
    dimsum::grad::tape t;
    if (reducer) reducer->attach(t);
    auto loss = char_lm::loss(t, model, x_mine, y_mine);
    loss_mine = loss.item();
    t.backward(loss);
  }
  float loss_sum = 0;
  MPI_Allreduce(&loss_mine, &loss_sum, 1, MPI_FLOAT, MPI_SUM, m.comm());
  return loss_sum / float(m.size());
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

/// The message of the exception f throws (empty if none).
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

/// Whether every rank of the world holds the same string.
bool same_on_every_rank(const std::string& s) {
  int len = static_cast<int>(s.size()), lo = 0, hi = 0;
  MPI_Allreduce(&len, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&len, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (lo != hi) return false;
  std::string first = s;
  MPI_Bcast(first.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  int differs = first != s, any = 0;
  MPI_Allreduce(&differs, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any == 0;
}
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
  for (std::size_t i = 0; i < trained.blocks[0].self_attn.W_Q.value.size(); ++i)
    trained.blocks[0].self_attn.W_Q.value.data()[i] = float(i) * 0.5f;  // differs from a fresh model
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

TEST_CASE("sharded_adamw's state saved at step 3 resumes to the uninterrupted run's losses, on any rank count",
          "[mpi][zero][checkpoint]") {
  const int n = world_size();
  dist::mesh<data> m(MPI_COMM_WORLD, data{n});
  // The reference: 6 steps of AdamW on the whole batch in one process.
  auto single = small_model();
  dimsum::optim::adamw opt_single(adamw_opts);
  std::vector<float> want;
  for (std::uint64_t step = 0; step < 6; ++step) want.push_back(whole_batch_step(single, opt_single, step));
  // The uninterrupted run: 6 ZeRO steps; after 3 the model and optimizer are saved.
  const std::string dir = shared_dir("zero");
  const std::string model_dir = dir + "/model", optim_dir = dir + "/optim";
  auto run = small_model();
  dist::sharded_adamw<data> opt(adamw_opts);
  std::vector<float> uninterrupted;
  for (std::uint64_t step = 0; step < 6; ++step) {
    if (step == 3) {
      dist::save_module(m, model_dir, run);
      dist::save_optimizer_state(m, optim_dir, run, opt);
    }
    if (step == 4) {
      // A save that fails on the last rank (a directory stands where its
      // file of generation 2 goes): every rank throws, generation 1 stays.
      const std::string rank_file = dist::detail::rank_file_name(2, n - 1, n);
      if (world_rank() == 0) std::filesystem::create_directories(std::filesystem::path(optim_dir) / rank_file / "x");
      MPI_Barrier(MPI_COMM_WORLD);
      const std::string failed = message_of([&] { dist::save_optimizer_state(m, optim_dir, run, opt); });
      CHECK(failed.find("saving checkpoint '" + optim_dir + "' failed on rank " + std::to_string(n - 1) + " of " +
                        std::to_string(n)) != std::string::npos);
      CHECK(same_on_every_rank(failed));
      MPI_Barrier(MPI_COMM_WORLD);
      if (world_rank() == 0) std::filesystem::remove_all(std::filesystem::path(optim_dir) / rank_file);
    }
    uninterrupted.push_back(block_gradients(m, run, step));
    opt.step(m, run);
  }
  for (std::uint64_t step = 0; step < 6; ++step) CHECK(std::abs(uninterrupted[step] - want[step]) < 1e-5f);
  // The checkpoint's index: per parameter its step and moments, with PyTorch's keys.
  if (world_rank() == 0) {
    const auto index = nlohmann::json::parse(std::ifstream(optim_dir + "/dimsum-checkpoint.json"));
    const auto& w_in = index.at("tensors").at("blocks.0.mlp.c_fc.weight.exp_avg");
    CHECK(w_in.at("shape") == nlohmann::json::array({32 * 16}));
    CHECK(w_in.at("flattened").at("dims") == nlohmann::json::array({"d_mlp", "d_model"}));
    CHECK(index.at("tensors").contains("blocks.0.mlp.c_fc.weight.step"));
    CHECK(index.at("tensors").contains("adamw.lr"));
  }
  const std::size_t count = dimsum::nn::parameter_count(run);
  std::vector<int> counts{n};  // the saving rank count first, then the others up to the world's
  for (int k : {1, 2, 4})
    if (k < n) counts.push_back(k);
  for (int mm : counts) {
    MPI_Comm c = first_ranks(mm);
    if (c != MPI_COMM_NULL) {
      INFO("saved on " << n << " ranks, resumed on " << mm);
      dist::mesh<data> m2(c, data{mm});
      auto resumed = small_model();
      char_lm::init_model(resumed, 77);  // other values: the checkpoint must replace them
      dist::sharded_adamw<data> opt2({.lr = 0.5});  // other options: the checkpoint restores them
      dist::load_module(m2, model_dir, resumed);
      // A failed load (a checkpoint of the model, not of an optimizer) leaves opt2 as it was ...
      const std::string not_optim = message_of([&] { dist::load_optimizer_state(m2, model_dir, resumed, opt2); });
      CHECK(not_optim.find("holds no AdamW state (no 'adamw.amsgrad')") != std::string::npos);
      CHECK(opt2.state_elements() == 0);
      dist::load_optimizer_state(m2, optim_dir, resumed, opt2);
      const std::size_t block = (count + std::size_t(mm) - 1) / std::size_t(mm);
      CHECK(opt2.state_elements() == 2 * block);
      // ... and a second failed load (another module) leaves the loaded state.
      auto deeper = char_lm::make_model(small_config(2));
      CHECK_THROWS_WITH(dist::load_optimizer_state(m2, optim_dir, deeper, opt2),
                        Catch::Contains("does not fit the module's optimizer state: missing 'blocks.1."));
      CHECK(opt2.state_elements() == 2 * block);
      for (std::uint64_t step = 3; step < 6; ++step) {
        const float loss = block_gradients(m2, resumed, step);
        opt2.step(m2, resumed);
        CHECK(std::abs(loss - want[step]) < 1e-5f);
        // on the rank count that saved it: the same operations, the same bits
        if (mm == n) CHECK(loss == uninterrupted[step]);
      }
      const double worst = worst_difference(run, resumed);
      CHECK(worst < 1e-5);
      if (mm == n) CHECK(worst == 0.0);
      MPI_Comm_free(&c);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  remove_dir(dir);
}

TEST_CASE("ranks that hold different modules get the same error from a checkpoint load, naming the parameter and ranks",
          "[mpi][zero][checkpoint]") {
  const int n = world_size();
  dist::mesh<data> m(MPI_COMM_WORLD, data{n});
  const std::string dir = shared_dir("mixed");
  auto model = small_model(), twin = small_model();  // the twin sees no failed load
  dist::sharded_adamw<data> opt(adamw_opts), twin_opt(adamw_opts);
  (void)block_gradients(m, model, 0);
  opt.step(m, model);
  (void)block_gradients(m, twin, 0);
  twin_opt.step(m, twin);
  dist::save_module(m, dir + "/model", model);
  dist::save_optimizer_state(m, dir + "/optim", model, opt);
  if (n > 1) {
    // The last rank builds its MLP 48 wide instead of 32.
    auto c = small_config();
    if (world_rank() == n - 1) c.d_mlp = 48;
    auto mixed = char_lm::make_model(c);
    const std::string ranks = n == 2 ? "rank 0" : n == 4 ? "ranks 0, 1, 2" : "";
    const std::string e1 = message_of([&] { dist::load_optimizer_state(m, dir + "/optim", mixed, opt); });
    CHECK(e1 == "dimsum: dist: loading optimizer state from checkpoint '" + dir +
                    "/optim': the ranks hold different modules: parameter 'blocks.0.mlp.c_fc.weight' is "
                    "(d_mlp, d_model) with extents (32, 16) on " + ranks + " but (d_mlp, d_model) with extents (48, 16) on rank " +
                    std::to_string(n - 1) + "; every rank must hold the same module");
    CHECK(same_on_every_rank(e1));
    const std::string e2 = message_of([&] { dist::load_module(m, dir + "/model", mixed); });
    CHECK(e2.find("loading a module from checkpoint '" + dir + "/model': the ranks hold different modules: parameter "
                  "'blocks.0.mlp.c_fc.weight' is") != std::string::npos);
    CHECK(same_on_every_rank(e2));
    // The last rank has one layer more: parameter lists of other lengths.
    auto deeper = char_lm::make_model(small_config(world_rank() == n - 1 ? 2 : 1));
    const std::string e3 = message_of([&] { dist::save_optimizer_state(m, dir + "/optim", deeper, opt); });
    CHECK(e3.find("saving checkpoint '" + dir + "/optim': the ranks hold different modules: parameter ") !=
          std::string::npos);
    CHECK(same_on_every_rank(e3));
    // The failed loads left the state: it still saves with the model it was made for.
    dist::save_optimizer_state(m, dir + "/optim", model, opt);
  }
  // The last rank's file is damaged, then goes missing: only that rank reads it, every rank throws.
  std::filesystem::path last_file;
  for (const auto& f : std::filesystem::directory_iterator(dir + "/optim"))
    if (f.path().filename().string().find("-rank" + std::string(5 - std::to_string(n - 1).size(), '0') +
                                          std::to_string(n - 1) + "-") != std::string::npos)
      last_file = f.path();
  REQUIRE(!last_file.empty());
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    // the data section ends the file: its last 8 bytes are a moment's
    std::fstream io(last_file, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-8, std::ios::end);
    const char junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    io.write(junk, 8);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::size_t kept = opt.state_elements();
  const std::string failed_on = "loading optimizer state from checkpoint '" + dir + "/optim' failed on rank " +
                                std::to_string(n - 1) + " of " + std::to_string(n) + ": ";
  const std::string e4 = message_of([&] { dist::load_optimizer_state(m, dir + "/optim", model, opt); });
  CHECK(e4.find(failed_on) != std::string::npos);
  CHECK(e4.find("fails its checksum") != std::string::npos);
  CHECK(same_on_every_rank(e4));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove(last_file);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string e5 = message_of([&] { dist::load_optimizer_state(m, dir + "/optim", model, opt); });
  CHECK(e5.find(failed_on) != std::string::npos);
  CHECK(e5.find("cannot be read") != std::string::npos);
  CHECK(same_on_every_rank(e5));
  // the failed loads left the optimizer as it was: its next step is the twin's, bit for bit
  CHECK(opt.state_elements() == kept);
  (void)block_gradients(m, model, 1);
  opt.step(m, model);
  (void)block_gradients(m, twin, 1);
  twin_opt.step(m, twin);
  CHECK(worst_difference(twin, model) == 0.0);
  remove_dir(dir);
}

TEST_CASE("gradient_reducer averages bucket by bucket during backward, as average_gradients does", "[mpi][data_parallel]") {
  const int n = world_size();
  dist::mesh<data> m(MPI_COMM_WORLD, data{n});
  auto single = small_model();
  auto whole = small_model(), bucketed = small_model();
  dimsum::optim::adamw opt_single(adamw_opts), opt_whole(adamw_opts), opt_bucketed(adamw_opts);
  // 512 bytes: about one bucket per weight matrix (the model's float
  // parameters are 2-2048 bytes each)
  dist::gradient_reducer<data> reducer(m, bucketed, 512);
  const std::size_t count = dimsum::nn::parameter_count(bucketed);
  REQUIRE(reducer.buckets() > 4);
  // every parameter in exactly one bucket, the last declared in the first
  std::vector<int> seen(count, 0);
  std::size_t params = 0;
  dimsum::nn::for_each_parameter(bucketed, [&](const std::string&, auto&) { ++params; });
  seen.assign(params, 0);
  for (std::size_t b = 0; b < reducer.buckets(); ++b)
    for (std::size_t k : reducer.bucket_parameters(b)) ++seen[k];
  CHECK(std::count(seen.begin(), seen.end(), 1) == std::ptrdiff_t(params));
  CHECK(reducer.bucket_parameters(0).front() == params - 1);
  for (std::uint64_t step = 0; step < 4; ++step) {
    const float loss_single = whole_batch_step(single, opt_single, step);
    (void)block_gradients(m, whole, step);
    dist::average_gradients<data>(m, whole);
    dist::reset_traffic();
    const float loss_mean = block_gradients(m, bucketed, step, &reducer);
    const std::size_t bytes = reducer.finish();
    CHECK(std::abs(loss_mean - loss_single) < 1e-5f);
    // one all-reduce per bucket, together every gradient once
    CHECK(bytes == count * sizeof(float));
    CHECK(dist::traffic_counter().calls == reducer.buckets());
    CHECK(dist::traffic_counter().payload_bytes == count * sizeof(float));
    // most buckets started while backward was still running (the first
    // layers' buckets complete only at its end)
    INFO("step " << step << ": " << reducer.started_during_backward() << " of " << reducer.buckets()
                 << " buckets started during backward");
    CHECK(reducer.started_during_backward() * 2 >= reducer.buckets());
    // the same averages as one all-reduce of everything (the sums may be
    // grouped otherwise on 4 ranks: float rounding)
    std::vector<const float*> want;
    dimsum::nn::for_each_parameter(whole, [&](const std::string&, auto& p) { want.push_back(p.grad.data()); });
    std::size_t i = 0;
    double worst = 0;
    dimsum::nn::for_each_parameter(bucketed, [&](const std::string&, auto& p) {
      for (std::size_t j = 0; j < p.grad.size(); ++j)
        worst = std::max(worst, double(std::abs(p.grad.data()[j] - want[i][j])));
      ++i;
    });
    CHECK(worst <= (n <= 2 ? 0.0 : 1e-7));
    opt_whole.step(whole);
    opt_bucketed.step(bucketed);
  }
  const double worst = worst_difference(single, bucketed);
  INFO("worst parameter difference " << worst);
  CHECK(worst < 1e-5);
}

namespace {
struct reduced_model {
  BOOST_HANA_DEFINE_STRUCT(reduced_model, (dimsum::parameter<float, feat>, w), (dimsum::parameter<double, feat>, u),
                           (dimsum::parameter<float, feat>, unused), (dimsum::parameter<float, feat>, off),
                           (dimsum::frozen_parameter<float, feat>, fixed));
};
}  // namespace

TEST_CASE("gradient_reducer: a parameter watched twice, one unused, one not requiring grad, double and float",
          "[mpi][data_parallel]") {
  const int n = world_size(), rank = world_rank();
  dist::mesh<data> m(MPI_COMM_WORLD, data{n});
  reduced_model md;
  md.w = dimsum::tensor<float, feat>(feat{3});
  md.u = dimsum::tensor<double, feat>(feat{3});
  md.unused = dimsum::tensor<float, feat>(feat{3});
  md.off = dimsum::tensor<float, feat>(feat{3});
  md.fixed = dimsum::tensor<float, feat>(feat{3});
  for (std::size_t i = 0; i < 3; ++i) {
    md.w.value.data()[i] = 0.5f + float(i);
    md.u.value.data()[i] = 2.0 - double(i);
  }
  md.off.requires_grad = false;
  // one bucket per parameter
  dist::gradient_reducer<data> reducer(m, md, 1);
  CHECK(reducer.buckets() == 4);  // the frozen_parameter has no gradient to reduce
  for (int step = 0; step < 2; ++step) {
    dimsum::nn::zero_grad(md);
    // gradients that no backward changes: averaged as they stand
    md.unused.grad.fill(float(rank));
    md.off.grad.fill(float(2 * rank));
    const double r = rank + 1;
    {
      dimsum::grad::tape t;
      reducer.attach(t);
      auto w1 = t.watch(md.w), w2 = t.watch(md.w);  // two watches, one parameter
      auto u = t.watch(md.u);
      auto off = t.watch(md.off);
      auto fixed = t.watch(md.fixed);
      // loss = r sum(w w) + sum(3 w) + r sum(u u u) (+ terms without gradient)
      auto lw = dimsum::sum<feat>(w1 * w1 * float(r) + w2 * 3.0f + off + fixed);
      auto lu = dimsum::sum<feat>(u * u * u * r);
      t.backward(lw + dimsum::cast<float>(lu));
    }
    reducer.finish();
    // averages over ranks: mean(r) = (n + 1) / 2, mean(rank) = (n - 1) / 2
    const double mean_r = (n + 1) / 2.0, mean_rank = (n - 1) / 2.0;
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(md.w.grad.data()[i] == Approx(2 * md.w.value.data()[i] * mean_r + 3).epsilon(1e-6));
      CHECK(md.u.grad.data()[i] == Approx(3 * md.u.value.data()[i] * md.u.value.data()[i] * mean_r).epsilon(1e-12));
      CHECK(md.unused.grad.data()[i] == Approx(mean_rank).epsilon(1e-7));
      CHECK(md.off.grad.data()[i] == Approx(2 * mean_rank).epsilon(1e-7));
    }
  }
  if (n > 1) {
    // a rank whose module differs: every rank throws the same shape_error at attach
    dimsum::nn::zero_grad(md);
    reduced_model other = md;
    if (rank == n - 1) other.w = dimsum::tensor<float, feat>(feat{4});
    dist::gradient_reducer<data> mixed(m, other, 1);
    dimsum::grad::tape t;
    const std::string e = message_of([&] { mixed.attach(t); });
    CHECK(e.find("dimsum: gradient_reducer over mesh axis 'data' (attach): dim 'gradient elements of bucket 3' has "
                 "extent 3 on rank") != std::string::npos);
    CHECK(e.find("but 4 on rank " + std::to_string(n - 1)) != std::string::npos);
    CHECK(same_on_every_rank(e));
  }
}

