// Data-parallel training steps of the example's character transformer
// (examples/char_transformer_model.hpp) under mpirun, with the gradient
// averaging done two ways in alternating steps: `dist::average_gradients`
// after backward (one all-reduce of every gradient) and
// `dist::gradient_reducer` (buckets all-reduced while backward runs).
// bench/scaling --data-parallel runs it.
//
//   mpirun -np 2 dimsum_dp_train BATCH POSN D_MODEL HEADS LAYERS VOCAB D_MLP [steps] [bucket_bytes]
//
// BATCH is the whole batch (each rank takes BATCH / ranks rows). Parameters
// and ids as bench/peers/dimsum_train_lm.cpp. Each step is forward,
// backward and the averaging (no optimizer: the weights stay, so every step
// does the same work). Rank 0 prints, per way, the median step time and the
// median "exposed" time: what the averaging adds after backward has
// returned (average_gradients' whole call; gradient_reducer's finish()).
// Also the gradient bytes, the buckets, how many of them started during
// backward, and the largest difference between the two ways' gradients.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <dimsum/distributed/dist.hpp>
#include <dimsum/training.hpp>

#include "../../examples/char_transformer_forward.hpp"
#include "inputs.hpp"
#include "lm_inputs.hpp"

namespace dist = dimsum::dist;
DIMSUM_MESH_AXIS(data);

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}
double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 8) {
    if (rank == 0)
      std::fprintf(stderr, "usage: %s BATCH POSN D_MODEL HEADS LAYERS VOCAB D_MLP [steps] [bucket_bytes]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  std::size_t s[7];
  for (int i = 0; i < 7; ++i) s[i] = std::stoul(argv[i + 1]);
  const int steps = argc > 8 ? std::atoi(argv[8]) : 5;
  const std::size_t bucket_bytes =
      argc > 9 ? std::stoul(argv[9]) : dist::gradient_reducer<data>::default_bucket_bytes;
  const std::size_t B = s[0], P = s[1];
  if (B % std::size_t(size) != 0) {
    if (rank == 0) std::fprintf(stderr, "BATCH must divide by the number of ranks\n");
    MPI_Finalize();
    return 2;
  }
  char_lm::model m = bench::lm_model(s);
  const std::size_t b = B / std::size_t(size);
  const auto [x, y] = bench::lm_batch(std::size_t(rank) * b, b, P, s[5]);  // this rank's rows of the whole batch
  dist::mesh<data> mesh(MPI_COMM_WORLD, data{size});
  dist::gradient_reducer<data> reducer(mesh, m, bucket_bytes);
  std::vector<float> g_whole, g_bucketed;
  auto grads = [&](std::vector<float>& out) {
    out.clear();
    dimsum::nn::for_each_parameter(m, [&](const std::string&, auto& p) {
      out.insert(out.end(), p.grad.data(), p.grad.data() + p.grad.size());
    });
  };
  std::vector<double> step_whole, step_bucketed, exposed_whole, exposed_bucketed;
  std::size_t started = 0, bytes = 0;
  for (int it = 0; it <= steps; ++it) {  // step 0 warms up
    for (int way = 0; way < 2; ++way) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now_ms();
      dimsum::nn::zero_grad(m);
      double t1 = 0;
      {
        dimsum::grad::tape t;
        if (way == 1) reducer.attach(t);
        t.backward(char_lm::loss(t, m, x, y));
        t1 = now_ms();
        if (way == 0)
          bytes = dist::average_gradients<data>(mesh, m);
        else
          reducer.finish();
      }
      const double t2 = now_ms();
      if (it == 0) grads(way == 0 ? g_whole : g_bucketed);
      if (it == 0) continue;
      (way == 0 ? step_whole : step_bucketed).push_back(t2 - t0);
      (way == 0 ? exposed_whole : exposed_bucketed).push_back(t2 - t1);
      if (way == 1) started = reducer.started_during_backward();
    }
  }
  double worst = 0;
  for (std::size_t i = 0; i < g_whole.size(); ++i) worst = std::max(worst, double(std::abs(g_whole[i] - g_bucketed[i])));
  if (rank == 0) {
    std::printf("ranks=%d\ngradient_bytes=%zu\nbuckets=%zu\nbucket_bytes=%zu\nstarted_during_backward=%zu\n", size, bytes,
                reducer.buckets(), bucket_bytes, started);
    std::printf("median_ms_average_gradients=%.3f\nmedian_ms_gradient_reducer=%.3f\n", median(step_whole),
                median(step_bucketed));
    std::printf("exposed_ms_average_gradients=%.3f\nexposed_ms_gradient_reducer=%.3f\n", median(exposed_whole),
                median(exposed_bucketed));
    std::printf("max_gradient_difference=%.3g\n", worst);
  }
  MPI_Finalize();
  return 0;
}
