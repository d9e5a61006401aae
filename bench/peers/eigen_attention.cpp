// Seed 000's causal attention forward written with Eigen Tensor contract(),
// the peer for bench/compare and bench/compile_time.
//
//   eigen_attention B P M H D [reps] [--out file.f32]
//
// Prints "median_ms=<x>" over the repetitions and, with --out, writes the
// output (b, p, m) as raw float32. Threads: Eigen's ThreadPoolDevice with
// OMP_NUM_THREADS threads.
#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "inputs.hpp"

using Eigen::Index;
using Eigen::IndexPair;
template <int N>
using TensorMapF = Eigen::TensorMap<Eigen::Tensor<float, N, Eigen::RowMajor>>;
template <int N>
using TensorF = Eigen::Tensor<float, N, Eigen::RowMajor>;

int main(int argc, char** argv) {
  const bench::peer_args args = bench::parse_args(argc, argv);
  if (!args.ok) return 2;
  std::printf("kernel=Eigen %s\n", Eigen::SimdInstructionSetsInUse());
  const bench::attention_shape s = args.shape;
  const char* env = std::getenv("OMP_NUM_THREADS");
  const int threads = env ? std::max(1, std::atoi(env)) : 1;
  Eigen::ThreadPool pool(threads);
  Eigen::ThreadPoolDevice dev(&pool, threads);

  bench::attention_inputs in(s);
  const Index B = Index(s.b), P = Index(s.p), M = Index(s.m), H = Index(s.h), D = Index(s.d);
  TensorMapF<3> x(in.x.data(), B, P, M);
  TensorMapF<3> WQ(in.W_Q.data(), H, M, D), WK(in.W_K.data(), H, M, D), WV(in.W_V.data(), H, M, D);
  TensorMapF<3> WO(in.W_O.data(), H, D, M);
  TensorMapF<2> bQ(in.b_Q.data(), H, D), bK(in.b_K.data(), H, D), bV(in.b_V.data(), H, D);
  TensorMapF<1> bO(in.b_O.data(), M);
  TensorF<4> q(B, P, H, D), k(B, P, H, D), v(B, P, H, D), z(B, P, H, D);
  TensorF<3> out(B, P, M);
  TensorF<2> scores(P, P), pattern(P, P), zbh(P, D);
  TensorF<1> row_max(P), row_sum(P);
  const float scale = 1.0f / std::sqrt(float(D));
  const Eigen::array<IndexPair<Index>, 1> contract_m{IndexPair<Index>(2, 1)};
  const Eigen::array<IndexPair<Index>, 1> contract_d{IndexPair<Index>(1, 1)};
  const Eigen::array<IndexPair<Index>, 1> contract_k{IndexPair<Index>(1, 0)};
  const Eigen::array<IndexPair<Index>, 2> contract_hd{IndexPair<Index>(2, 0), IndexPair<Index>(3, 1)};
  const Eigen::array<Index, 4> bias_shape{1, 1, H, D};
  const Eigen::array<Index, 4> bias_bcast{B, P, 1, 1};
  const Eigen::array<Index, 3> out_bias_shape{1, 1, M};
  const Eigen::array<Index, 3> out_bias_bcast{B, P, 1};
  const Eigen::array<Index, 1> last{1};
  const Eigen::array<Index, 2> row_shape{P, 1};
  const Eigen::array<Index, 2> row_bcast{1, P};

  auto forward = [&] {
    q.device(dev) = x.contract(WQ, contract_m) + bQ.reshape(bias_shape).broadcast(bias_bcast);
    k.device(dev) = x.contract(WK, contract_m) + bK.reshape(bias_shape).broadcast(bias_bcast);
    v.device(dev) = x.contract(WV, contract_m) + bV.reshape(bias_shape).broadcast(bias_bcast);
    // Eigen's contract has no batch dims: one 2-D contraction per (batch, head).
    for (Index bi = 0; bi < B; ++bi)
      for (Index hi = 0; hi < H; ++hi) {
        TensorF<2> qbh = q.chip(bi, 0).chip(hi, 1);
        TensorF<2> kbh = k.chip(bi, 0).chip(hi, 1);
        TensorF<2> vbh = v.chip(bi, 0).chip(hi, 1);
        scores.device(dev) = qbh.contract(kbh, contract_d) * scale;
        for (Index i = 0; i < P; ++i)
          for (Index j = i + 1; j < P; ++j) scores(i, j) = -std::numeric_limits<float>::infinity();
        row_max = scores.maximum(last);
        pattern = (scores - row_max.reshape(row_shape).broadcast(row_bcast)).exp();
        row_sum = pattern.sum(last);
        pattern = pattern / row_sum.reshape(row_shape).broadcast(row_bcast);
        zbh.device(dev) = pattern.contract(vbh, contract_k);
        z.chip(bi, 0).chip(hi, 1) = zbh;
      }
    out.device(dev) = z.contract(WO, contract_hd) + bO.reshape(out_bias_shape).broadcast(out_bias_bcast);
  };

  return bench::time_and_write(args, forward, [&] { return out.data(); }, s.b * s.p * s.m);
}
