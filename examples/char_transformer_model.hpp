#pragma once
/// \file
/// The decoder-only character transformer of examples/train_char_transformer.cpp:
/// seed 001's token and position embeddings and causal attention head grown
/// into N pre-norm blocks (causal multi-head attention and a GELU MLP, each
/// with a residual), a final layer norm and an LM head. Every weight is a
/// `dimsum::parameter` member of a Hana-adapted struct, so nn/module.hpp's
/// reflection finds it by its dotted name ("blocks.0.attn.W_Q"), and the
/// optimizer, gradient clipping and the .safetensors checkpoint need no
/// hand-written list. The forward is recorded on a `grad::tape` with the
/// tape's operations: einsum, rename, causal_mask, softmax, `lookup`
/// (embedding), `layer_norm`, `gelu` and `cross_entropy`.

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <dimsum/grad/grad.hpp>
#include <dimsum/nn/module.hpp>
#include <dimsum/optim/seed.hpp>


namespace char_lm {

using dimsum::tensor;
using dimsum::grad::var;

DIMSUM_DIM(vocab);    // characters of the text
DIMSUM_DIM(ctx);      // rows of the position table (the longest context)
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);     // positions of a window
DIMSUM_DIM(q_posn);   // the query positions of attention
DIMSUM_DIM(k_posn);   // the key positions of attention
DIMSUM_DIM(d_model);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);
DIMSUM_DIM(d_mlp);

using dimsum::parameter;
using dimsum::grad::tape;

/// The sizes of a model (saved beside its checkpoint).
struct config {
  std::size_t vocab = 0;
  std::size_t context = 64;
  std::size_t d_model = 64;
  std::size_t n_layers = 2;
  std::size_t n_heads = 4;
  std::size_t d_mlp = 256;
};

/// `nn.LayerNorm(d_model)`: weight 1, bias 0.
struct layer_norm_params {
  BOOST_HANA_DEFINE_STRUCT(layer_norm_params, (parameter<float, d_model>, weight), (parameter<float, d_model>, bias));
};

/// Causal multi-head self-attention; the projections have the heads as a
/// dim of their own (no reshapes), the output projection a bias.
struct attention_params {
  BOOST_HANA_DEFINE_STRUCT(attention_params, (parameter<float, d_model, nheads, d_head>, W_Q),
                           (parameter<float, d_model, nheads, d_head>, W_K),
                           (parameter<float, d_model, nheads, d_head>, W_V),
                           (parameter<float, nheads, d_head, d_model>, W_O), (parameter<float, d_model>, b_O));
};

/// The MLP: d_model -> d_mlp, GELU, d_mlp -> d_model, with biases.
struct mlp_params {
  BOOST_HANA_DEFINE_STRUCT(mlp_params, (parameter<float, d_model, d_mlp>, W_in), (parameter<float, d_mlp>, b_in),
                           (parameter<float, d_mlp, d_model>, W_out), (parameter<float, d_model>, b_out));
};

/// One pre-norm block: x + attn(ln1(x)), then x + mlp(ln2(x)).
struct block_params {
  BOOST_HANA_DEFINE_STRUCT(block_params, (layer_norm_params, ln1), (attention_params, attn), (layer_norm_params, ln2),
                           (mlp_params, mlp));
};

/// The whole model.
struct model {
  BOOST_HANA_DEFINE_STRUCT(model, (parameter<float, vocab, d_model>, tok_embed),
                           (parameter<float, ctx, d_model>, pos_embed), (std::vector<block_params>, blocks),
                           (layer_norm_params, ln_f), (parameter<float, d_model, vocab>, W_U),
                           (parameter<float, vocab>, b_U));
};

/// A model of the given sizes, every parameter zero.
inline model make_model(const config& c) {
  const d_model dm{c.d_model};
  const nheads h{c.n_heads};
  const d_head dh{c.d_model / c.n_heads};
  model m;
  m.tok_embed = parameter<float, vocab, d_model>(vocab{c.vocab}, dm);
  m.pos_embed = parameter<float, ctx, d_model>(ctx{c.context}, dm);
  m.blocks.resize(c.n_layers);
  auto ln = [&](layer_norm_params& p) {
    p.weight = parameter<float, d_model>(dm);
    p.bias = parameter<float, d_model>(dm);
  };
  for (auto& b : m.blocks) {
    ln(b.ln1);
    ln(b.ln2);
    b.attn.W_Q = parameter<float, d_model, nheads, d_head>(dm, h, dh);
    b.attn.W_K = parameter<float, d_model, nheads, d_head>(dm, h, dh);
    b.attn.W_V = parameter<float, d_model, nheads, d_head>(dm, h, dh);
    b.attn.W_O = parameter<float, nheads, d_head, d_model>(h, dh, dm);
    b.attn.b_O = parameter<float, d_model>(dm);
    b.mlp.W_in = parameter<float, d_model, d_mlp>(dm, d_mlp{c.d_mlp});
    b.mlp.b_in = parameter<float, d_mlp>(d_mlp{c.d_mlp});
    b.mlp.W_out = parameter<float, d_mlp, d_model>(d_mlp{c.d_mlp}, dm);
    b.mlp.b_out = parameter<float, d_model>(dm);
  }
  ln(m.ln_f);
  m.W_U = parameter<float, d_model, vocab>(dm, vocab{c.vocab});
  m.b_U = parameter<float, vocab>(vocab{c.vocab});
  return m;
}

