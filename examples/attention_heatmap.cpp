// Seed 004's sentence "Your journey starts with one step" through
// attention, one SVG heatmap per head of the attention pattern, tokens on
// both axes: the weightless self-attention of the seed, then the two heads
// of a multi-head attention with seeded random weights.
//
//   attention_heatmap [output-directory]      (default: the current directory)
#include <iostream>
#include <string>
#include <vector>

#include <dimsum/dimsum.hpp>
#include <dimsum/nn/nn.hpp>

using dimsum::tensor;

DIMSUM_DIM(batch);
DIMSUM_DIM(token);
DIMSUM_DIM(k_token);
DIMSUM_DIM(emb);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_k);

int main(int argc, char** argv) {
  std::cout << "kernels: " << dimsum::kernel_isa() << "\n";
  const std::string dir = argc > 1 ? std::string(argv[1]) + "/" : "";
  const std::vector<std::string> words{"Your", "journey", "starts", "with", "one", "step"};
  tensor<float, token, emb> inputs(token{6}, emb{3});
  const float rows[6][3] = {{0.43f, 0.15f, 0.89f}, {0.55f, 0.87f, 0.66f}, {0.57f, 0.85f, 0.64f},
                            {0.22f, 0.58f, 0.33f}, {0.77f, 0.25f, 0.10f}, {0.05f, 0.80f, 0.55f}};
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 3; ++j) inputs(token{i}, emb{j}) = rows[i][j];

  // The seed's weightless attention: softmax(inputs @ inputs.T).
  auto keys = dimsum::rename<token, k_token>(inputs);
  auto weightless = dimsum::eval(
      dimsum::softmax<k_token>(dimsum::einsum<"token emb, k_token emb -> token k_token">(inputs, keys)));
  std::vector<std::string> written;
  const std::string path0 = dir + "attention_heatmap_weightless.svg";
  dimsum::save_heatmap_svg(path0, weightless, words, words, "weightless self-attention");
  written.push_back(path0);

  // Multi-head attention (seed 003's module), 2 heads of width 2, seeded weights.
  dimsum::nn::multi_head_attention<float, emb, nheads, d_k> mha(nheads{2}, emb{3}, d_k{2}, 0.0);
  mha.reset_parameters(2024);
  auto x = dimsum::stack<batch>(std::vector{inputs});
  tensor<float, batch, k_token, emb> x_kv = dimsum::rename<token, k_token>(x);
  auto r = mha(x, x_kv, x_kv);
  auto pattern = dimsum::select<batch>(r.weights, 0);  // (nheads, token, k_token)
  for (std::size_t h = 0; h < 2; ++h) {
    const std::string path = dir + "attention_heatmap_head" + std::to_string(h) + ".svg";
    dimsum::save_heatmap_svg(path, dimsum::select<nheads>(pattern, h), words, words,
                             "head " + std::to_string(h) + " of 2");
    written.push_back(path);
  }
  for (const auto& p : written) std::cout << "wrote " << p << "\n";
}
