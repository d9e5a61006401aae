// Sharded checkpoints under mpirun: a checkpoint saved on N ranks (a
// sub-communicator of the first N) loads on M ranks with another mesh
// layout, and into one process, for every N, M in {1, 2, 4} up to the
// world's size. Expected values come from the formula that filled the
// tensors (plain loops over global indices), never from the code under
// test. Also: a save that fails on one rank leaves the old checkpoint
// intact and throws on every rank; load errors (missing tensor, dtype,
// dims, uneven split, a missing rank file) throw on every rank.
#include <catch2/catch.hpp>

#include <mpi.h>

#include "world.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <dimsum/dimsum.hpp>
#include <dimsum/distributed/dist.hpp>

namespace dist = dimsum::dist;
namespace fs = std::filesystem;
using dimsum::tensor;

namespace {
DIMSUM_MESH_AXIS(data);
DIMSUM_MESH_AXIS(model);
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_model);
DIMSUM_DIM(d_head, 3);

// The tensors' values, by global index (distinct, exact in float).
float w_value(std::size_t h, std::size_t m, std::size_t k) { return float(100 * h + 10 * m + k) + 0.25f; }
double e_value(std::size_t b, std::size_t p) { return double(b) * 1000.0 + double(p) + 0.5; }
float bias_value(std::size_t m) { return -float(m) - 0.75f; }

using W = tensor<float, nheads, d_model, d_head>;   // 8 x 6 x 3
using E = tensor<double, batch, posn>;              // 8 x 4
using Bias = tensor<float, d_model>;                // 6

W full_w() {
  W w(nheads{8}, d_model{6});
  for (std::size_t h = 0; h < 8; ++h)
    for (std::size_t m = 0; m < 6; ++m)
      for (std::size_t k = 0; k < 3; ++k) w(nheads{h}, d_model{m}, d_head{k}) = w_value(h, m, k);
  return w;
}
E full_e() {
  E e(batch{8}, posn{4});
  for (std::size_t b = 0; b < 8; ++b)
    for (std::size_t p = 0; p < 4; ++p) e(batch{b}, posn{p}) = e_value(b, p);
  return e;
}
Bias full_bias() {
  Bias x(d_model{6});
  for (std::size_t m = 0; m < 6; ++m) x(d_model{m}) = bias_value(m);
  return x;
}

using W_split = dist::sharded<W, dist::split<nheads, model>>;
using E_split = dist::sharded<E, dist::split<batch, data>, dist::split<posn, model>>;

/// Mesh layouts (data x model) of n ranks: how a save lays them out, and a
/// different one for loading.
std::pair<int, int> save_layout(int n) { return n == 4 ? std::pair{2, 2} : std::pair{1, n}; }
std::pair<int, int> load_layout(int n) { return n == 4 ? std::pair{1, 4} : std::pair{n, 1}; }

void save_on(MPI_Comm comm, int n, const std::string& dir, float shift = 0, bool flat = false) {
  const auto [d, mo] = flat ? std::pair{1, n} : save_layout(n);
  dist::mesh<data, model> m(comm, data{d}, model{mo});
  W w = full_w();
  for (std::size_t i = 0; i < w.size(); ++i) w.data()[i] += shift;
  const auto ws = dist::shard<dist::split<nheads, model>>(m, w);
  const auto es = dist::shard<dist::split<batch, data>, dist::split<posn, model>>(m, full_e());
  dist::save_checkpoint(m, dir, dist::entry("attn.W_Q", ws), dist::entry("embed", es), dist::entry("bias", full_bias()));
}

