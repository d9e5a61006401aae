#pragma once
/// \file
/// Seed 001's own classes, in `dimsum::nn::seeds` (they reproduce one
/// tutorial, they are not general building blocks): a character tokenizer
/// over string.whitespace + string.ascii_letters + string.digits +
/// string.punctuation (100 symbols) and one causal attention head with
/// bias-free key, query and value Linear layers, scores scaled by C^-0.5
/// where C is the embedding width (as the seed writes it). `char_head`
/// called on a `grad::var` records on its tape (tests/unit/nn_tape.cpp).
/// See examples/seed001_char_head.cpp.

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <boost/hana/define_struct.hpp>

#include <dimsum/grad/rules/attention.hpp>
#include <dimsum/grad/rules/rename.hpp>
#include <dimsum/nn/linear.hpp>
#include <dimsum/ops/mask.hpp>
#include <dimsum/ops/softmax.hpp>
#include <dimsum/tensor/named.hpp>

namespace dimsum::nn::seeds {

/// Encodes text to ids and back over a fixed vocabulary: id i is the
/// character `vocab[i]`.
struct char_tokenizer {
  /// The characters, in id order.
  std::string vocab;

  /// Python's string.whitespace + ascii_letters + digits + punctuation.
  static char_tokenizer python_printable() {
    return {std::string(" \t\n\r\x0b\x0c") + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" + "0123456789" +
            "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"};
  }

  /// The vocabulary size.
  std::size_t size() const { return vocab.size(); }

  /// The ids of the characters of `text` along dim D; a character outside
  /// the vocabulary throws `dimsum::error`.
  template <dimension D>
  tensor<std::int64_t, D> encode(std::string_view text) const {
    tensor<std::int64_t, D> ids(D{text.size()});
    for (std::size_t i = 0; i < text.size(); ++i) {
      const auto p = vocab.find(text[i]);
      if (p == std::string::npos)
      {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(text[i]));
        const bool printable = text[i] > 32 && text[i] < 127;
        throw error("char_tokenizer: character '" + (printable ? std::string(1, text[i]) : std::string(hex)) +
                    "' at " + std::to_string(i) + " is not in the vocabulary");
      }
      ids.data()[i] = static_cast<std::int64_t>(p);
    }
    return ids;
  }

  /// The text of a rank-1 id tensor; an id outside the vocabulary throws.
  template <class I, dimension D>
  std::string decode(const tensor<I, D>& ids) const {
    std::string s;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const I id = ids.data()[i];
      if (id < 0 || static_cast<std::size_t>(id) >= vocab.size())
        throw shape_error("char_tokenizer: id " + std::to_string(id) + " is out of range for a vocabulary of " +
                          std::to_string(vocab.size()));
      s += vocab[static_cast<std::size_t>(id)];
    }
    return s;
  }
};

/// seed 001's single head: k, q, v = Linear(C, head_size, bias=False)(x);
/// W = q @ k^T * C^-0.5; causal (tril) mask with -inf; softmax; W @ v.
template <class T, dimension Emb, dimension Head>
struct char_head {
  /// The bias-free Linear(C, head_size) layers, Emb -> Head.
  BOOST_HANA_DEFINE_STRUCT(char_head, (linear<T, Emb, Head>, key), (linear<T, Emb, Head>, query),
                           (linear<T, Emb, Head>, value));

  char_head(Emb emb, Head head) : key(emb, head, false), query(emb, head, false), value(emb, head, false) {}

  /// The intermediates, in the seed's orders: k, q, v (Batch, QT, Head);
  /// scores_raw (q @ k^T), scores (scaled), scores_masked and weights
  /// (Batch, QT, KT).
  template <dimension Batch, dimension QT, dimension KT>
  struct trace {
    tensor<T, Batch, QT, Head> k, q, v;
    tensor<T, Batch, QT, KT> scores_raw, scores, scores_masked, weights;
  };

