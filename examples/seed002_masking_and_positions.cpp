// Seed 002: the tril mask, softmax of masked zeros as running averages
// (wei @ x), and sinusoidal positional encodings added to embeddings.
#include <iostream>
#include <limits>

#include <dimsum/nn/nn.hpp>

#include "seed_fixtures.hpp"

using dimsum::tensor;

struct time_ : dimsum::dim<"time"> {};
DIMSUM_DIM(channel);
DIMSUM_DIM(q_time);
DIMSUM_DIM(k_time);
DIMSUM_DIM(batch);

int main() {
  std::cout << "kernels: " << dimsum::kernel_isa() << "\n";
  // T, C = 5, 2; positional_embeddings: sin on even channels, cos on odd ones
  auto pe = dimsum::nn::sinusoidal_encoding<float>(time_{5}, channel{2});
  std::cout << "positional_embeddings\n" << pe << "\n";
  auto X = seeds::load<tensor<float, time_, channel>>("seed002/emb_T5_C2.npy");
  tensor<float, time_, channel> X_pe = X + pe;  // X = X + positional_embeddings

  const float inf = std::numeric_limits<float>::infinity();
  const std::size_t T = 8;
  auto wei = tensor<float, q_time, k_time>::zeros(q_time{T}, k_time{T});      // torch.zeros((T,T))
  auto masked = dimsum::eval(dimsum::causal_mask<q_time, k_time>(wei, -inf));  // masked_fill(tril == 0, -inf)
  auto weights = dimsum::eval(dimsum::softmax<k_time>(masked));                // F.softmax(wei, dim=1)
  std::cout << "wei\n" << weights << "\n";
  auto x = seeds::load<tensor<float, batch, k_time, channel>>("seed002/x_B4_T8_C2.npy");
  auto xbow3 = dimsum::einsum<"q_time k_time, batch k_time channel -> batch q_time channel">(weights, x);  // wei @ x

  double worst = 0;
  worst = std::max(worst, seeds::report("pe", pe, "seed002/pe_T5_C2.npy"));
  worst = std::max(worst, seeds::report("X + pe", X_pe, "seed002/emb_plus_pe_T5_C2.npy"));
  worst = std::max(worst, seeds::report("wei", weights, "seed002/wei_T8.npy"));
  worst = std::max(worst, seeds::report("xbow3", xbow3, "seed002/xbow3_B4_T8_C2.npy"));
  return worst < 1e-5 ? 0 : 1;
}