/// Checks this rank's blocks loaded on mesh m against the formulas.
void check_loaded(const dist::mesh<data, model>& m, const std::string& dir, float shift = 0) {
  dist::checkpoint_reader r(dir);
  const auto ws = r.load<W_split>(m, "attn.W_Q");
  const auto es = r.load<E_split>(m, "embed");
  const auto b = r.load<Bias>(m, "bias");
  const std::size_t mp = static_cast<std::size_t>(m.axis_size<model>()), dp = static_cast<std::size_t>(m.axis_size<data>());
  const std::size_t mc = static_cast<std::size_t>(m.coord<model>()), dc = static_cast<std::size_t>(m.coord<data>());
  REQUIRE(ws.local().extent<nheads>() == 8 / mp);
  REQUIRE(ws.local().extent<d_model>() == 6);
  std::size_t bad = 0;
  for (std::size_t h = 0; h < 8 / mp; ++h)
    for (std::size_t x = 0; x < 6; ++x)
      for (std::size_t k = 0; k < 3; ++k)
        bad += ws.local()(nheads{h}, d_model{x}, d_head{k}) != w_value(mc * (8 / mp) + h, x, k) + shift;
  REQUIRE(es.local().extent<batch>() == 8 / dp);
  REQUIRE(es.local().extent<posn>() == 4 / mp);
  for (std::size_t i = 0; i < 8 / dp; ++i)
    for (std::size_t p = 0; p < 4 / mp; ++p)
      bad += es.local()(batch{i}, posn{p}) != e_value(dc * (8 / dp) + i, mc * (4 / mp) + p);
  REQUIRE(b.extent<d_model>() == 6);
  for (std::size_t x = 0; x < 6; ++x) bad += b(d_model{x}) != bias_value(x);
  CHECK(bad == 0);
}

void check_full(const std::string& dir) {
  const auto w = dist::load_full<W>(dir, "attn.W_Q");
  const auto e = dist::load_full<E>(dir, "embed");
  const auto b = dist::load_full<Bias>(dir, "bias");
  REQUIRE(w.extent<nheads>() == 8);
  REQUIRE(e.extent<batch>() == 8);
  REQUIRE(e.extent<posn>() == 4);
  std::size_t bad = 0;
  for (std::size_t h = 0; h < 8; ++h)
    for (std::size_t x = 0; x < 6; ++x)
      for (std::size_t k = 0; k < 3; ++k) bad += w(nheads{h}, d_model{x}, d_head{k}) != w_value(h, x, k);
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t p = 0; p < 4; ++p) bad += e(batch{i}, posn{p}) != e_value(i, p);
  for (std::size_t x = 0; x < 6; ++x) bad += b(d_model{x}) != bias_value(x);
  CHECK(bad == 0);
}
}  // namespace

