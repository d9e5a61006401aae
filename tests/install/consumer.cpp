// A user's program: declares dims, contracts, checks shapes at compile time.
#include <dimsum/dimsum.hpp>

#include <iostream>

DIMSUM_DIM(batch);
DIMSUM_DIM(d_in, 3);
DIMSUM_DIM(d_out, 2);

int main() {
  auto x = dimsum::tensor<float, batch, d_in>::ones(batch{4});
  auto w = dimsum::tensor<float, d_in, d_out>::full(0.5f);
  auto y = dimsum::eval(dimsum::einsum<"batch d_in, d_in d_out -> batch d_out">(x, w));
  static_assert(dimsum::has_dims<decltype(y), batch, d_out>);
  std::cout << dimsum::shape_string(y) << " " << y(batch{3}, d_out{1}) << "\n";
  return y(batch{3}, d_out{1}) == 1.5f ? 0 : 1;
}
