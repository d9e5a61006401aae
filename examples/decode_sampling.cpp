// Incremental decoding with a key/value cache on the fused attention path:
// a one-layer attention language model with random weights (vocabulary 48,
// d_model 64, 4 heads) decodes 40 tokens greedily and 40 by temperature/
// top-k sampling (examples/decode.hpp). Each step appends one position to
// the kv_cache and attends the new query against the cached keys (the fused
// kernel's few-rows path: O(n) work for the n-th token, no scores
// materialised). The example checks that the cached step's logits equal
// recomputing causal attention over the whole sequence, that greedy
// decoding is deterministic, and that every sampled token is among the k
// largest logits.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <span>
#include <stdexcept>
#include <vector>

#include <dimsum/dimsum.hpp>
#include <dimsum/ops/kv_cache.hpp>
#include <dimsum/ops/window_mask.hpp>

#include "decode.hpp"

namespace {

using dimsum::tensor;

DIMSUM_DIM(vocab, 48);
DIMSUM_DIM(d_model, 64);
DIMSUM_DIM(nheads, 4);
DIMSUM_DIM(d_head, 16);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);

struct weights {
  tensor<float, vocab, d_model> embed = tensor<float, vocab, d_model>::random_normal(1);
  tensor<float, nheads, d_model, d_head> w_q = tensor<float, nheads, d_model, d_head>::random_normal(2) * 0.2f;
  tensor<float, nheads, d_model, d_head> w_k = tensor<float, nheads, d_model, d_head>::random_normal(3) * 0.2f;
  tensor<float, nheads, d_model, d_head> w_v = tensor<float, nheads, d_model, d_head>::random_normal(4) * 0.2f;
  tensor<float, nheads, d_head, d_model> w_o = tensor<float, nheads, d_head, d_model>::random_normal(5) * 0.2f;
  tensor<float, d_model, vocab> unembed = tensor<float, d_model, vocab>::random_normal(6) * 0.3f;
};

using rows_t = tensor<float, q_posn, d_model>;
using heads_t = tensor<float, q_posn, nheads, d_head>;

/// The embeddings of `tokens` as rows along q_posn.
rows_t embed(const weights& w, std::span<const std::size_t> tokens) {
  rows_t x(q_posn{tokens.size()});
  for (std::size_t i = 0; i < tokens.size(); ++i)
    for (std::size_t c = 0; c < d_model::static_extent; ++c) x(q_posn{i}, d_model{c}) = w.embed(vocab{tokens[i]}, d_model{c});
  return x;
}

/// Attention of queries at positions offset, offset + 1, ... against keys
/// 0 .. (fused: a causal mask shifted by offset is the unbounded window).
template <class K, class V>
heads_t attend(const heads_t& q, const K& keys, const V& values, std::size_t offset) {
  const float scale = 1.0f / std::sqrt(float(d_head::static_extent));
  auto scores = dimsum::einsum<"q_posn nheads d_head, k_posn nheads d_head -> nheads q_posn k_posn">(q, keys) * scale;
  auto z = dimsum::einsum<"nheads q_posn k_posn, k_posn nheads d_head -> q_posn nheads d_head">(
      dimsum::softmax<k_posn>(dimsum::window_mask<q_posn, k_posn>(std::move(scores), dimsum::kernels::unbounded_window,
                                                                  -INFINITY, offset)),
      values);
  static_assert(dimsum::uses_fused_attention_v<decltype(z)>);
  return z;
}

/// The next-token logits of each row of x after attention z (residual, unembedding).
tensor<float, q_posn, vocab> logits_of(const weights& w, const rows_t& x, const heads_t& z) {
  const rows_t out = dimsum::einsum<"q_posn nheads d_head, nheads d_head d_model -> q_posn d_model">(z, w.w_o) + x;
  return dimsum::einsum<"q_posn d_model, d_model vocab -> q_posn vocab">(out, w.unembed);
}

