#pragma once
/// \file
/// The element-wise maths of ops/math.hpp on vars, with PyTorch's gradients
/// at the kinks: `abs` (0 at x = 0), `clamp` with scalar bounds (the
/// gradient passes where lo <= x <= hi, bounds included), `pow` (var to a
/// scalar, var or tensor power; scalar or tensor to a var power), and
/// `minimum` / `maximum` of a var and a var, tensor or scalar (ties split
/// the gradient half and half). Each result has the dims of the tensor
/// form; a broadcast operand's gradient is summed onto its dims.
///
///     auto y = dimsum::clamp(dimsum::pow(x, 2.0), 0.0, 1.0);   // x: var<double, batch, d>

#include <cmath>
#include <type_traits>
#include <utility>

#include <dimsum/grad/rules/activation.hpp>
#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/math.hpp>

namespace dimsum::grad::detail {

// The gradient rules below are element-wise functions of the incoming
// gradient g and the operands' values, evaluated as one element-wise node
// (broadcast by name, g first so that the node has g's dims): one
// selection per element, exactly as torch's backward formulas select.

/// d max(a, b) / da (Max) or d min(a, b) / da, times g: g/2 where a and b
/// tie, 0 where b wins, g elsewhere (where either is NaN too), as torch's
/// maximum/minimum backward.
template <bool Max>
struct extremum_grad {
  static constexpr const char* name = Max ? "maximum" : "minimum";
  template <class G, class A, class B>
  G operator()(G g, A a, B b) const {
    if (a == b) return g * G(0.5);
    return (Max ? a < b : b < a) ? G(0) : g;
  }
};

/// d a^b / da times g: 0 where b == 0, else g b a^(b - 1) (torch's
/// pow_backward_self).
struct pow_base_grad {
  static constexpr const char* name = "pow";
  template <class G, class A, class B>
  G operator()(G g, A a, B b) const {
    return b == B(0) ? G(0) : g * G(b * std::pow(a, b - B(1)));
  }
};

/// d a^b / db times g, with y = a^b: 0 where a == 0 and b >= 0, else
/// g y log(a) (torch's pow_backward_exponent).
struct pow_exponent_grad {
  static constexpr const char* name = "pow";
  template <class G, class A, class B>
  G operator()(G g, G y, A a, B b) const {
    return a == A(0) && b >= B(0) ? G(0) : g * (y * G(std::log(a)));
  }
};

/// Sends to operand x (a var, or nothing for a scalar or constant) the
/// element-wise node Op(g, operands...) of the operands' values.
template <class Op, class X, class G, class... Operands>
void send_elementwise(const X& x, const G& g, const Operands&... operands) {
  using T = value_type_of_t<G>;
  if (needs_grad(x))
    send(x, dimsum::detail::make_elementwise<true>(Op{}, g, dimsum::detail::as_expression<decltype(value_of(operands)), T>(
                                                                value_of(operands))...));
}

template <bool Max, class A0, class B0>
auto var_extremum(A0&& a0, B0&& b0) {
  auto a = lift(std::forward<A0>(a0));
  auto b = lift(std::forward<B0>(b0));
  auto value = [&] {
    if constexpr (Max)
      return dimsum::maximum(value_of(a), value_of(b));
    else
      return dimsum::minimum(value_of(a), value_of(b));
  }();
  return record_op(
      std::move(value),
      [a, b](const auto& g, const auto&) {
        send_elementwise<extremum_grad<Max>>(a, g, a, b);
        send_elementwise<extremum_grad<Max>>(b, g, b, a);
      },
      a, b);
}

}  // namespace dimsum::grad::detail

namespace dimsum {

/// |x| of a var; the gradient is g sign(x), as torch's abs_backward
/// (g * sgn(x)): 0 at x = 0 (and at NaN), -g below, g above.
template <grad::detail::var_like V>
auto abs(V&& v) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_unary(
      v, [](T x) { return ops::abs{}(x); }, [](T g, T x, T) { return g * ops::sign{}(x); });
}

/// min(max(x, lo), hi) of a var with scalar bounds, forward as the tensor
/// form (NaN in x or a bound gives NaN, lo > hi gives hi); the gradient is
/// g where lo <= x <= hi (bounds included) and 0 elsewhere (where x or a
/// bound is NaN, and everywhere when lo > hi), as torch's clamp_backward.
template <grad::detail::var_like V, scalar L, scalar H>
auto clamp(V&& v, L lo_in, H hi_in) {
  using T = typename std::remove_cvref_t<V>::value_type;
  const T lo = static_cast<T>(lo_in), hi = static_cast<T>(hi_in);
  return grad::detail::record_unary(
      v, [lo, hi](T x) { return ops::clamp{}(x, lo, hi); },
      [lo, hi](T g, T x, T) { return x >= lo && x <= hi ? g : T(0); });
}

/// a^b element-wise, a or b a var (the other a var, tensor or scalar),
/// forward as the tensor form (std::pow; broadcast by name). The gradients,
/// as torch's pow_backward: to a, g b a^(b - 1), and 0 where b == 0; to b,
/// g a^b log(a), and 0 where a == 0 and b >= 0. So at a = 0: a^2 gives 0,
/// a^1 gives g, a^0 gives 0, a^0.5 gives inf, a^-1 gives -inf. (At a = -0
/// and -inf with b = 0.5 or 1.5 torch computes the power as a square root
/// and differs in sign or NaN; dimsum's forward and gradient use std::pow
/// there, as the tensor form does.)
template <class A, class B>
  requires grad::detail::var_operands<A, B>
auto pow(A&& a0, B&& b0) {
  using grad::detail::value_of;
  auto a = grad::detail::lift(std::forward<A>(a0));
  auto b = grad::detail::lift(std::forward<B>(b0));
  using T = typename std::conditional_t<grad::detail::var_like<decltype(a)>, decltype(a), decltype(b)>::value_type;
  if constexpr (scalar<decltype(b)>) {  // var^p: a unary rule
    const T p = static_cast<T>(b);
    return grad::detail::record_unary(
        a, [p](T x) { return T(std::pow(x, p)); },
        [p](T g, T x, T) { return p == T(0) ? T(0) : g * (p * T(std::pow(x, p - T(1)))); });
  } else {
    return grad::detail::record_op(
        dimsum::pow(value_of(a), value_of(b)),
        [a, b](const auto& g, const auto& out) {
          grad::detail::send_elementwise<grad::detail::pow_base_grad>(a, g, a, b);
          grad::detail::send_elementwise<grad::detail::pow_exponent_grad>(b, g, out, a, b);
        },
        a, b);
  }
}

/// The element-wise minimum of a and b, one a var (the other a var, tensor
/// or scalar), broadcast by name, forward as the tensor form (NaN on
/// either side gives NaN); the gradient goes to the smaller operand, half
/// to each on a tie (and whole to each where one is NaN), as
/// torch.minimum's. For a scalar bound that takes the whole gradient on a
/// tie (torch.clamp's), use `clamp`.
template <class A, class B>
  requires grad::detail::var_operands<A, B>
auto minimum(A&& a, B&& b) {
  return grad::detail::var_extremum<false>(std::forward<A>(a), std::forward<B>(b));
}

/// The element-wise maximum of a and b, as `minimum` with the larger
/// operand taking the gradient (half each on a tie), as torch.maximum's.
template <class A, class B>
  requires grad::detail::var_operands<A, B>
auto maximum(A&& a, B&& b) {
  return grad::detail::var_extremum<true>(std::forward<A>(a), std::forward<B>(b));
}

}  // namespace dimsum
