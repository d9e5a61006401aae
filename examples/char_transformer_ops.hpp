#pragma once
/// \file
/// The differentiable operations the character transformer needs that the
/// tape (include/dimsum/grad/) does not have yet: an embedding gather whose
/// gradient is scattered and accumulated over repeated ids, `layer_norm`
/// over the last dim with weight and bias, the exact (erf) GELU, and the
/// mean cross entropy of logits against integer targets. Each records its
/// own backward rule on the tape with `grad::detail::record`, written as
/// plain loops over the row-major data; each is checked against central
/// finite differences in double by tests/unit/trainer_ops.cpp.
///
/// They are example-local helpers (namespace `char_lm`), not public API:
/// the grad engineer owns the library's versions (issue 12, item 2).

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <dimsum/grad/grad.hpp>

namespace char_lm {

using dimsum::dimension;
using dimsum::tensor;
using dimsum::grad::var;

namespace detail {
/// The last type of a non-empty pack.
template <class... Ds>
using last_t = typename decltype((std::type_identity<Ds>{}, ...))::type;

/// Extents `ext` with `inner` appended.
template <std::size_t N>
std::array<std::size_t, N + 1> append(const std::array<std::size_t, N>& ext, std::size_t inner) {
  std::array<std::size_t, N + 1> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = ext[i];
  out[N] = inner;
  return out;
}
}  // namespace detail

/// The rows of `table` (dims Vocab, Emb) for each id of `ids` (dims
/// Ds...): a var with dims Ds..., Emb (`nn.Embedding`'s forward). The
/// gradient of a table row is the sum of the output gradients of every
/// position holding its id. An id outside [0, vocab) throws
/// `dimsum::shape_error`.
template <class T, dimension Vocab, dimension Emb, class I, dimension... Ds>
var<T, Ds..., Emb> embedding(const var<T, Vocab, Emb>& table, const tensor<I, Ds...>& ids) {
  static_assert(std::is_integral_v<I>, "dimsum: embedding ids must be integers");
  const auto& w = table.value();
  const std::size_t vocab = w.template extent<Vocab>();
  const std::size_t width = w.template extent<Emb>();
  auto out = tensor<T, Ds..., Emb>::from_extents(detail::append(ids.extents(), width));
  for (std::size_t n = 0; n < ids.size(); ++n) {
    const I id = ids.data()[n];
    if (id < 0 || static_cast<std::uint64_t>(id) >= vocab)
      throw dimsum::shape_error("embedding: id " + std::to_string(id) + " (element " + std::to_string(n) +
                                " of the ids) is out of range for dim '" + std::string(Vocab::name.view()) +
                                "' of extent " + std::to_string(vocab));
    const T* src = w.data() + static_cast<std::size_t>(id) * width;
    std::copy(src, src + width, out.data() + n * width);
  }
  return dimsum::grad::detail::record(
      table.owner(), std::move(out), table.requires_grad(),
      [node = table.node(), ids, width](const auto& g, const auto&) {
        node->ensure_grad();
        T* gw = node->grad.data();
        const T* gs = g.data();
        for (std::size_t n = 0; n < ids.size(); ++n) {
          T* row = gw + static_cast<std::size_t>(ids.data()[n]) * width;
          const T* gr = gs + n * width;
          for (std::size_t j = 0; j < width; ++j) row[j] += gr[j];
        }
      });
}

/// Layer normalisation over D, the last dim of x (`nn.LayerNorm(d)`):
/// each row is centred, divided by sqrt(biased variance + eps), then
/// scaled by `weight` and shifted by `bias` (both with the single dim D).
/// Same dims as x.
template <dimension D, class T, dimension... Ds>
var<T, Ds...> layer_norm(const var<T, Ds...>& x, const var<T, D>& weight, const var<T, D>& bias, T eps = T(1e-5)) {
  static_assert(std::is_same_v<detail::last_t<Ds...>, D>, "dimsum: layer_norm<D> normalises the last dim of x");
  const auto& xv = x.value();
  const std::size_t width = xv.template extent<D>();
  if (weight.value().size() != width || bias.value().size() != width)
    throw dimsum::shape_error("layer_norm: weight and bias need dim '" + std::string(D::name.view()) +
                              "' of extent " + std::to_string(width));
  const std::size_t rows = width == 0 ? 0 : xv.size() / width;
  auto y = tensor<T, Ds...>::from_extents(xv.extents());
  auto xhat = std::make_shared<tensor<T, Ds...>>(tensor<T, Ds...>::from_extents(xv.extents()));
  auto rstd = std::make_shared<std::vector<T>>(rows);
  const T* w = weight.value().data();
  const T* b = bias.value().data();
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = xv.data() + r * width;
    T mean = 0;
    for (std::size_t j = 0; j < width; ++j) mean += xr[j];
    mean /= T(width);
    T var2 = 0;
    for (std::size_t j = 0; j < width; ++j) var2 += (xr[j] - mean) * (xr[j] - mean);
    const T s = T(1) / std::sqrt(var2 / T(width) + eps);
    (*rstd)[r] = s;
    T* hr = xhat->data() + r * width;
    T* yr = y.data() + r * width;
    for (std::size_t j = 0; j < width; ++j) {
      hr[j] = (xr[j] - mean) * s;
      yr[j] = hr[j] * w[j] + b[j];
    }
  }
  const bool rg = x.requires_grad() || weight.requires_grad() || bias.requires_grad();
  dimsum::grad::tape* t = dimsum::grad::detail::common_tape({x.owner(), weight.owner(), bias.owner()});
  return dimsum::grad::detail::record(
      t, std::move(y), rg,
      [xn = x.node(), wn = weight.node(), bn = bias.node(), xhat, rstd, width, rows](const auto& g, const auto&) {
        const T* gs = g.data();
        const T* h = xhat->data();
        const T* w = wn->value().data();
        if (wn->requires_grad || bn->requires_grad) {
          wn->ensure_grad();
          bn->ensure_grad();
          T* gw = wn->grad.data();
          T* gb = bn->grad.data();
          for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t j = 0; j < width; ++j) {
              gw[j] += gs[r * width + j] * h[r * width + j];
              gb[j] += gs[r * width + j];
            }
        }
        if (!xn->requires_grad) return;
        xn->ensure_grad();
        T* gx = xn->grad.data();
        // dx = rstd * (dh - mean(dh) - xhat * mean(dh * xhat)), dh = g * weight
        for (std::size_t r = 0; r < rows; ++r) {
          const T* gr = gs + r * width;
          const T* hr = h + r * width;
          T m1 = 0, m2 = 0;
          for (std::size_t j = 0; j < width; ++j) {
            const T dh = gr[j] * w[j];
            m1 += dh;
            m2 += dh * hr[j];
          }
          m1 /= T(width);
          m2 /= T(width);
          const T s = (*rstd)[r];
          for (std::size_t j = 0; j < width; ++j) gx[r * width + j] += s * (gr[j] * w[j] - m1 - hr[j] * m2);
        }
      });
}