  /// x (Batch, Time, Emb), in any order, -> out (Batch, Time, Head). Time
  /// is named (the causal mask runs along it); Batch is x's third dim,
  /// found by name. QT and KT name the query and key positions of the
  /// score matrix: `head.forward<time, q_time, k_time>(x)`. A trace pointer
  /// (null: none) receives the intermediates.
  template <dimension Time, dimension QT, dimension KT, named_expression X,
            dimension Batch = dimsum::detail::at_t<without_t<dims_of_t<X>, dim_list<Time, Emb>>, 0>>
    requires(dims_of_t<X>::size == 3 && contains_v<dims_of_t<X>, Time> && contains_v<dims_of_t<X>, Emb> &&
             Time::name.view() != Emb::name.view())
  tensor<T, Batch, Time, Head> forward(const X& x, trace<Batch, QT, KT>* tr = nullptr) const {
    trace<Batch, QT, KT> local;
    auto& t = tr ? *tr : local;
    t.k = rename<Time, QT>(key(x));
    t.q = rename<Time, QT>(query(x));
    t.v = rename<Time, QT>(value(x));
    const T scale = static_cast<T>(std::pow(double(extent<Emb>(x)), -0.5));  // C ** -0.5
    t.scores_raw = einsum<Batch, QT, KT>(t.q, rename<QT, KT>(t.k));  // q @ k.transpose(-2, -1)
    t.scores = t.scores_raw * scale;
    t.scores_masked = causal_mask<QT, KT>(t.scores, -std::numeric_limits<T>::infinity());
    t.weights = softmax<KT>(t.scores_masked);
    return rename<QT, Time>(eval(einsum<Batch, QT, Head>(t.weights, rename<QT, KT>(t.v))));  // W @ v
  }

  /// The form before 0.2.0, `head.forward<q_time, k_time>(x)`: Time was x's
  /// second dim, by position. Deprecated: name it, `forward<Time, QT, KT>`.
  template <dimension QT, dimension KT, dimension Batch, dimension Time>
  [[deprecated("use forward<Time, QT, KT>(x): name x's time dim first")]]
  tensor<T, Batch, Time, Head> forward(const tensor<T, Batch, Time, Emb>& x, trace<Batch, QT, KT>* tr = nullptr) const {
    return forward<Time, QT, KT>(x, tr);
  }

  /// The same on a var x, recorded on x's tape with the three weights
  /// watched: backward accumulates their gradients (the seed's `head(x)` in
  /// a training loop). Returns a var (Batch, Time, Head). The attention is
  /// one `grad::fused_attention` node: neither pass materialises the
  /// (QT, KT) scores, so no trace.
  template <dimension Time, dimension QT, dimension KT, grad::detail::var_like X,
            dimension Batch = dimsum::detail::at_t<without_t<dims_of_t<X>, dim_list<Time, Emb>>, 0>>
    requires(dims_of_t<X>::size == 3 && contains_v<dims_of_t<X>, Time> && contains_v<dims_of_t<X>, Emb> &&
             Time::name.view() != Emb::name.view())
  auto forward(const X& x) {
    auto k = rename<Time, KT>(key(x));
    auto q = rename<Time, QT>(query(x));
    auto v = rename<Time, KT>(value(x));
    const T scale = static_cast<T>(std::pow(double(x.template extent<Emb>()), -0.5));  // C ** -0.5
    auto out = grad::fused_attention(q, k, v, [scale](const auto& qv, const auto& kv, const auto& vv) {
      // softmax(masked_fill(q @ k^T * scale, tril == 0, -inf)) @ v, as one expression
      return einsum<Batch, QT, Head>(
          softmax<KT>(causal_mask<QT, KT>(einsum<Batch, QT, KT>(qv, kv) * scale, -std::numeric_limits<T>::infinity())),
          vv);
    });
    return rename<QT, Time>(out);
  }
};

}  // namespace dimsum::nn::seeds
