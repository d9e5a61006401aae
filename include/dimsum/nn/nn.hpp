#pragma once
/// \file
/// The attention building blocks of the seeds (not included by dimsum.hpp,
/// which stays light): linear, embedding, positional encoding, dropout,
/// dot-product and multi-head attention, SelfAttention v1/v2, seed 001's
/// tokenizer and head.

#include <dimsum/nn/attention.hpp>
#include <dimsum/nn/char_head.hpp>
#include <dimsum/nn/dropout.hpp>
#include <dimsum/nn/embedding.hpp>
#include <dimsum/nn/linear.hpp>
#include <dimsum/nn/positional_encoding.hpp>
#include <dimsum/nn/self_attention.hpp>
#include <dimsum/ops/arange.hpp>
