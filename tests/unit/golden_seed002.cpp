// Seed 002 (masking and positional encodings) against PyTorch: the tril
// mask, softmax of masked zeros as running averages, wei @ x, and the
// sinusoidal positional encoding (the seed's printed T=5, C=2 table).
#include "golden.hpp"

#include <limits>

#include <dimsum/nn/nn.hpp>

using dimsum::tensor;

namespace seed002 {
struct time_ : dimsum::dim<"time"> {};  // `time` would clash with ::time
DIMSUM_DIM(channel);
DIMSUM_DIM(q_time);
DIMSUM_DIM(k_time);
DIMSUM_DIM(batch);
}  // namespace seed002
using namespace seed002;

TEST_CASE("golden seed 002: sinusoidal positional encodings added to embeddings", "[golden][seed002]") {
  auto pe5 = dimsum::nn::sinusoidal_encoding<float>(time_{5}, channel{2});
  golden::check(pe5, "seed002/pe_T5_C2.npy");
  // The seed's printed table, to its 8 decimals.
  CHECK(pe5(time_{1}, channel{0}) == Approx(0.84147098).margin(1e-7));
  CHECK(pe5(time_{2}, channel{1}) == Approx(-0.41614684).margin(1e-7));
  CHECK(pe5(time_{4}, channel{0}) == Approx(-0.7568025).margin(1e-7));
  auto X5 = golden::load<tensor<float, time_, channel>>("seed002/emb_T5_C2.npy");
  golden::check(X5 + pe5, "seed002/emb_plus_pe_T5_C2.npy");
  auto pe16 = dimsum::nn::sinusoidal_encoding<float>(time_{16}, channel{8});
  golden::check(pe16, "seed002/pe_T16_C8.npy");
  auto X16 = golden::load<tensor<float, time_, channel>>("seed002/emb_T16_C8.npy");
  golden::check(X16 + pe16, "seed002/emb_plus_pe_T16_C8.npy");
}

TEST_CASE("golden seed 002: tril, masked zeros, softmax running averages, wei @ x", "[golden][seed002]") {
  const float inf = std::numeric_limits<float>::infinity();
  for (std::size_t T : {5u, 8u}) {
    const std::string s = std::to_string(T);
    auto ones = tensor<float, q_time, k_time>::ones(q_time{T}, k_time{T});
    golden::check(dimsum::causal_mask<q_time, k_time>(ones, 0.0f), "seed002/tril_T" + s + ".npy");
    auto wei = tensor<float, q_time, k_time>::zeros(q_time{T}, k_time{T});
    auto masked = dimsum::eval(dimsum::causal_mask<q_time, k_time>(wei, -inf));  // masked_fill(tril == 0, -inf)
    golden::check(masked, "seed002/wei_masked_T" + s + ".npy");
    golden::check(dimsum::softmax<k_time>(masked), "seed002/wei_T" + s + ".npy");
  }
  auto wei = dimsum::eval(dimsum::softmax<k_time>(dimsum::causal_mask<q_time, k_time>(
      tensor<float, q_time, k_time>::zeros(q_time{8}, k_time{8}), -inf)));
  auto x = golden::load<tensor<float, batch, k_time, channel>>("seed002/x_B4_T8_C2.npy");
  auto xbow3 = dimsum::einsum<"q_time k_time, batch k_time channel -> batch q_time channel">(wei, x);  // wei @ x
  golden::check(xbow3, "seed002/xbow3_B4_T8_C2.npy");
}
