// Seed 003: scaled dot-product attention (the manual_seed(42) demo), and
// MultiHeadAttention for self-attention with a padding mask and for
// encoder-decoder cross-attention where the query length differs.
#include <iostream>

#include <dimsum/nn/nn.hpp>

#include "seed_fixtures.hpp"

using dimsum::tensor;
namespace nn = dimsum::nn;

DIMSUM_DIM(batch);
DIMSUM_DIM(nheads);
DIMSUM_DIM(q_seq);
DIMSUM_DIM(kv_seq);
DIMSUM_DIM(emb_dim);
DIMSUM_DIM(dim_k);
DIMSUM_DIM(one);

int main() {
  std::cout << "kernels: " << dimsum::kernel_isa() << "\n";
  // torch.manual_seed(42); q, k, v = torch.randn(...): PyTorch's draws
  auto q = seeds::load<tensor<float, batch, nheads, q_seq, emb_dim>>("seed003/demo/q.npy");
  auto k = seeds::load<tensor<float, batch, nheads, kv_seq, emb_dim>>("seed003/demo/k.npy");
  auto v = seeds::load<tensor<float, batch, nheads, kv_seq, emb_dim>>("seed003/demo/v.npy");
  auto demo = nn::dot_product_attention<q_seq, kv_seq, emb_dim>(q, k, v);  // scores, softmax(dim=-1), @ v
  std::cout << "scores " << demo.scores << "\nsoftscores " << demo.weights << "\noutput " << demo.output << "\n";

  // MultiHeadAttention(num_heads=6, emb_dim=5, dim_k=4, dropout=0) with PyTorch's weights
  nn::multi_head_attention<float, emb_dim, nheads, dim_k> mha(nheads{6}, emb_dim{5}, dim_k{4}, 0.0);
  // q_linear.weight ... out.bias from q_linear_weight.npy ... out_bias.npy (dots as underscores)
  dimsum::load_npy_dir(seeds::fixture("seed003/mha"), mha, dimsum::strict, dimsum::underscored);

  // Self-attention: the keys are the same vectors, their positions renamed.
  auto x = seeds::load<tensor<float, batch, q_seq, emb_dim>>("seed003/mha_self_padmask/q_in.npy");
  tensor<float, batch, kv_seq, emb_dim> x_kv = dimsum::rename<q_seq, kv_seq>(x);
  // input_mask (batch, 1, kv_seq): the size-1 axis goes, the mask broadcasts by name
  auto input_mask = dimsum::select<one>(seeds::load<tensor<bool, batch, one, kv_seq>>("seed003/mha_self_padmask/mask.npy"), 0);
  auto self = mha(x, x_kv, x_kv, input_mask);

  // Cross-attention: 4 decoder positions attend over 3 encoder positions.
  auto dec = seeds::load<tensor<float, batch, q_seq, emb_dim>>("seed003/mha_cross_padmask/q_in.npy");
  auto enc = seeds::load<tensor<float, batch, kv_seq, emb_dim>>("seed003/mha_cross_padmask/kv_in.npy");
  auto cross_mask = dimsum::select<one>(seeds::load<tensor<bool, batch, one, kv_seq>>("seed003/mha_cross_padmask/mask.npy"), 0);
  auto cross = mha(dec, enc, enc, cross_mask);

  double worst = 0;
  worst = std::max(worst, seeds::report("scores", demo.scores, "seed003/demo/scores.npy"));
  worst = std::max(worst, seeds::report("softscores", demo.weights, "seed003/demo/softscores.npy"));
  worst = std::max(worst, seeds::report("output", demo.output, "seed003/demo/output.npy"));
  worst = std::max(worst, seeds::report("self", self.output, "seed003/mha_self_padmask/output.npy"));
  worst = std::max(worst, seeds::report("self sc.", self.scores, "seed003/mha_self_padmask/scores.npy"));
  worst = std::max(worst, seeds::report("cross", cross.output, "seed003/mha_cross_padmask/output.npy"));
  worst = std::max(worst, seeds::report("cross sc.", cross.scores, "seed003/mha_cross_padmask/scores.npy"));
  return worst < 1e-5 ? 0 : 1;
}
