// Seed 001: a character vocabulary, token and position embeddings, batches
// of windows, and one causal attention head, each line the seed's PyTorch
// line by name.
#include <cstdio>
#include <iostream>

#include <dimsum/nn/nn.hpp>
#include <dimsum/nn/seeds/seeds.hpp>

#include "seed_fixtures.hpp"

using dimsum::tensor;
namespace nn = dimsum::nn;

DIMSUM_DIM(chr);
DIMSUM_DIM(vocab);
DIMSUM_DIM(block);
DIMSUM_DIM(n_embd);
DIMSUM_DIM(head_size);
DIMSUM_DIM(batch);
struct time_ : dimsum::dim<"time"> {};
DIMSUM_DIM(q_time);
DIMSUM_DIM(k_time);

int main() {
  std::cout << "kernels: " << dimsum::kernel_isa() << "\n";
  // vocab = string.whitespace + ascii_letters + digits + punctuation
  auto tok = nn::seeds::char_tokenizer::python_printable();
  auto data = tok.encode<chr>("Attention is all you need");  // torch.LongTensor(encode(text))
  std::cout << "vocab_size " << tok.size() << ", decode(encode(text)) = \"" << tok.decode(data) << "\"\n";

  const std::size_t block_size = 4;
  // nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd): PyTorch's tables
  auto token_embedding_table = nn::embedding<float, vocab, n_embd>::load(seeds::fixture("seed001/token_embedding.npy"));
  auto position_embedding_table = nn::embedding<float, block, n_embd>::load(seeds::fixture("seed001/position_embedding.npy"));

  // get_batch(): ix from torch.randint; x = torch.stack([data[i:i+block_size] for i in ix])
  auto ix = seeds::load<tensor<std::int64_t, batch>>("seed001/batch_ix.npy");
  std::vector<tensor<std::int64_t, time_>> windows;
  for (std::size_t b = 0; b < ix.size(); ++b) {
    const auto i = std::size_t(ix.data()[b]);
    windows.push_back(dimsum::rename<chr, time_>(dimsum::eval(dimsum::slice<chr>(data, i, i + block_size))));
  }
  auto x_ids = dimsum::stack<batch>(windows);

  auto emb_tok = token_embedding_table(x_ids);                                  // (B, T, C)
  auto emb_pos = position_embedding_table(dimsum::arange(time_{block_size}));  // (T, C)
  tensor<float, batch, time_, n_embd> x = emb_pos + emb_tok;                    // broadcast by name

  // key, query, value = nn.Linear(C, head_size, bias=False)
  nn::seeds::char_head<float, n_embd, head_size> head(n_embd{5}, head_size{6});
  // key.weight, query.weight, value.weight from the fixtures' key_weight.npy, ... (dots as underscores)
  dimsum::load_npy_dir(seeds::fixture("seed001"), head, dimsum::non_strict, dimsum::underscored);
  nn::seeds::char_head<float, n_embd, head_size>::trace<batch, q_time, k_time> t;
  auto out = head.forward<time_, q_time, k_time>(x, &t);  // W = softmax(tril-masked q @ k^T * C**-0.5); out = W @ v

  double worst = 0;
  worst = std::max(worst, seeds::report("x_ids", x_ids, "seed001/x_ids.npy"));
  worst = std::max(worst, seeds::report("x", x, "seed001/x.npy"));
  worst = std::max(worst, seeds::report("k", t.k, "seed001/k.npy"));
  worst = std::max(worst, seeds::report("q", t.q, "seed001/q.npy"));
  worst = std::max(worst, seeds::report("W", t.weights, "seed001/weights.npy"));
  worst = std::max(worst, seeds::report("out", out, "seed001/out.npy"));
  return worst < 1e-5 ? 0 : 1;
}
