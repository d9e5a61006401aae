#pragma once
/// \file
/// The attention building blocks (not included by dimsum.hpp, which stays
/// light): linear, embedding, positional encoding, dropout, dot-product and
/// multi-head attention, layer norm, init, and the Llama-style blocks
/// (rms_norm, swiglu, gelu_mlp, rotary_attention, pre_norm_block,
/// transformer_block, transformer) and watch_like.
/// The seed tutorials' own classes (tokenizer, char head, SelfAttention
/// v1/v2) are `dimsum::nn::seeds::...`
/// from <dimsum/nn/seeds/seeds.hpp>; this header includes them too, with
/// their former names in `dimsum::nn` as deprecated aliases
/// (<dimsum/nn/seeds/old_names.hpp>).

#include <dimsum/nn/attention.hpp>
#include <dimsum/nn/dropout.hpp>
#include <dimsum/nn/embedding.hpp>
#include <dimsum/nn/init.hpp>
#include <dimsum/nn/layer_norm.hpp>
#include <dimsum/nn/linear.hpp>
#include <dimsum/nn/mlp.hpp>
#include <dimsum/nn/module.hpp>
#include <dimsum/nn/positional_encoding.hpp>
#include <dimsum/nn/seeds/old_names.hpp>
#include <dimsum/nn/rms_norm.hpp>
#include <dimsum/nn/rotary_attention.hpp>
#include <dimsum/nn/transformer.hpp>
#include <dimsum/nn/transformer_block.hpp>
#include <dimsum/nn/scaled_dot_product_attention.hpp>
#include <dimsum/nn/watch_like.hpp>
#include <dimsum/ops/arange.hpp>
