#pragma once
/// \file
/// The seed tutorials' own classes, in `dimsum::nn::seeds`: seed 001's
/// `char_tokenizer` and `char_head`, seed 004's `self_attention_v1` and
/// `self_attention_v2`. They reproduce those tutorials line by line; the
/// general building blocks are in <dimsum/nn/nn.hpp>.

#include <dimsum/nn/seeds/char_head.hpp>
#include <dimsum/nn/seeds/self_attention.hpp>
