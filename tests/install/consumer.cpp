// A user's program: declares dims, contracts, checks shapes at compile time.
#include <dimsum/dimsum.hpp>

#include <iostream>
#include <string>

DIMSUM_DIM(batch);
DIMSUM_DIM(d_in, 3);
DIMSUM_DIM(d_out, 2);

int main() {
  auto x = dimsum::tensor<float, batch, d_in>::ones(batch{4});
  auto w = dimsum::tensor<float, d_in, d_out>::full(0.5f);
  auto y = dimsum::eval(dimsum::einsum<"batch d_in, d_in d_out -> batch d_out">(x, w));
  static_assert(dimsum::has_dims<decltype(y), batch, d_out>);
  std::cout << dimsum::shape_string(y) << " " << y(batch{3}, d_out{1}) << "\n";
  // Built with no CPU flags of its own: the dimsum::dimsum target must
  // still give the vector kernels the CPU has.
  const std::string isa = dimsum::kernel_isa();
  std::cout << "kernels: " << isa << "\n";
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && isa == "scalar") {
    std::cout << "FAIL: this CPU has AVX2 but the default build runs scalar kernels\n";
    return 1;
  }
  if (__builtin_cpu_supports("avx512f") && isa != "avx512f") {
    std::cout << "FAIL: this CPU has AVX-512F but the default build runs " << isa << " kernels\n";
    return 1;
  }
#endif
  return y(batch{3}, d_out{1}) == 1.5f ? 0 : 1;
}
