// Seed 000's attention layer (einops HiddenAttention) at the seed's test
// shape: batch 12, posn 20, d_model 30, nheads 2, d_head 10. Prints the
// kernels in use, every intermediate's named shape and a checksum of the
// output.
#include <cstdio>
#include <iostream>

#include "attention.hpp"

using namespace seed000;

DIMSUM_DIM(d_model, 30);
DIMSUM_DIM(nheads, 2);
DIMSUM_DIM(d_head, 10);

int main() {
  auto w = attention_weights<d_model, nheads, d_head>::random(42);
  auto x = tensor<float, batch, posn, d_model>::random_uniform(7, batch{12}, posn{20});

  auto t = attention(x, w);

  using dimsum::shape_string;
  std::cout << "kernels  " << dimsum::kernel_isa() << "\n"
            << "x        " << shape_string(x) << "\n"
            << "q        " << shape_string(t.q) << "\n"
            << "k        " << shape_string(t.k) << "\n"
            << "v        " << shape_string(t.v) << "\n"
            << "scores   " << shape_string(t.scores) << "\n"
            << "masked   " << shape_string(t.masked) << "\n"
            << "pattern  " << shape_string(t.pattern) << "\n"
            << "z        " << shape_string(t.z) << "\n"
            << "out      " << shape_string(t.out) << "\n";
  const float checksum = dimsum::eval(dimsum::sum<batch, posn, d_model>(t.out)).item();
  const float abs_sum = dimsum::eval(dimsum::sum<batch, posn, d_model>(dimsum::sqrt(t.out * t.out))).item();
  std::printf("checksum sum(out) = %.6f   sum|out| = %.6f\n", double(checksum), double(abs_sum));
  std::printf("pattern rows sum to 1: %.6f (of %zu rows)\n",
              double(dimsum::eval(dimsum::sum<batch, nheads, q_posn, k_posn>(t.pattern)).item()),
              std::size_t(12 * 2 * 20));
}
