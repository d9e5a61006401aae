#pragma once
/// \file
/// `nn::embedding<T, Vocab, Emb>`: PyTorch's nn.Embedding, with its table
/// as the reflected member `weight` (a `parameter<T, Vocab, Emb>`,
/// `BOOST_HANA_DEFINE_STRUCT`). Applied to an
/// integer tensor of ids with dims Ds..., it gathers rows of the table and
/// returns a tensor with dims Ds..., Emb. An id outside [0, vocab) throws
/// `shape_error` naming the id, where it was and the vocabulary size.
/// `emb(tape, ids)` records the lookup on a tape with `weight` watched
/// (`dimsum::lookup`), so backward scatters the rows' gradients into
/// `weight.grad`, summed over repeated ids.

#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <utility>

#include <boost/hana/define_struct.hpp>

#include <dimsum/grad/parameter.hpp>
#include <dimsum/grad/rules/embedding.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/io/npy.hpp>
#include <dimsum/nn/init.hpp>

namespace dimsum::nn {

template <class T, dimension Vocab, dimension Emb>
struct embedding {
  BOOST_HANA_DEFINE_STRUCT(embedding, (parameter<T, Vocab, Emb>, weight));

  embedding() = default;
  /// A zero table; `reset_parameters` or a state-dict load fills it.
  embedding(Vocab v, Emb e) : weight(v, e) {}

  /// N(0, 1) entries from `seed`, as nn.Embedding.reset_parameters
  /// (nn/init.hpp: torch's distribution, not torch's numbers).
  void reset_parameters(std::uint64_t seed) { init::normal(weight, seed); }

  /// The table from a `.npy` file written from PyTorch.
  static embedding load(const std::string& path) {
    embedding e;
    e.weight = parameter<T, Vocab, Emb>(load_npy<tensor<T, Vocab, Emb>>(path));
    return e;
  }

  /// The rows of the table for each id: dims Ds..., Emb.
  template <class I, dimension... Ds>
  tensor<T, Ds..., Emb> operator()(const tensor<I, Ds...>& ids) const {
    static_assert(std::is_integral_v<I>, "dimsum: embedding ids must be integers");
    const tensor<T, Vocab, Emb>& table = weight.value;
    const std::size_t vocab = table.template extent<Vocab>();
    const std::size_t width = table.template extent<Emb>();
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
      std::copy_n(table.data() + static_cast<std::size_t>(id) * width, width, out.data() + n * width);
    }
    return out;
  }

  /// The same for ids given as any other named expression, evaluated
  /// first: a view such as `slice<posn>(ids, t0, t1)` (nanoGPT's
  /// `wte(idx[:, -block_size:])`), a rename, a lazy expression.
  template <named_expression E>
    requires(!init::detail::is_tensor_v<std::remove_cvref_t<E>>)
  auto operator()(E&& ids) const {
    return (*this)(eval(std::forward<E>(ids)));
  }

  /// The same on tape t, with `weight` watched: a var with dims Ds..., Emb
  /// whose backward accumulates into `weight.grad` (PyTorch's `wte(ids)` in
  /// a training loop; the ids are integers, so they are not a var).
  template <class I, dimension... Ds>
  auto operator()(grad::tape& t, const tensor<I, Ds...>& ids) {
    return lookup<Vocab>(t.watch(weight), ids);
  }
  /// The same on tape t for ids given as any other named expression.
  template <named_expression E>
    requires(!init::detail::is_tensor_v<std::remove_cvref_t<E>>)
  auto operator()(grad::tape& t, E&& ids) {
    return (*this)(t, eval(std::forward<E>(ids)));
  }
};

}  // namespace dimsum::nn
