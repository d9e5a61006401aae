// One training step of seed 000's causal attention layer, sequence-parallel
// over MPI ranks (positions split over the mesh axis `seq`, ring attention
// forward and backward): the sequence-parallel training-step entry of
// bench/scaling beside bench/peers/dimsum_tp_train.cpp.
//
//   mpirun -np R dimsum_sp_train B P M H D [reps] [--out file.f32]
//
// Each rank holds P / R consecutive positions of x and R, and the whole
// weights (watched on its own tape): it projects its positions, runs
// dist::ring_attention over `seq` on vars (one tape node; its backward is
// the ring backward, dK/dV travelling back to their rank) and projects its
// block of the output; its loss is sum(out * R) over its positions. Every
// weight's gradient is then this rank's part of the whole-sequence
// gradient: one all-reduce (sum) of all of them packed together completes
// it on every rank, and AdamW (PyTorch's defaults) steps each rank's copy.
// Rank 0 prints median_ms (each step between barriers), peak_extra_mib (the
// largest rank's) and what one step's ring shifts and all-reduce sent per
// rank (ring_bytes, payload_bytes, collectives); with --out it writes the
// first step's gradients as raw float32 in dimsum_train.cpp's order (W_Q,
// W_K, W_V, W_O, b_Q, b_K, b_V, b_O).

#include <cmath>
#include <cstdio>
#include <vector>

#include <dimsum/dimsum.hpp>
#include <dimsum/distributed/dist.hpp>
#include <dimsum/training.hpp>

#include "inputs.hpp"
#include "seed000_layer.hpp"
#include "mpi_peer.hpp"

namespace dist = dimsum::dist;
namespace grad = dimsum::grad;
using dimsum::einsum;
using dimsum::parameter;
using dimsum::rename;
using dimsum::tensor;

DIMSUM_MESH_AXIS(seq);

namespace {


/// This rank's block of positions of a (b, p, m) input.
tensor<float, batch, posn, d_model> positions_block(const std::vector<float>& all, const bench::attention_shape& s,
                                                     std::size_t blk, int me) {
  tensor<float, batch, posn, d_model> x(batch{s.b}, posn{blk}, d_model{s.m});
  for (std::size_t b = 0; b < s.b; ++b)
    std::copy_n(all.data() + (b * s.p + blk * static_cast<std::size_t>(me)) * s.m, blk * s.m, x.data() + b * blk * s.m);
  return x;
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
  const auto x = positions_block(in.x, s, blk, me);
  const auto R = positions_block(bench::make_input(s.b * s.p * s.m, 9, 1.0), s, blk, me);
  bench::seed000_layer w = bench::full_layer(in, s);
  const double scale = 1.0 / std::sqrt(double(s.d));
  dimsum::optim::adamw opt;
  std::vector<float> packed, grads;
  auto step = [&] {
    dimsum::nn::zero_grad(w);
    {
      grad::tape t;
      const auto xv = t.constant(x);
      auto q = rename<posn, q_posn>(
          einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(xv, w.W_Q(t)) + w.b_Q(t));
      auto k = rename<posn, k_posn>(
          einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(xv, w.W_K(t)) + w.b_K(t));
      auto v = rename<posn, k_posn>(
          einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(xv, w.W_V(t)) + w.b_V(t));
      // each rank's blocks of positions, as they are
      const dist::sharded<decltype(q), dist::split<q_posn, seq>> qs(std::move(q), m.comms());
      const dist::sharded<decltype(k), dist::split<k_posn, seq>> ks(std::move(k), m.comms());
      const dist::sharded<decltype(v), dist::split<k_posn, seq>> vs(std::move(v), m.comms());
      const auto z = dist::ring_attention<d_head>(qs, ks, vs, {.scale = scale, .causal = true});
      auto out = einsum<"batch posn nheads d_head, nheads d_head d_model -> batch posn d_model">(
                     rename<q_posn, posn>(z.local()), w.W_O(t)) +
                 w.b_O(t);
      t.backward(dimsum::sum<batch, posn, d_model>(out * R));
    }
    // the weights' gradients: each rank's part of the sum over positions
    packed.clear();
    dimsum::nn::for_each_parameter(w, [&](const std::string&, auto& p) {
      packed.insert(packed.end(), p.grad.data(), p.grad.data() + p.grad.size());
    });
    dist::detail::check_mpi(MPI_Allreduce(MPI_IN_PLACE, packed.data(), static_cast<int>(packed.size()), MPI_FLOAT,
                                          MPI_SUM, MPI_COMM_WORLD),
                            "MPI_Allreduce (gradients)");
    dist::detail::count_traffic(dist::detail::collective::all_reduce, packed.size() * sizeof(float),
                                static_cast<std::uint64_t>(ranks));
    std::size_t at = 0;
    dimsum::nn::for_each_parameter(w, [&](const std::string&, auto& p) {
      std::copy_n(packed.data() + at, p.grad.size(), p.grad.data());
      at += p.grad.size();
    });
    if (grads.empty()) grads = packed;
    opt.step(w);
  };
  return bench::time_training_step(step, grads, args, me);
}
}  // namespace

int main(int argc, char** argv) { return bench::mpi_peer_main(argc, argv, run); }
