// One training step of seed 000's causal attention layer, tensor-parallel
// over MPI ranks (heads split over the mesh axis `model`): the training-step
// entry of bench/scaling beside bench/peers/dimsum_train.cpp (one process)
// and torch_train.py.
//
//   mpirun -np R dimsum_tp_train B P M H D [reps] [--out file.f32]
//
// Each rank watches its blocks of W_Q, W_K, W_V, W_O, b_Q, b_K, b_V
// (dist::watch, split by head) and b_O whole; the forward is the layer of
// tests/mpi/tensor_parallel_training.cpp (Megatron's f on x, the attention
// of the rank's heads fused through dist::map, one all_reduce of the
// output), the loss sum(out * R) as dimsum_train.cpp's; backward; AdamW
// (PyTorch's defaults) on each rank's blocks. Rank 0 prints median_ms (each
// step between barriers), peak_extra_mib (the largest rank's), and what one
// step's collectives sent per rank (ring_bytes, payload_bytes,
// collectives); with --out it writes the first step's gradients, gathered
// whole, as raw float32 in dimsum_train.cpp's order (W_Q, W_K, W_V, W_O,
// b_Q, b_K, b_V, b_O).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
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

DIMSUM_MESH_AXIS(model);

namespace {
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
  const auto x = bench::filled(in.x, tensor<float, batch, posn, d_model>(B, P, M));
  const auto R = bench::filled(bench::make_input(s.b * s.p * s.m, 9, 1.0), tensor<float, batch, posn, d_model>(B, P, M));
  auto block = [&](auto full) { return dist::shard<by_head>(m, std::move(full)).local(); };
  bench::seed000_layer w = bench::full_layer(in, s);  // then this rank's blocks (b_O whole)
  w.W_Q.value = block(w.W_Q.value);
  w.W_K.value = block(w.W_K.value);
  w.W_V.value = block(w.W_V.value);
  w.W_O.value = block(w.W_O.value);
  w.b_Q.value = block(w.b_Q.value);
  w.b_K.value = block(w.b_K.value);
  w.b_V.value = block(w.b_V.value);
  const float scale = 1.0f / std::sqrt(float(s.d));
  const float inf = std::numeric_limits<float>::infinity();
  dimsum::optim::adamw opt;
  std::vector<float> grads;
  auto step = [&] {
    dimsum::nn::zero_grad(w);
    {
      grad::tape t;
      const auto xr = dist::replicate<model>(m, t.constant(x));  // Megatron's f (x needs no gradient here)
      const auto q = dist::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(
                         xr, dist::watch<by_head>(t, m, w.W_Q)) +
                     dist::watch<by_head>(t, m, w.b_Q);
      const auto k = dist::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(
                         xr, dist::watch<by_head>(t, m, w.W_K)) +
                     dist::watch<by_head>(t, m, w.b_K);
      const auto v = dist::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(
                         xr, dist::watch<by_head>(t, m, w.W_V)) +
                     dist::watch<by_head>(t, m, w.b_V);
      const auto z = dist::map(
          [&](const auto& ql, const auto& kl, const auto& vl) {
            auto e = einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(
                dimsum::softmax<k_posn>(dimsum::causal_mask<q_posn, k_posn>(
                    einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(
                        rename<posn, q_posn>(ql), rename<posn, k_posn>(kl)) *
                        scale,
                    -inf)),
                rename<posn, k_posn>(vl));
            static_assert(dimsum::uses_fused_attention_v<decltype(e)>);
            return e;
          },
          q, k, v);
      const grad::var<float, batch, q_posn, d_model> out =
          dist::all_reduce(dist::einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(
              z, dist::watch<by_head>(t, m, w.W_O))) +
          w.b_O(t);
      t.backward(dimsum::sum<batch, q_posn, d_model>(out * rename<posn, q_posn>(R)));
    }
    if (grads.empty()) {  // the first step's gradients, gathered whole
      dimsum::nn::for_each_parameter(w, [&](const std::string&, auto& p) {
        if constexpr (!dimsum::contains_v<typename std::remove_cvref_t<decltype(p)>::dims, nheads>) {  // b_O: whole
          grads.insert(grads.end(), p.grad.data(), p.grad.data() + p.grad.size());
        } else {
          const auto full = dist::all_gather<nheads>(dist::from_local<by_head>(m, p.grad));
          grads.insert(grads.end(), full.data(), full.data() + full.size());
        }
      });
    }
    opt.step(w);
  };
  return bench::time_training_step(step, grads, args, me);
}
}  // namespace

int main(int argc, char** argv) { return bench::mpi_peer_main(argc, argv, run); }
