#pragma once
// The example's character transformer as the training benchmarks build it
// (bench/peers/dimsum_train_lm.cpp, dimsum_dp_train.cpp; torch_train.py's
// "lm" mode builds the same): sizes from the command line, parameter number
// k in the model's dotted-name order holding bench::input_value(i, 20 + k,
// 0.1) (an nn::linear's weight (out, in): the transpose of the (in, out)
// matrix filled so), layer-norm weights (the rank-1 ".weight"s) 1 plus that; the ids and targets of flat
// (batch, posn) index i are (7 i + 3) mod VOCAB and (5 i + 1) mod VOCAB.
// Include after examples/char_transformer_forward.hpp.
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "inputs.hpp"

namespace bench {

/// The model of sizes s = {BATCH, POSN, D_MODEL, HEADS, LAYERS, VOCAB, D_MLP}
/// (BATCH unused), its parameters set and its gradients zeroed.
inline char_lm::model lm_model(const std::size_t (&s)[7]) {
  char_lm::config c;
  c.d_model = s[2];
  c.n_heads = s[3];
  c.n_layers = s[4];
  c.vocab = s[5];
  c.d_mlp = s[6];
  c.context = s[1];
  char_lm::model m = char_lm::make_model(c);
  int k = 0;
  dimsum::nn::for_each_parameter(m, [&](const std::string& name, auto& p) {
    constexpr std::size_t rank = dimsum::dims_of_t<std::remove_cvref_t<decltype(p.value)>>::size;
    const bool weight = name.size() >= 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    const bool ln_weight = rank == 1 && weight;
    // an nn::linear weight (out, in) holds the transpose of the (in, out) matrix filled in order
    const std::size_t n = p.value.size(), out = rank == 2 && weight ? p.value.extents()[0] : 1, in = n / std::max<std::size_t>(out, 1);
    float* v = p.value.data();
    for (std::size_t i = 0; i < n; ++i)
      v[i] = (ln_weight ? 1.0f : 0.0f) + input_value(out == 1 ? i : (i % in) * out + i / in, 20 + k, 0.1);
    p.zero_grad();
    ++k;
  });
  return m;
}

/// Ids and targets for `rows` rows of `posn` positions starting at row
/// `first` of the whole batch.
inline std::pair<char_lm::ids_t, char_lm::ids_t> lm_batch(std::size_t first, std::size_t rows, std::size_t posn,
                                                          std::size_t vocab) {
  char_lm::ids_t x(char_lm::batch{rows}, char_lm::posn{posn}), y(char_lm::batch{rows}, char_lm::posn{posn});
  for (std::size_t i = 0; i < rows * posn; ++i) {
    const std::size_t flat = first * posn + i;
    x.data()[i] = std::int64_t((7 * flat + 3) % vocab);
    y.data()[i] = std::int64_t((5 * flat + 1) % vocab);
  }
  return {std::move(x), std::move(y)};
}

}  // namespace bench
