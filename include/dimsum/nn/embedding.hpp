#pragma once
/// \file
/// `nn::embedding<T, Vocab, Emb>`: PyTorch's nn.Embedding. Applied to an
/// integer tensor of ids with dims Ds..., it gathers rows of the table and
/// returns a tensor with dims Ds..., Emb. An id outside [0, vocab) throws
/// `shape_error` naming the id, where it was and the vocabulary size.

#include <cstdint>
#include <random>
#include <string>

#include <dimsum/io/npy.hpp>

namespace dimsum::nn {

template <class T, dimension Vocab, dimension Emb>
struct embedding {
  tensor<T, Vocab, Emb> weight;

  embedding() = default;
  embedding(Vocab v, Emb e) : weight(v, e) {}

  /// N(0, 1) entries, as PyTorch initialises nn.Embedding (seeded).
  void reset_parameters(std::uint64_t seed) {
    weight = tensor<T, Vocab, Emb>::random_normal(seed, Vocab{weight.template extent<Vocab>()},
                                                  Emb{weight.template extent<Emb>()});
  }

  static embedding load(const std::string& path) {
    embedding e;
    e.weight = load_npy<tensor<T, Vocab, Emb>>(path);
    return e;
  }

  /// The rows of the table for each id: dims Ds..., Emb.
  template <class I, dimension... Ds>
  tensor<T, Ds..., Emb> operator()(const tensor<I, Ds...>& ids) const {
    static_assert(std::is_integral_v<I>, "dimsum: embedding ids must be integers");
    const std::size_t vocab = weight.template extent<Vocab>();
    const std::size_t width = weight.template extent<Emb>();
    std::array<std::size_t, sizeof...(Ds) + 1> ext{};
    const auto in = ids.extents();
    for (std::size_t i = 0; i < sizeof...(Ds); ++i) ext[i] = in[i];
    ext[sizeof...(Ds)] = width;
    auto out = tensor<T, Ds..., Emb>::from_extents(ext);
    for (std::size_t n = 0; n < ids.size(); ++n) {
      const I id = ids.data()[n];
      if (id < 0 || static_cast<std::uint64_t>(id) >= vocab)
        throw shape_error("embedding: id " + std::to_string(id) + " (element " + std::to_string(n) +
                          " of the ids) is out of range for dim '" + std::string(Vocab::name.view()) +
                          "' of extent " + std::to_string(vocab));
      std::copy_n(weight.data() + static_cast<std::size_t>(id) * width, width, out.data() + n * width);
    }
    return out;
  }
};

}  // namespace dimsum::nn