/// The exact GELU, x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)), element-wise
/// (`nn.GELU()`); its derivative is Phi(x) + x * phi(x).
template <class T, dimension... Ds>
var<T, Ds...> gelu(const var<T, Ds...>& x) {
  const auto& xv = x.value();
  auto y = tensor<T, Ds...>::from_extents(xv.extents());
  auto cdf = std::make_shared<std::vector<T>>(xv.size());  // Phi(x), kept for the backward
  const T inv_sqrt2 = T(0.70710678118654752440);
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const T v = xv.data()[i];
    (*cdf)[i] = T(0.5) * (T(1) + std::erf(v * inv_sqrt2));
    y.data()[i] = v * (*cdf)[i];
  }
  return dimsum::grad::detail::record(x.owner(), std::move(y), x.requires_grad(), [xn = x.node(), cdf](const auto& g, const auto&) {
    const T inv_sqrt_2pi = T(0.39894228040143267794);
    xn->ensure_grad();
    const T* xs = xn->value().data();
    const T* gs = g.data();
    T* gx = xn->grad.data();
    for (std::size_t i = 0, n = g.size(); i < n; ++i) {
      const T v = xs[i];
      gx[i] += gs[i] * ((*cdf)[i] + v * inv_sqrt_2pi * std::exp(T(-0.5) * v * v));
    }
  });
}