TEST_CASE("a checkpoint saved on N ranks loads on M ranks and into one process") {
  const int world = world_size();
  for (int n : {1, 2, 4}) {
    if (n > world) continue;
    const std::string dir = shared_dir("n" + std::to_string(n));
    if (MPI_Comm c = first_ranks(n); c != MPI_COMM_NULL) {
      save_on(c, n, dir);
      MPI_Comm_free(&c);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // Each block written once: n files for W (4 when n = 4, by model coordinate and data 0) ...
    if (world_rank() == 0) {
      const auto index = nlohmann::json::parse(std::ifstream(fs::path(dir) / "dimsum-checkpoint.json"));
      CHECK(index.at("ranks").get<int>() == n);
      CHECK(index.at("tensors").at("attn.W_Q").at("blocks").size() == std::size_t(save_layout(n).second));
      CHECK(index.at("tensors").at("embed").at("blocks").size() == std::size_t(n));
      CHECK(index.at("tensors").at("bias").at("blocks").size() == 1);
    }
    for (int mm : {1, 2, 4}) {
      if (mm > world) continue;
      INFO("saved on " << n << " ranks, loaded on " << mm);
      if (MPI_Comm c = first_ranks(mm); c != MPI_COMM_NULL) {
        const auto [d, mo] = load_layout(mm);
        dist::mesh<data, model> m(c, data{d}, model{mo});
        check_loaded(m, dir);
        MPI_Comm_free(&c);
      }
    }
    INFO("saved on " << n << " ranks, loaded whole in one process");
    check_full(dir);
    remove_dir(dir);
  }
}

TEST_CASE("a save that fails on one rank throws on every rank and leaves the old checkpoint") {
  const int world = world_size();
  const std::string dir = shared_dir("fail");
  save_on(MPI_COMM_WORLD, world, dir);
  const auto [d, mo] = save_layout(world);
  // The next save is generation 2; the last rank cannot write its file
  // because a directory stands where it goes.
  const fs::path obstacle = fs::path(dir) / ("g2-rank" + std::string(5 - std::to_string(world - 1).size(), '0') +
                                             std::to_string(world - 1) + "-of-" +
                                             std::string(5 - std::to_string(world).size(), '0') + std::to_string(world) +
                                             ".safetensors");
  if (world_rank() == 0) fs::create_directories(obstacle / "x");
  MPI_Barrier(MPI_COMM_WORLD);
  std::string message;
  try {
    save_on(MPI_COMM_WORLD, world, dir, 1000.0f);
  } catch (const dist::checkpoint_error& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("saving checkpoint '" + dir + "' failed on rank " + std::to_string(world - 1)) != std::string::npos);
  // The old checkpoint, generation 1, loads with the old values; no file of generation 2 is left.
  dist::mesh<data, model> m(MPI_COMM_WORLD, data{d}, model{mo});
  check_loaded(m, dir);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    fs::remove_all(obstacle);
    for (const auto& f : fs::directory_iterator(dir)) CHECK(f.path().filename().string().rfind("g2-", 0) != 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // A later save succeeds, replaces the values and removes generation 1's files.
  save_on(MPI_COMM_WORLD, world, dir, 1000.0f);
  check_loaded(m, dir, 1000.0f);
  if (world_rank() == 0)
    for (const auto& f : fs::directory_iterator(dir)) CHECK(f.path().filename().string().rfind("g1-", 0) != 0);
  remove_dir(dir);
}

TEST_CASE("checkpoint load errors are thrown on every rank") {
  const int world = world_size();
  const std::string dir = shared_dir("errors");
  save_on(MPI_COMM_WORLD, world, dir, 0, /*flat=*/true);
  dist::mesh<data, model> m(MPI_COMM_WORLD, data{1}, model{world});
  CHECK_THROWS_WITH((dist::load<W_split>(m, dir, "W_Q")),
                    Catch::Contains("has no tensor 'W_Q' (it has: attn.W_Q, bias, embed)"));
  CHECK_THROWS_WITH((dist::load<tensor<double, d_model>>(m, dir, "bias")),
                    Catch::Contains("tensor 'bias' is F32 in the checkpoint but F64 in the type loading it"));
  CHECK_THROWS_AS((dist::load<dist::sharded<tensor<float, nheads, d_head, d_model>, dist::split<nheads, model>>>(
                      m, dir, "attn.W_Q")),
                  dimsum::shape_error);
  CHECK_THROWS_WITH((dist::load<tensor<float, nheads, d_head, d_model>>(m, dir, "attn.W_Q")),
                    Catch::Contains("has dims (nheads d_model d_head) in the checkpoint but (nheads d_head d_model)"));
  CHECK_THROWS_WITH((dist::load_full<tensor<float, nheads, d_model, dimsum::dim<"d_head", 4>>>(dir, "attn.W_Q")),
                    Catch::Contains("dim 'd_head' has extent 3 in the checkpoint but 4 in the type loading it"));
  if (world > 1) {
    // d_model (6) does not split over 4 ranks; d_head (3) over none of 2 or 4
    // (loaded as a dim of that name without a static extent: a split dim must be dynamic).
    using d_head_dyn = dimsum::dim<"d_head">;
    using W_dyn = tensor<float, nheads, d_model, d_head_dyn>;
    CHECK_THROWS_WITH((dist::load<dist::sharded<W_dyn, dist::split<d_head_dyn, model>>>(m, dir, "attn.W_Q")),
                      Catch::Contains("dim 'd_head' of extent 3 does not split evenly over mesh axis 'model' of size " +
                                      std::to_string(world)));
  }
  // A damaged index: every rank throws the same clear error, and so does a load in one process.
  MPI_Barrier(MPI_COMM_WORLD);
  const fs::path index = fs::path(dir) / "dimsum-checkpoint.json";
  const fs::path kept = fs::path(dir) / "kept.json";
  if (world_rank() == 0) {
    fs::copy_file(index, kept);
    auto j = nlohmann::json::parse(std::ifstream(index));
    j["files"][0] = "../elsewhere.safetensors";
    std::ofstream(index) << j.dump();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK_THROWS_WITH((dist::load<W_split>(m, dir, "attn.W_Q")),
                    Catch::Contains("the index is not a dimsum sharded checkpoint index (a file that is not a plain name"));
  CHECK_THROWS_AS(dist::load_full<W>(dir, "attn.W_Q"), dist::checkpoint_error);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    auto j = nlohmann::json::parse(std::ifstream(kept));
    j["tensors"]["attn.W_Q"]["blocks"][0]["offset"][0] = 7;  // past the 8 heads with its block
    std::ofstream(index) << j.dump();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK_THROWS_WITH(dist::load_full<W>(dir, "attn.W_Q"), Catch::Contains("a block outside the tensor"));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::rename(kept, index);
  MPI_Barrier(MPI_COMM_WORLD);
  // The last rank's file goes missing: only that rank needs it, every rank throws.
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0)
    for (const auto& f : fs::directory_iterator(dir))
      if (f.path().filename().string().find("-rank" + std::string(5 - std::to_string(world - 1).size(), '0') +
                                            std::to_string(world - 1)) != std::string::npos)
        fs::remove(f.path());
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK_THROWS_WITH((dist::load<W_split>(m, dir, "attn.W_Q")),
                    Catch::Contains("failed on rank " + std::to_string(world - 1) + " of " + std::to_string(world)));
  remove_dir(dir);
}

TEST_CASE("a rank file with damaged data fails its checksum on every rank, with one prefix") {
  const int world = world_size();
  const std::string dir = shared_dir("checksum");
  save_on(MPI_COMM_WORLD, world, dir, 0, /*flat=*/true);
  dist::mesh<data, model> m(MPI_COMM_WORLD, data{1}, model{world});
  // rank 0's file holds the replicated 'bias': overwrite 8 of its data bytes
  std::string file;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().filename().string().find("-rank00000-") != std::string::npos) file = f.path().filename().string();
  REQUIRE(!file.empty());
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    std::fstream io(fs::path(dir) / file, std::ios::in | std::ios::out | std::ios::binary);
    unsigned char len_bytes[8] = {};
    io.read(reinterpret_cast<char*>(len_bytes), 8);
    std::uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];
    std::string header(header_len, ' ');
    io.read(header.data(), static_cast<std::streamsize>(header_len));
    const auto begin = nlohmann::json::parse(header)["bias"]["data_offsets"][0].get<std::uint64_t>();
    io.seekp(static_cast<std::streamoff>(8 + header_len + begin));
    const char junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    io.write(junk, 8);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::string message;
  try {
    (void)dist::load<Bias>(m, dir, "bias");
  } catch (const dist::checkpoint_error& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.rfind("dimsum: dist: loading 'bias' from checkpoint '" + dir + "' failed on rank 0 of " +
                          std::to_string(world) + ": checkpoint '" + dir + "': tensor 'bias': its block in rank file " +
                          file + " fails its checksum (crc32 ",
                      0) == 0);
  CHECK(message.find("dimsum:", 1) == std::string::npos);
  CHECK_THROWS_WITH(dist::load_full<Bias>(dir, "bias"), Catch::Contains("fails its checksum"));
  // the undamaged tensors of that file still load
  CHECK(dist::load_full<W>(dir, "attn.W_Q")(nheads{1}, d_model{2}, d_head{0}) == w_value(1, 2, 0));
  remove_dir(dir);
}

