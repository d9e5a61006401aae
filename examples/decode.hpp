// Incremental decoding: the loop that feeds a model one token at a time and
// picks the next one from its logits, greedily or by temperature/top-k
// sampling. Model-agnostic: `step(token)` returns the logits of the next
// token (the model keeps its own key/value cache, so each step attends the
// new query against the cached positions: O(n) attention work for the n-th
// token), and the pickers read the logits as a plain span. Used by
// examples/decode_sampling.cpp; a training example can call `generate` with
// its own step.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

namespace decode {

/// The index of the largest logit (the first one on ties).
inline std::size_t greedy(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("decode::greedy: no logits");
  return static_cast<std::size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

/// Samples from softmax(logits / temperature) restricted to the k largest
/// logits (k = 0: all of them), as GPT-2's generate does.
class top_k_sampler {
 public:
  top_k_sampler(float temperature, std::size_t k, std::uint64_t seed) : temperature_(temperature), k_(k), rng_(seed) {
    if (!(temperature > 0)) throw std::invalid_argument("decode::top_k_sampler: the temperature must be positive");
  }
  std::size_t operator()(std::span<const float> logits) {
    if (logits.empty()) throw std::invalid_argument("decode::top_k_sampler: no logits");
    // As torch.multinomial, refuse what is not a distribution: a NaN or +inf
    // logit (a diverged model), or every logit -inf. (A NaN would also break
    // partial_sort's ordering.)
    bool any_finite = false;
    for (float l : logits) {
      if (std::isnan(l) || l == std::numeric_limits<float>::infinity())
        throw std::invalid_argument("decode::top_k_sampler: a logit is NaN or +inf");
      any_finite = any_finite || std::isfinite(l);
    }
    if (!any_finite) throw std::invalid_argument("decode::top_k_sampler: every logit is -inf");
    const std::size_t k = k_ == 0 ? logits.size() : std::min(k_, logits.size());
    order_.resize(logits.size());
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    std::partial_sort(order_.begin(), order_.begin() + std::ptrdiff_t(k), order_.end(),
                      [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
    weights_.resize(k);
    const float top = logits[order_[0]];
    for (std::size_t i = 0; i < k; ++i) weights_[i] = std::exp((logits[order_[i]] - top) / temperature_);
    std::discrete_distribution<std::size_t> pick(weights_.begin(), weights_.end());
    return order_[pick(rng_)];
  }

 private:
  float temperature_;
  std::size_t k_;
  std::mt19937_64 rng_;
  std::vector<std::size_t> order_;
  std::vector<double> weights_;
};

/// Feeds the prompt (at least one token) through `step`, then decodes n
/// tokens, each picked by `pick` from the logits of the step before and fed
/// back. Returns the n new tokens.
template <class Step, class Pick>
std::vector<std::size_t> generate(Step&& step, const std::vector<std::size_t>& prompt, std::size_t n, Pick&& pick) {
  if (prompt.empty()) throw std::invalid_argument("decode::generate: an empty prompt");
  std::vector<float> logits;
  for (std::size_t t : prompt) logits = step(t);
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(pick(std::span<const float>(logits)));
    if (i + 1 < n) logits = step(out.back());
  }
  return out;
}

}  // namespace decode
