#pragma once
/// \file
/// `nn::watch_like(x, p)`: a parameter of a user's module watched on the
/// tape of its input var x, in x's value type, as the nn modules watch
/// theirs: `p` itself for a float var, a bf16 copy of a float32 `p` for a
/// bf16 var (mixed precision: the cast is on the tape, so `p.grad` stays
/// float32). A module written this way works on float and bf16 vars alike:
///
///     template <class X>
///     auto operator()(const X& h) {   // h: a var (batch, posn, d_model)
///       return einsum<"batch posn d_model, d_model d_out -> batch posn d_out">(h, nn::watch_like(h, W));
///     }
///
/// A var on no tape throws `grad::tape_error`. See
/// examples/char_transformer_model.hpp.

#include <dimsum/grad/tape.hpp>
#include <dimsum/nn/detail/on_tape.hpp>

namespace dimsum::nn {

template <grad::detail::var_like X, class P>
auto watch_like(const X& x, P& p) {
  return detail::watch_for<X>(detail::tape_of_input(x, "nn::watch_like"), p);
}

}  // namespace dimsum::nn
