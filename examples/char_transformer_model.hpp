#pragma once
/// \file
/// The decoder-only character transformer of examples/train_char_transformer.cpp:
/// seed 001's token and position embeddings and causal attention head grown
/// into N pre-norm blocks (`nn::pre_norm_block`: nn::layer_norm, the
/// example's causal multi-head attention and nn::gelu_mlp, each with a
/// residual), a final layer norm and an LM head. Every weight is a
/// `dimsum::parameter` member of a Hana-adapted struct, so nn/module.hpp's
/// reflection finds it by its dotted name ("blocks.0.self_attn.W_Q",
/// "blocks.0.mlp.c_fc.weight"), and the
/// optimizer, gradient clipping and the .safetensors checkpoint need no
/// hand-written list. This header has the model's types, its construction
/// and initialisation, and the declarations of `forward` and `loss`; their
/// definitions, which instantiate the gradient rules, are in
/// char_transformer_forward.hpp, so that the example compiles them in a
/// translation unit of their own (examples/char_transformer_model.cpp)
/// beside the training program (docs/performance.md, "Compile time").

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <dimsum/grad/parameter.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/nn/init.hpp>
#include <dimsum/nn/layer_norm.hpp>
#include <dimsum/nn/mlp.hpp>
#include <dimsum/nn/module.hpp>
#include <dimsum/nn/transformer_block.hpp>
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

/// Causal multi-head self-attention, the example's own module: the
/// projections have the heads as a dim of their own (no reshapes), the
/// output projection a bias. Its var `operator()` (the attention written as
/// plain contractions: char_transformer_forward.hpp) is what
/// `nn::pre_norm_block` calls as its `self_attn`.
struct causal_self_attention {
  BOOST_HANA_DEFINE_STRUCT(causal_self_attention, (parameter<float, d_model, nheads, d_head>, W_Q),
                           (parameter<float, d_model, nheads, d_head>, W_K),
                           (parameter<float, d_model, nheads, d_head>, W_V),
                           (parameter<float, nheads, d_head, d_model>, W_O), (parameter<float, d_model>, b_O));

  causal_self_attention() = default;
  causal_self_attention(d_model dm, nheads h, d_head dh)
      : W_Q(dm, h, dh), W_K(dm, h, dh), W_V(dm, h, dh), W_O(h, dh, dm), b_O(dm) {}

  /// x (batch, posn, d_model), a float or bf16 var, attended causally:
  /// the same dims and value type.
  template <class X>
  auto operator()(const X& x);
};

/// `nn.LayerNorm(d_model)`, with its `weight` and `bias`.
using layer_norm = dimsum::nn::layer_norm<float, d_model>;
/// GPT-2's MLP: `c_proj(gelu(c_fc(x)))`, d_model -> d_mlp -> d_model.
using mlp = dimsum::nn::gelu_mlp<float, d_model, d_mlp>;
/// One pre-norm block: h = x + self_attn(input_layernorm(x)), then
/// h + mlp(post_attention_layernorm(h)).
using block = dimsum::nn::pre_norm_block<layer_norm, causal_self_attention, mlp>;

/// The whole model.
struct model {
  BOOST_HANA_DEFINE_STRUCT(model, (parameter<float, vocab, d_model>, tok_embed),
                           (parameter<float, ctx, d_model>, pos_embed), (std::vector<block>, blocks),
                           (layer_norm, ln_f), (parameter<float, d_model, vocab>, W_U),
                           (parameter<float, vocab>, b_U));
};

/// A model of the given sizes: layer norms ones and zeros, every other
/// parameter zero.
inline model make_model(const config& c) {
  const d_model dm{c.d_model};
  model m;
  m.tok_embed = parameter<float, vocab, d_model>(vocab{c.vocab}, dm);
  m.pos_embed = parameter<float, ctx, d_model>(ctx{c.context}, dm);
  m.blocks.assign(c.n_layers, block(layer_norm(dm), causal_self_attention(dm, nheads{c.n_heads}, d_head{c.d_model / c.n_heads}),
                                    layer_norm(dm), mlp(dm, d_mlp{c.d_mlp})));
  m.ln_f = layer_norm(dm);
  m.W_U = parameter<float, d_model, vocab>(dm, vocab{c.vocab});
  m.b_U = parameter<float, vocab>(vocab{c.vocab});
  return m;
}

/// GPT-2's initialisation, deterministic from `seed` and each parameter's
/// dotted name (optim::seed_parameters): weights N(0, 0.02), the two
/// projections into the residual stream N(0, 0.02 / sqrt(2 n_layers)),
/// biases 0, layer-norm weights (the rank-1 ".weight"s) 1 (nn/init.hpp's
/// portable generator).
inline void init_model(model& m, std::uint64_t seed) {
  namespace init = dimsum::nn::init;
  const double n_layers = double(std::max<std::size_t>(m.blocks.size(), 1));
  dimsum::optim::seed_parameters(m, seed, [&](const std::string& name, auto& p, std::uint64_t s) {
    auto ends_with = [&](std::string_view suffix) {
      return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    constexpr std::size_t rank = dimsum::dims_of_t<std::remove_cvref_t<decltype(p.value)>>::size;
    if (rank == 1 && ends_with(".weight"))
      init::ones(p);
    else if (rank == 1)
      init::zeros(p);
    else
      init::normal(p, s, 0.0, ends_with("W_O") || ends_with("c_proj.weight") ? 0.02 / std::sqrt(2.0 * n_layers) : 0.02);
  });
}

/// Windows of character ids (batch, posn).
using ids_t = tensor<std::int64_t, batch, posn>;

/// The logits (batch, posn, vocab) of windows of character ids (batch,
/// posn), recorded on tape t; posn at most the context. Defined in
/// char_transformer_forward.hpp (compiled on its own by the example).
var<float, batch, posn, vocab> forward(tape& t, model& m, const ids_t& ids);

/// The mean cross entropy of the next-character predictions y of windows x.
var<float> loss(tape& t, model& m, const ids_t& x, const ids_t& y);

/// The same loss in mixed precision: the embeddings looked up in float32
/// and cast to bf16, every other float32 parameter watched as a bf16 copy
/// by the module that holds it (its gradient float32), the forward and
/// backward in bf16 with float32 sums, the logits cast to float32 for the
/// cross entropy.
var<float> loss_bf16(tape& t, model& m, const ids_t& x, const ids_t& y);

}  // namespace char_lm