/// The model with its cache: step(token) appends the token's key and value
/// and returns the next-token logits.
class cached_model {
 public:
  cached_model(const weights& w, std::size_t capacity) : w_(w), cache_(k_posn{capacity}) {}
  std::vector<float> operator()(std::size_t token) {
    const std::size_t tok[1] = {token};
    const rows_t x = embed(w_, tok);
    const heads_t q = dimsum::einsum<"q_posn d_model, nheads d_model d_head -> q_posn nheads d_head">(x, w_.w_q);
    const auto xk = dimsum::rename<q_posn, k_posn>(x);
    cache_.append(dimsum::einsum<"k_posn d_model, nheads d_model d_head -> k_posn nheads d_head">(xk, w_.w_k),
                  dimsum::einsum<"k_posn d_model, nheads d_model d_head -> k_posn nheads d_head">(xk, w_.w_v));
    const auto keys = cache_.keys();
    const auto values = cache_.values();
    const auto logits = logits_of(w_, x, attend(q, keys, values, cache_.size() - 1));
    return std::vector<float>(logits.data(), logits.data() + logits.size());
  }

 private:
  const weights& w_;
  dimsum::kv_cache<float, k_posn, k_posn, nheads, d_head> cache_;
};

/// The last position's logits recomputed from scratch: causal attention
/// over the whole sequence, no cache.
std::vector<float> recompute_last(const weights& w, const std::vector<std::size_t>& tokens) {
  const rows_t x = embed(w, tokens);
  const heads_t q = dimsum::einsum<"q_posn d_model, nheads d_model d_head -> q_posn nheads d_head">(x, w.w_q);
  const auto xk = dimsum::rename<q_posn, k_posn>(x);
  const tensor<float, k_posn, nheads, d_head> k =
      dimsum::einsum<"k_posn d_model, nheads d_model d_head -> k_posn nheads d_head">(xk, w.w_k);
  const tensor<float, k_posn, nheads, d_head> v =
      dimsum::einsum<"k_posn d_model, nheads d_model d_head -> k_posn nheads d_head">(xk, w.w_v);
  const auto logits = logits_of(w, x, attend(q, k, v, 0));
  const std::size_t last = tokens.size() - 1;
  return std::vector<float>(logits.data() + last * vocab::static_extent, logits.data() + (last + 1) * vocab::static_extent);
}

void require(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("decode_sampling: ") + what);
}

}  // namespace

int main() {
  std::cout << "kernels: " << dimsum::kernel_isa() << "\n";
  const weights w;
  const std::vector<std::size_t> prompt = {3, 14, 15, 9, 26};
  const std::size_t n = 40;

  // Greedy, twice: the same tokens.
  cached_model m1(w, prompt.size() + n), m2(w, prompt.size() + n);
  const auto greedy = decode::generate(m1, prompt, n, decode::greedy);
  require(greedy == decode::generate(m2, prompt, n, decode::greedy), "greedy decoding is not deterministic");

  // The cached step's logits equal a recompute over the whole sequence.
  std::vector<std::size_t> seq = prompt;
  seq.insert(seq.end(), greedy.begin(), greedy.end() - 1);
  cached_model m3(w, seq.size());
  std::vector<float> cached;
  for (std::size_t t : seq) cached = m3(t);
  const auto full = recompute_last(w, seq);
  float worst = 0;
  for (std::size_t i = 0; i < full.size(); ++i) worst = std::max(worst, std::fabs(full[i] - cached[i]));
  std::printf("cached vs recomputed logits at position %zu: max |diff| %.2e\n", seq.size() - 1, double(worst));
  require(worst < 1e-4f, "the cached step's logits differ from recomputing the whole sequence");
  require(greedy.back() == decode::greedy(full), "the last greedy token is not the recomputed argmax");

  // Temperature 0.8, top 5: every pick among the 5 largest logits.
  cached_model m4(w, prompt.size() + n);
  decode::top_k_sampler sampler(0.8f, 5, 2024);
  auto checked = [&](std::span<const float> logits) {
    const std::size_t t = sampler(logits);
    std::size_t larger = 0;
    for (float x : logits) larger += x > logits[t] ? 1 : 0;
    require(larger < 5, "a sampled token is not among the top 5 logits");
    return t;
  };
  const auto sampled = decode::generate(m4, prompt, n, checked);

  std::cout << "greedy: ";
  for (std::size_t t : greedy) std::cout << t << ' ';
  std::cout << "\nsampled (T 0.8, top 5): ";
  for (std::size_t t : sampled) std::cout << t << ' ';
  std::cout << "\n";
}
