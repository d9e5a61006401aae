// Seed 003's multi-head cross-attention with a padding mask, tensor-parallel
// under mpirun: the heads of q_linear, k_linear, v_linear (and their
// biases) and of out split over the mesh axis `model`, one all_reduce after
// the output projection. Checked against the seed's PyTorch output
// (tests/reference/fixtures/seed003/mha_cross_padmask, 6 heads: 1, 2, 3 or
// 6 ranks; other rank counts check that the heads do not split).
#include <catch2/catch.hpp>

#include <mpi.h>

#include "world.hpp"

#include <cmath>
#include <string>

#include <dimsum/dimsum.hpp>
#include <dimsum/distributed/dist.hpp>

namespace dist = dimsum::dist;
using dimsum::tensor;

namespace {
DIMSUM_MESH_AXIS(model);
DIMSUM_DIM(batch);
DIMSUM_DIM(nheads);
DIMSUM_DIM(q_seq);
DIMSUM_DIM(kv_seq);
DIMSUM_DIM(emb);
DIMSUM_DIM(dim_k);
DIMSUM_DIM(features);  // (nheads dim_k), as nn.Linear stores it
DIMSUM_DIM(one);

const std::string dir = std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/seed003/";

template <class TT>
TT load(const std::string& name) {
  return dimsum::load_npy<TT>(dir + name);
}

}  // namespace

TEST_CASE("seed 003 cross-attention with a padding mask, heads split over ranks, equals PyTorch", "[mpi][seed003]") {
  const int n = world_size();
  dist::mesh<model> m(MPI_COMM_WORLD, model{n});
  const nheads h{6};
  // nn.Linear's weight is (out, in) = ((nheads dim_k), emb): split the heads out by name.
  auto linear_weight = [&](const std::string& name) {
    return dimsum::eval(dimsum::rearrange<"(nheads dim_k) emb -> nheads dim_k emb">(
        load<tensor<float, features, emb>>("mha/" + name + "_weight.npy"), h));
  };
  auto linear_bias = [&](const std::string& name) {
    return dimsum::eval(dimsum::rearrange<"(nheads dim_k) -> nheads dim_k">(load<tensor<float, features>>("mha/" + name + "_bias.npy"), h));
  };
  if (6 % n != 0) {
    auto uneven = [&] { return dist::shard<dist::split<nheads, model>>(m, linear_weight("q_linear")); };
    CHECK_THROWS_AS(uneven(), dimsum::shape_error);
    return;
  }
  using by_head = dist::split<nheads, model>;
  const auto Wq = dist::shard<by_head>(m, linear_weight("q_linear")), Wk = dist::shard<by_head>(m, linear_weight("k_linear")),
             Wv = dist::shard<by_head>(m, linear_weight("v_linear"));
  const auto bq = dist::shard<by_head>(m, linear_bias("q_linear")), bk = dist::shard<by_head>(m, linear_bias("k_linear")),
             bv = dist::shard<by_head>(m, linear_bias("v_linear"));
  const auto Wo = dist::shard<by_head>(
      m, dimsum::eval(dimsum::rearrange<"emb (nheads dim_k) -> emb nheads dim_k">(load<tensor<float, emb, features>>("mha/out_weight.npy"), h)));
  const auto bo = load<tensor<float, emb>>("mha/out_bias.npy");

  const std::string c = "mha_cross_padmask/";
  const auto q_in = load<tensor<float, batch, q_seq, emb>>(c + "q_in.npy");
  const auto kv_in = load<tensor<float, batch, kv_seq, emb>>(c + "kv_in.npy");
  const auto keep = dimsum::select<one>(load<tensor<bool, batch, one, kv_seq>>(c + "mask.npy"), 0);
  tensor<bool, batch, kv_seq> padded(batch{keep.extent<batch>()}, kv_seq{keep.extent<kv_seq>()});
  for (std::size_t b = 0; b < padded.extent<batch>(); ++b)
    for (std::size_t j = 0; j < padded.extent<kv_seq>(); ++j) padded(batch{b}, kv_seq{j}) = !keep(batch{b}, kv_seq{j});

  const auto q = dist::einsum<"batch q_seq emb, nheads dim_k emb -> batch q_seq nheads dim_k">(q_in, Wq) + bq;
  const auto k = dist::einsum<"batch kv_seq emb, nheads dim_k emb -> batch kv_seq nheads dim_k">(kv_in, Wk) + bk;
  const auto v = dist::einsum<"batch kv_seq emb, nheads dim_k emb -> batch kv_seq nheads dim_k">(kv_in, Wv) + bv;
  const auto scores =
      dist::einsum<"batch q_seq nheads dim_k, batch kv_seq nheads dim_k -> batch nheads q_seq kv_seq">(q, k) / 2.0f;
  const auto weights = dist::softmax<kv_seq>(dist::masked_fill(scores, padded, -1e9f));
  const auto attn = dist::einsum<"batch nheads q_seq kv_seq, batch kv_seq nheads dim_k -> batch q_seq nheads dim_k">(weights, v);
  const auto partial_out = dist::einsum<"batch q_seq nheads dim_k, emb nheads dim_k -> batch q_seq emb">(attn, Wo);
  const tensor<float, batch, q_seq, emb> out = dist::all_reduce(partial_out) + bo;

  // The seed's own output, and this rank's heads of its softmax weights.
  const auto want = load<tensor<float, batch, q_seq, emb>>(c + "output.npy");
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, double(std::abs(out.data()[i] - want.data()[i])));
  INFO("worst abs error " << worst);
  CHECK(worst < 1e-5);
  const auto soft = load<tensor<float, batch, nheads, q_seq, kv_seq>>(c + "softscores.npy");
  const auto mine = dist::shard<by_head>(m, soft);
  double worst_w = 0;
  for (std::size_t i = 0; i < mine.local().size(); ++i)
    worst_w = std::max(worst_w, double(std::abs(weights.local().data()[i] - mine.local().data()[i])));
  CHECK(worst_w < 1e-6);
}