/// GPT-2's initialisation, deterministic from `seed` and each parameter's
/// dotted name (optim::seed_parameters): weights N(0, 0.02), the two
/// projections into the residual stream N(0, 0.02 / sqrt(2 n_layers)),
/// biases 0, layer-norm weights 1. Normals by Box-Muller from mt19937_64,
/// which (unlike std's distributions) is the same on every platform.
inline void init_model(model& m, std::uint64_t seed) {
  const double n_layers = double(std::max<std::size_t>(m.blocks.size(), 1));
  dimsum::optim::seed_parameters(m, seed, [&](const std::string& name, auto& p, std::uint64_t s) {
    auto ends_with = [&](std::string_view suffix) {
      return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    float* v = p.value.data();
    const std::size_t n = p.value.size();
    if (ends_with(".weight")) {
      std::fill(v, v + n, 1.0f);
    } else if (ends_with(".bias") || name.find(".b_") != std::string::npos || name == "b_U") {
      std::fill(v, v + n, 0.0f);
    } else {
      const double std = ends_with("W_O") || ends_with("W_out") ? 0.02 / std::sqrt(2.0 * n_layers) : 0.02;
      std::mt19937_64 gen(s);
      auto uniform = [&] { return (double(gen() >> 11) + 0.5) * 0x1p-53; };  // in (0, 1)
      for (std::size_t i = 0; i < n; ++i) {
        const double r = std::sqrt(-2.0 * std::log(uniform())), a = 2.0 * 3.14159265358979323846 * uniform();
        v[i] = float(std * r * std::cos(a));
      }
    }
    p.zero_grad();
  });
}

/// Causal multi-head self-attention of h (batch, posn, d_model) on the
/// tape: one projection string for queries, keys and values; the keys and
/// values' positions renamed k_posn so that the scores have both.
template <class X>
auto attention(tape& t, attention_params& a, const X& h) {
  using dimsum::einsum;
  using dimsum::rename;
  constexpr dimsum::fixed_string project = "batch posn d_model, d_model nheads d_head -> batch posn nheads d_head";
  auto q = rename<posn, q_posn>(einsum<project>(h, t.watch(a.W_Q)));
  auto k = rename<posn, k_posn>(einsum<project>(h, t.watch(a.W_K)));
  auto v = rename<posn, k_posn>(einsum<project>(h, t.watch(a.W_V)));
  const float scale = 1.0f / std::sqrt(float(a.W_Q.value.template extent<d_head>()));
  auto scores = einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(q, k);
  auto masked = dimsum::causal_mask<q_posn, k_posn>(scores * scale, -std::numeric_limits<float>::infinity());
  auto pattern = dimsum::softmax<k_posn>(masked);
  auto z = einsum<"batch nheads q_posn k_posn, batch k_posn nheads d_head -> batch q_posn nheads d_head">(pattern, v);
  auto out = rename<q_posn, posn>(einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(z, t.watch(a.W_O)));
  return out + t.watch(a.b_O);
}

/// The MLP on the tape: gelu(h W_in + b_in) W_out + b_out.
template <class X>
auto mlp(tape& t, mlp_params& p, const X& h) {
  using dimsum::einsum;
  auto pre = einsum<"batch posn d_model, d_model d_mlp -> batch posn d_mlp">(h, t.watch(p.W_in)) + t.watch(p.b_in);
  return einsum<"batch posn d_mlp, d_mlp d_model -> batch posn d_model">(dimsum::gelu(pre), t.watch(p.W_out)) +
         t.watch(p.b_out);
}

template <class X>
auto norm(tape& t, layer_norm_params& p, const X& x) {
  return dimsum::layer_norm<d_model>(x, t.watch(p.weight), t.watch(p.bias));
}

/// The logits (batch, posn, vocab) of windows of character ids (batch,
/// posn), recorded on tape t; posn at most the context.
inline var<float, batch, posn, vocab> forward(tape& t, model& m, const tensor<std::int64_t, batch, posn>& ids) {
  const std::size_t n = ids.extent<posn>();
  tensor<std::int64_t, posn> positions(posn{n});
  for (std::size_t i = 0; i < n; ++i) positions.data()[i] = std::int64_t(i);
  var<float, batch, posn, d_model> x =
      dimsum::lookup<vocab>(t.watch(m.tok_embed), ids) + dimsum::lookup<ctx>(t.watch(m.pos_embed), positions);
  for (auto& b : m.blocks) {
    x = x + attention(t, b.attn, norm(t, b.ln1, x));
    x = x + mlp(t, b.mlp, norm(t, b.ln2, x));
  }
  return dimsum::einsum<"batch posn d_model, d_model vocab -> batch posn vocab">(norm(t, m.ln_f, x), t.watch(m.W_U)) +
         t.watch(m.b_U);
}

/// The mean cross entropy of the next-character predictions.
using ids_t = tensor<std::int64_t, batch, posn>;
inline var<float> loss(tape& t, model& m, const tensor<std::int64_t, batch, posn>& x,
                       const tensor<std::int64_t, batch, posn>& y) {
  return dimsum::cross_entropy<vocab>(forward(t, m, x), y);
}

}  // namespace char_lm