/// The mean over all positions of -log softmax<Vocab>(logits)[target]
/// (`F.cross_entropy(logits.view(-1, V), targets.view(-1))`): logits have
/// dims Ds..., Vocab (Vocab last), targets the dims Ds... with ids in
/// [0, vocab) (otherwise `dimsum::shape_error`). A rank-0 var; its
/// gradient is (softmax(logits) - one_hot(target)) / count.
template <dimension Vocab, class T, dimension... Ds, class I, dimension... Ts>
var<T> cross_entropy(const var<T, Ds...>& logits, const tensor<I, Ts...>& targets) {
  static_assert(std::is_same_v<detail::last_t<Ds...>, Vocab>, "dimsum: cross_entropy<Vocab> needs Vocab as the last dim of the logits");
  static_assert(std::is_same_v<dimsum::dim_list<Ts..., Vocab>, dimsum::dim_list<Ds...>>,
                "dimsum: cross_entropy<Vocab>(logits, targets): the targets need the logits' dims without Vocab, in order");
  const auto& lv = logits.value();
  const std::size_t vocab = lv.template extent<Vocab>();
  const std::size_t rows = targets.size();
  for (std::size_t i = 0; i < sizeof...(Ts); ++i)
    if (targets.extents()[i] != lv.extents()[i])
      throw dimsum::shape_error("cross_entropy: the targets' extents differ from the logits' (without '" +
                                std::string(Vocab::name.view()) + "')");
  auto probs = std::make_shared<std::vector<T>>(lv.size());
  double total = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    const I id = targets.data()[r];
    if (id < 0 || static_cast<std::uint64_t>(id) >= vocab)
      throw dimsum::shape_error("cross_entropy: target " + std::to_string(id) + " (element " + std::to_string(r) +
                                ") is out of range for dim '" + std::string(Vocab::name.view()) + "' of extent " +
                                std::to_string(vocab));
    const T* lr = lv.data() + r * vocab;
    T* pr = probs->data() + r * vocab;
    T mx = lr[0];
    for (std::size_t j = 1; j < vocab; ++j) mx = std::max(mx, lr[j]);
    double z = 0;
    for (std::size_t j = 0; j < vocab; ++j) {
      pr[j] = std::exp(lr[j] - mx);
      z += double(pr[j]);
    }
    const T inv = T(1.0 / z);
    for (std::size_t j = 0; j < vocab; ++j) pr[j] *= inv;
    total += std::log(z) + double(mx) - double(lr[static_cast<std::size_t>(id)]);
  }
  tensor<T> loss;
  loss.data()[0] = T(rows == 0 ? 0.0 : total / double(rows));
  return dimsum::grad::detail::record(
      logits.owner(), std::move(loss), logits.requires_grad(),
      [ln = logits.node(), probs, targets, rows, vocab](const auto& g, const auto&) {
        ln->ensure_grad();
        const T scale = g.data()[0] / T(rows);
        T* gl = ln->grad.data();
        const T* p = probs->data();
        for (std::size_t r = 0; r < rows; ++r) {
          const std::size_t id = static_cast<std::size_t>(targets.data()[r]);
          for (std::size_t j = 0; j < vocab; ++j) gl[r * vocab + j] += scale * (p[r * vocab + j] - T(j == id));
        }
      });
}

}  // namespace char_lm
