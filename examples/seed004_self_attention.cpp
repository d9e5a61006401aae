// Seed 004: self-attention on "Your journey starts with one step": without
// weights, then SelfAttention_v1 (torch.rand weights, manual_seed(123)) and
// SelfAttention_v2 (nn.Linear, manual_seed(789)), printing what the seed
// prints.
#include <iostream>

#include <dimsum/nn/nn.hpp>
#include <dimsum/nn/seeds/seeds.hpp>

#include "seed_fixtures.hpp"

using dimsum::tensor;
namespace nn = dimsum::nn;

DIMSUM_DIM(token);
DIMSUM_DIM(k_token);
DIMSUM_DIM(d_in);
DIMSUM_DIM(d_out);

int main() {
  std::cout << "kernels: " << dimsum::kernel_isa() << "\n";
  tensor<float, token, d_in> inputs(token{6}, d_in{3});
  const float rows[6][3] = {{0.43f, 0.15f, 0.89f},   // Your
                            {0.55f, 0.87f, 0.66f},   // journey
                            {0.57f, 0.85f, 0.64f},   // starts
                            {0.22f, 0.58f, 0.33f},   // with
                            {0.77f, 0.25f, 0.10f},   // one
                            {0.05f, 0.80f, 0.55f}};  // step
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 3; ++j) inputs(token{i}, d_in{j}) = rows[i][j];

  auto keys = dimsum::rename<token, k_token>(inputs);
  auto attn_scores = dimsum::eval(dimsum::einsum<"token d_in, k_token d_in -> token k_token">(inputs, keys));  // inputs @ inputs.T
  auto attn_weights = dimsum::eval(dimsum::softmax<k_token>(attn_scores));  // torch.softmax(attn_scores, dim=-1)
  auto all_context_vecs = dimsum::einsum<"token k_token, k_token d_in -> token d_in">(attn_weights, keys);
  std::cout << "attn_weights " << attn_weights << "\nall_context_vecs " << dimsum::eval(all_context_vecs) << "\n";

  nn::seeds::self_attention_v1<float, d_in, d_out> sa_v1(d_in{3}, d_out{2});  // torch.manual_seed(123)
  dimsum::load_npy_dir(seeds::fixture("seed004/sa_v1"), sa_v1, dimsum::non_strict);  // W_query.npy, ... by member name
  auto v1 = sa_v1(inputs);
  std::cout << "sa_v1(inputs) " << v1 << "\n";

  nn::seeds::self_attention_v2<float, d_in, d_out> sa_v2(d_in{3}, d_out{2});  // torch.manual_seed(789)
  // W_query.weight, ... from W_query_weight.npy, ... beside the seed's other tensors
  dimsum::load_npy_dir(seeds::fixture("seed004/sa_v2"), sa_v2, dimsum::non_strict, dimsum::underscored);
  auto v2 = sa_v2(inputs);
  std::cout << "sa_v2(inputs) " << v2 << "\n";

  double worst = 0;
  worst = std::max(worst, seeds::report("inputs", inputs, "seed004/inputs.npy"));
  worst = std::max(worst, seeds::report("weights", attn_weights, "seed004/weightless/attn_weights.npy"));
  worst = std::max(worst, seeds::report("contexts", all_context_vecs, "seed004/weightless/context_vecs.npy"));
  worst = std::max(worst, seeds::report("v1", v1, "seed004/sa_v1/context.npy"));
  worst = std::max(worst, seeds::report("v2", v2, "seed004/sa_v2/context.npy"));
  return worst < 1e-5 ? 0 : 1;
}
