// Seed 000's causal attention forward, sequence-parallel over MPI ranks
// (positions split over the mesh axis `seq`, ring attention), the
// sequence-parallel entry of bench/scaling.
//
//   mpirun -np R dimsum_sp_attention B P M H D [reps] [--out file.f32]
//
// Each rank holds P / R consecutive positions of x and the whole weights,
// projects its positions (q, k, v, no communication), runs
// dist::ring_attention over `seq` (the K/V blocks travel around the ring,
// each block pair one fused kernel call, causal block pairs in the future
// skipped) and projects its block of the output: the output stays split by
// position, no all-reduce. Rank 0 prints "median_ms=<x>" (each run between
// barriers), "peak_extra_mib=<x>" (the largest over the ranks),
// "ring_bytes=<x>" and "payload_bytes=<x>" (what each rank's ring shifts
// sent in one forward, dist::traffic_counter), and with --out gathers the
// output (b, p, m) and writes it as raw float32.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dimsum/dimsum.hpp>
#include <dimsum/distributed/dist.hpp>
#include <string>
#include <utility>
#include <vector>

#include "inputs.hpp"
#include "mpi_peer.hpp"

namespace dist = dimsum::dist;
using dimsum::einsum;
using dimsum::rename;
using dimsum::tensor;

DIMSUM_MESH_AXIS(seq);
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

int run(const bench::peer_args& args) {
  const bench::attention_shape s = args.shape;
  int ranks = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  dist::mesh<seq> m(MPI_COMM_WORLD, seq{ranks});
  if (s.p % static_cast<std::size_t>(ranks) != 0) {
    std::fprintf(stderr, "p = %zu does not split over %d ranks\n", s.p, ranks);
    return 2;
  }
  const std::size_t blk = s.p / static_cast<std::size_t>(ranks);

  bench::attention_inputs in(s);
  const batch B{s.b};
  const d_model M{s.m};
  const nheads H{s.h};
  const d_head D{s.d};
  // this rank's positions of x
  tensor<float, batch, posn, d_model> x(B, posn{blk}, M);
  for (std::size_t b = 0; b < s.b; ++b)
    std::copy_n(in.x.data() + (b * s.p + blk * static_cast<std::size_t>(me)) * s.m, blk * s.m,
                x.data() + b * blk * s.m);
  const auto W_Q = filled(in.W_Q, tensor<float, nheads, d_model, d_head>(H, M, D));
  const auto W_K = filled(in.W_K, tensor<float, nheads, d_model, d_head>(H, M, D));
  const auto W_V = filled(in.W_V, tensor<float, nheads, d_model, d_head>(H, M, D));
  const auto W_O = filled(in.W_O, tensor<float, nheads, d_head, d_model>(H, D, M));
  const auto b_Q = filled(in.b_Q, tensor<float, nheads, d_head>(H, D));
  const auto b_K = filled(in.b_K, tensor<float, nheads, d_head>(H, D));
  const auto b_V = filled(in.b_V, tensor<float, nheads, d_head>(H, D));
  const auto b_O = filled(in.b_O, tensor<float, d_model>(M));
  const double scale = 1.0 / std::sqrt(double(s.d));

  tensor<float, batch, posn, d_model> out;
  auto forward = [&] {
    tensor<float, batch, q_posn, nheads, d_head> q = rename<posn, q_posn>(
        einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, W_Q) + b_Q);
    tensor<float, batch, k_posn, nheads, d_head> k = rename<posn, k_posn>(
        einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, W_K) + b_K);
    tensor<float, batch, k_posn, nheads, d_head> v = rename<posn, k_posn>(
        einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, W_V) + b_V);
    // each rank's blocks of positions, as they are (dist::from_local would first compare extents)
    const dist::sharded<decltype(q), dist::split<q_posn, seq>> qs(std::move(q), m.comms());
    const dist::sharded<decltype(k), dist::split<k_posn, seq>> ks(std::move(k), m.comms());
    const dist::sharded<decltype(v), dist::split<k_posn, seq>> vs(std::move(v), m.comms());
    const auto z = dist::ring_attention<d_head>(qs, ks, vs, {.scale = scale, .causal = true});
    out = einsum<"batch posn nheads d_head, nheads d_head d_model -> batch posn d_model">(
              rename<q_posn, posn>(z.local()), W_O) +
          b_O;
  };

  // Peak memory of one call (the largest rank's), and the bytes it sent.
  const bench::mpi_call_cost cost = bench::measure_mpi_call(forward);
  const double median = bench::median_ms_between_barriers(forward, args.reps);
  // the output's blocks, gathered on rank 0 for --out (not timed)
  std::vector<float> all(me == 0 ? s.b * s.p * s.m : 0);
  MPI_Gather(out.data(), static_cast<int>(out.size()), MPI_FLOAT, all.data(), static_cast<int>(out.size()), MPI_FLOAT,
             0, MPI_COMM_WORLD);
  if (me != 0) return 0;
  bench::print_mpi_result(cost, median);
  if (args.out_path.empty()) return 0;
  std::vector<float> full(s.b * s.p * s.m);  // [rank][batch][blk][m] -> [batch][p][m]
  for (int r = 0; r < ranks; ++r)
    for (std::size_t b = 0; b < s.b; ++b)
      std::copy_n(all.data() + (static_cast<std::size_t>(r) * s.b + b) * blk * s.m, blk * s.m,
                  full.data() + (b * s.p + static_cast<std::size_t>(r) * blk) * s.m);
  return bench::write_floats(args.out_path, full.data(), full.size());
}
}  // namespace

int main(int argc, char** argv) { return bench::mpi_peer_main(argc, argv, run); }
