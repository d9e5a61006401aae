#pragma once
/// \file
/// What the nn modules' tape forms share: the tape a module called on a var
/// records on (the var's own), found or refused with a message.

#include <string>
#include <string_view>

#include <dimsum/grad/tape.hpp>

namespace dimsum::nn::detail {

/// The tape var `x` is recorded on; a var on no tape (a default one, or a
/// constant made without a tape) throws `grad::tape_error`: a module needs
/// a tape to watch its parameters on.
template <grad::detail::var_like X>
grad::tape& tape_of_input(const X& x, std::string_view module) {
  if (!x.owner())
    throw grad::tape_error(std::string(module) +
                           ": the input var is on no tape, so the module's parameters cannot be watched; make it "
                           "with tape.constant(x) or tape.watch(x), or call the module as m(tape, x)");
  return *x.owner();
}

}  // namespace dimsum::nn::detail
