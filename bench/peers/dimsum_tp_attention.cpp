// Seed 000's causal attention forward, tensor-parallel over MPI ranks (heads
// split over the mesh axis `model`), the distributed entry of bench/scaling.
//
//   mpirun -np R dimsum_tp_attention B P M H D [reps] [--out file.f32]
//
// Each rank projects its heads with dist::einsum (W_Q, W_K, W_V, b_Q, b_K,
// b_V and W_O split by head), runs the attention of its heads through the
// fused kernel on its local blocks (dist::map), and the output contraction leaves a
// partial sum over `model` that one all_reduce completes. Rank 0 prints
// "median_ms=<x>" (each run between barriers), "peak_extra_mib=<x>" (the
// largest over the ranks), "ring_bytes=<x>" and "payload_bytes=<x>" (what
// each rank's collectives sent in one forward, dist::traffic_counter), and
// with --out writes the output (b, p, m) as raw float32.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <dimsum/dimsum.hpp>
#include <dimsum/distributed/dist.hpp>

#include "inputs.hpp"
#include "mpi_peer.hpp"

namespace dist = dimsum::dist;
using dimsum::einsum;
using dimsum::rename;
using dimsum::tensor;

DIMSUM_MESH_AXIS(model);
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_model);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);

namespace {
template <class T>
T filled(const std::vector<float>& v, T t) {
  std::copy(v.begin(), v.end(), t.data());
  return t;
}
using by_head = dist::split<nheads, model>;

int run(const bench::peer_args& args) {
  const bench::attention_shape s = args.shape;
  int ranks = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  dist::mesh<model> m(MPI_COMM_WORLD, model{ranks});

  bench::attention_inputs in(s);
  const batch B{s.b};
  const posn P{s.p};
  const d_model M{s.m};
  const nheads H{s.h};
  const d_head D{s.d};
  const auto x = filled(in.x, tensor<float, batch, posn, d_model>(B, P, M));
  const auto W_Q = dist::shard<by_head>(m, filled(in.W_Q, tensor<float, nheads, d_model, d_head>(H, M, D)));
  const auto W_K = dist::shard<by_head>(m, filled(in.W_K, tensor<float, nheads, d_model, d_head>(H, M, D)));
  const auto W_V = dist::shard<by_head>(m, filled(in.W_V, tensor<float, nheads, d_model, d_head>(H, M, D)));
  const auto W_O = dist::shard<by_head>(m, filled(in.W_O, tensor<float, nheads, d_head, d_model>(H, D, M)));
  const auto b_Q = dist::shard<by_head>(m, filled(in.b_Q, tensor<float, nheads, d_head>(H, D)));
  const auto b_K = dist::shard<by_head>(m, filled(in.b_K, tensor<float, nheads, d_head>(H, D)));
  const auto b_V = dist::shard<by_head>(m, filled(in.b_V, tensor<float, nheads, d_head>(H, D)));
  const auto b_O = filled(in.b_O, tensor<float, d_model>(M));
  const float scale = 1.0f / std::sqrt(float(s.d));
  const float inf = std::numeric_limits<float>::infinity();

  tensor<float, batch, posn, d_model> out;
  auto forward = [&] {
    const auto q = dist::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, W_Q) + b_Q;
    const auto k = dist::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, W_K) + b_K;
    const auto v = dist::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, W_V) + b_V;
    // The attention of this rank's heads: one fused pass over its blocks
    // (dist::map: no dim of it is split, so the local code is the
    // single-process code; the result keeps split<nheads, model>).
    const auto z = dist::map(
        [&](const auto& ql, const auto& kl, const auto& vl) {
          auto zq = einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
              dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(
                  einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(
                      rename<posn, q_posn>(ql), rename<posn, k_posn>(kl)) *
                      scale,
                  -inf)),
              rename<posn, k_posn>(vl));
          static_assert(decltype(zq)::uses_fused_attention);
          return rename<q_posn, posn>(std::move(zq));  // moved in: zq dies with the lambda
        },
        q, k, v);
    out = dist::all_reduce(dist::einsum<"batch posn nheads d_head, nheads d_head d_model -> batch posn d_model">(z, W_O)) +
          b_O;
  };

  // Peak memory of one call (the largest rank's), and the bytes it sent.
  const bench::mpi_call_cost cost = bench::measure_mpi_call(forward);
  const double median = bench::median_ms_between_barriers(forward, args.reps);
  if (me != 0) return 0;
  bench::print_mpi_result(cost, median);
  return bench::write_floats(args.out_path, out.data(), out.size());
}
}  // namespace

int main(int argc, char** argv) { return bench::mpi_peer_main(argc, argv, run); }
