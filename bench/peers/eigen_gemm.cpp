// The square GEMM C = A @ B as one Eigen Tensor contract(), the Eigen entry
// of bench/compare's GEMM workloads.
//
//   eigen_gemm N [reps] [--out file.f32]
//
// Threads: Eigen's ThreadPoolDevice with OMP_NUM_THREADS threads.
#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>

#include <algorithm>
#include <cstdlib>

#include "inputs.hpp"

int main(int argc, char** argv) {
  const bench::gemm_args args = bench::parse_gemm_args(argc, argv);
  if (!args.ok) return 2;
  std::printf("kernel=Eigen %s\n", Eigen::SimdInstructionSetsInUse());
  const char* env = std::getenv("OMP_NUM_THREADS");
  const int threads = env ? std::max(1, std::atoi(env)) : 1;
  Eigen::ThreadPool pool(threads);
  Eigen::ThreadPoolDevice dev(&pool, threads);

  bench::gemm_inputs in(args.n);
  const Eigen::Index n = Eigen::Index(args.n);
  using Map = Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor>>;
  Map a(in.a.data(), n, n), b(in.b.data(), n, n);
  Eigen::Tensor<float, 2, Eigen::RowMajor> c;
  const Eigen::array<Eigen::IndexPair<Eigen::Index>, 1> contract_k{Eigen::IndexPair<Eigen::Index>(1, 0)};
  auto forward = [&] {
    c.resize(n, n);  // a no-op after the first call, which counts it in its peak memory
    c.device(dev) = a.contract(b, contract_k);
  };
  return bench::time_and_write(args, forward, [&] { return c.data(); }, args.n * args.n);
}
