#pragma once
/// \file
/// The seed classes under the names they had in `dimsum::nn` before they
/// moved to `dimsum::nn::seeds` (version 0.2.0): deprecated aliases, so a
/// program that names `nn::char_head` still compiles, with a warning that
/// names the new spelling. <dimsum/nn/nn.hpp> includes this header; the
/// aliases are removed in a later minor version (CHANGELOG.md).

#include <dimsum/nn/seeds/char_head.hpp>
#include <dimsum/nn/seeds/self_attention.hpp>

namespace dimsum::nn {

using char_tokenizer [[deprecated("use dimsum::nn::seeds::char_tokenizer (<dimsum/nn/seeds/seeds.hpp>)")]] =
    seeds::char_tokenizer;

// An alias template marked [[deprecated]] warns on g++; clang 16 ignores
// the mark there, so on clang the alias names the return type of a
// deprecated function, and using the alias warns (its note shows the line).
// Either way the alias is the same type as the new name.
#if defined(__clang__)
#define DIMSUM_DETAIL_OLD_NAME(name, params, args)                                         \
  namespace old_names {                                                                    \
  template <params>                                                                        \
  [[deprecated("use dimsum::nn::seeds::" #name " (<dimsum/nn/seeds/seeds.hpp>)")]] seeds:: \
      name<args>                                                                           \
      name();                                                                              \
  }                                                                                        \
  template <params>                                                                        \
  using name = decltype(old_names::name<args>());
#else
#define DIMSUM_DETAIL_OLD_NAME(name, params, args) \
  template <params>                                \
  using name [[deprecated("use dimsum::nn::seeds::" #name " (<dimsum/nn/seeds/seeds.hpp>)")]] = seeds::name<args>;
#endif
#define DIMSUM_DETAIL_COMMA ,

DIMSUM_DETAIL_OLD_NAME(char_head, class T DIMSUM_DETAIL_COMMA dimension Emb DIMSUM_DETAIL_COMMA dimension Head,
                       T DIMSUM_DETAIL_COMMA Emb DIMSUM_DETAIL_COMMA Head)
DIMSUM_DETAIL_OLD_NAME(key_position, dimension Token, Token)
DIMSUM_DETAIL_OLD_NAME(self_attention_trace,
                       class T DIMSUM_DETAIL_COMMA dimension Token DIMSUM_DETAIL_COMMA dimension DOut,
                       T DIMSUM_DETAIL_COMMA Token DIMSUM_DETAIL_COMMA DOut)
DIMSUM_DETAIL_OLD_NAME(self_attention_v1, class T DIMSUM_DETAIL_COMMA dimension DIn DIMSUM_DETAIL_COMMA dimension DOut,
                       T DIMSUM_DETAIL_COMMA DIn DIMSUM_DETAIL_COMMA DOut)
DIMSUM_DETAIL_OLD_NAME(self_attention_v2, class T DIMSUM_DETAIL_COMMA dimension DIn DIMSUM_DETAIL_COMMA dimension DOut,
                       T DIMSUM_DETAIL_COMMA DIn DIMSUM_DETAIL_COMMA DOut)

#undef DIMSUM_DETAIL_COMMA
#undef DIMSUM_DETAIL_OLD_NAME

}  // namespace dimsum::nn
