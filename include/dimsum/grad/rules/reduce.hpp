#pragma once
/// \file
/// Reductions on vars: sum, mean, max, min, prod and logsumexp over named
/// dims, and `reduce<"pattern", op>` (ops/reduce_pattern.hpp). The gradient
/// of a reduction is broadcast back over the reduced dims: as is for sum,
/// divided by the count for mean, for max/min shared equally among the
/// elements equal to the extremum (PyTorch's `amax`/`amin` rule), for prod
/// the product of the other elements (PyTorch's rule with zeros: one zero
/// gets the product of the rest, two or more give 0), and for logsumexp
/// the softmax of the slice. any, all and a user's fold have no gradient
/// (a compile error on vars).
///
///     auto loss = dimsum::mean<batch, posn>(err * err);
///     auto pooled = dimsum::reduce<"b (h h2) (w w2) c -> b h w c", "max">(x, h2{2}, w2{2});

#include <array>
#include <cmath>
#include <cstddef>
#include <string_view>
#include <vector>
#include <utility>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/reduce.hpp>
#include <dimsum/ops/reduce_pattern.hpp>

namespace dimsum {

/// Sum of a var over the named dims; its gradient is broadcast back.
template <dimension... Ds, grad::detail::var_like V>
auto sum(V&& v) {
  return grad::detail::record_op(dimsum::sum<Ds...>(v.value()),
                                 [v](const auto& g, const auto&) { v.node()->accumulate(g); }, v);
}

/// Mean of a var over the named dims; its gradient is broadcast back and
/// divided by the number of elements averaged.
template <dimension... Ds, grad::detail::var_like V>
auto mean(V&& v) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_op(dimsum::mean<Ds...>(v.value()), [v](const auto& g, const auto& out) {
    const std::size_t n = out.size() == 0 ? 0 : v.value().size() / out.size();
    if constexpr (is_bf16_v<T>)
      v.node()->accumulate(dimsum::cast<float>(g) / float(n));  // into the float32 sum, unrounded
    else
      v.node()->accumulate(g / T(n));
  }, v);
}

namespace grad::detail {
template <class Fwd, class V>
auto record_extremum(Fwd&& fwd, const V& v) {
  using T = typename V::value_type;
  return record_op(std::forward<Fwd>(fwd), [v](const auto& g, const auto& out) {
    using R = dims_of_t<decltype(out)>;
    const tensor_for_t<T, typename V::dims> hit = dimsum::cast<T>(v.value() == out);
    const tensor_for_t<T, R> ties = dimsum::detail::make_einsum<R>(hit);
    v.node()->accumulate(hit * (g / ties));
  }, v);
}
}  // namespace grad::detail

/// Maximum of a var over the named dims; the gradient goes to the maximal
/// elements (shared equally among ties).
template <dimension... Ds, grad::detail::var_like V>
auto max(V&& v) {
  return grad::detail::record_extremum(dimsum::max<Ds...>(v.value()), v);
}

/// Minimum of a var over the named dims; the gradient goes to the minimal
/// elements (shared equally among ties).
template <dimension... Ds, grad::detail::var_like V>
auto min(V&& v) {
  return grad::detail::record_extremum(dimsum::min<Ds...>(v.value()), v);
}

/// Checker: reduce on a var with an operation that has no gradient.
template <class Operation>
struct reduce_of_a_var_needs_a_differentiable_operation {
  static_assert(detail::always_false<Operation>,
                "dimsum: reduce on a grad::var needs an operation with a gradient: sum, mean, max, min, prod or "
                "logsumexp (any, all and a fold have none; reduce the var's value() instead)");
};

namespace grad::detail {

/// How the gradient of one reduced slice is made from its n elements x(k),
/// the slice's result `out` and the output's gradient g: `dx(k, value)`
/// receives each element's gradient.
enum class slice_rule { sum, mean, extremum, prod, logsumexp, none };

template <class Node>
inline constexpr slice_rule slice_rule_of = slice_rule::none;
template <>
inline constexpr slice_rule slice_rule_of<dimsum::detail::kernel_reduction<kernels::reduce_op::sum>> = slice_rule::sum;
template <>
inline constexpr slice_rule slice_rule_of<dimsum::detail::kernel_reduction<kernels::reduce_op::mean>> = slice_rule::mean;
template <>
inline constexpr slice_rule slice_rule_of<dimsum::detail::kernel_reduction<kernels::reduce_op::max>> =
    slice_rule::extremum;
template <>
inline constexpr slice_rule slice_rule_of<dimsum::detail::kernel_reduction<kernels::reduce_op::min>> =
    slice_rule::extremum;
template <>
inline constexpr slice_rule slice_rule_of<dimsum::detail::functor_reduction<reductions::prod>> = slice_rule::prod;
template <>
inline constexpr slice_rule slice_rule_of<dimsum::detail::functor_reduction<reductions::logsumexp>> =
    slice_rule::logsumexp;

template <slice_rule Rule, class T, class X, class DX>
void slice_gradient(std::size_t n, X&& x, T out, T g, DX&& dx) {
  if constexpr (Rule == slice_rule::sum) {
    for (std::size_t k = 0; k < n; ++k) dx(k, g);
  } else if constexpr (Rule == slice_rule::mean) {
    for (std::size_t k = 0; k < n; ++k) dx(k, g / static_cast<T>(n));
  } else if constexpr (Rule == slice_rule::extremum) {
    std::size_t ties = 0;
    for (std::size_t k = 0; k < n; ++k) ties += x(k) == out ? 1 : 0;
    for (std::size_t k = 0; k < n; ++k) dx(k, x(k) == out ? g / static_cast<T>(ties) : T(0));
  } else if constexpr (Rule == slice_rule::prod) {
    std::size_t zeros = 0, zero_at = 0;
    T rest(1);  // the product of the nonzero elements
    for (std::size_t k = 0; k < n; ++k) {
      if (x(k) == T(0)) {
        ++zeros;
        zero_at = k;
      } else {
        rest *= x(k);
      }
    }
    for (std::size_t k = 0; k < n; ++k) {
      if (zeros == 0)
        dx(k, g * (out / x(k)));
      else
        dx(k, zeros == 1 && k == zero_at ? g * rest : T(0));
    }
  } else if constexpr (Rule == slice_rule::logsumexp) {
    for (std::size_t k = 0; k < n; ++k) dx(k, g * std::exp(x(k) - out));
  }
}

/// The gradient of a reduction of x (dims In, row-major, extents `ext`)
/// over the dims In has and Out lacks, whose result `out` and gradient g
/// are laid out row-major in the dims Out (extents `out_ext`; Out's names
/// are In's others, in any order): each slice's elements get their
/// gradient by Rule, into dx (laid out as x).
template <slice_rule Rule, class In, class Out, class T>
void reduction_backward(const T* x, const std::array<std::size_t, In::size>& ext, const T* out, const T* g,
                        const std::array<std::size_t, Out::size>& out_ext, T* dx) {
  constexpr std::size_t n_in = In::size;
  const auto in_st = dimsum::detail::row_major_strides(ext);
  const auto out_st = dimsum::detail::row_major_strides(out_ext);
  constexpr auto out_pos = positions_in<In, Out>();  // each In dim's position in Out, npos if reduced
  for (std::size_t i = 0; i < n_in; ++i)
    if (ext[i] == 0) return;
  // The offsets of one slice's elements: the reduced dims, row-major.
  std::size_t n = 1;
  for (std::size_t i = 0; i < n_in; ++i)
    if (out_pos[i] == dimsum::detail::npos) n *= ext[i];
  std::vector<std::ptrdiff_t> offsets(n);
  {
    std::array<std::size_t, n_in> r{};
    for (std::size_t k = 0; k < n; ++k) {
      std::ptrdiff_t o = 0;
      for (std::size_t i = 0; i < n_in; ++i)
        if (out_pos[i] == dimsum::detail::npos) o += static_cast<std::ptrdiff_t>(r[i]) * in_st[i];
      offsets[k] = o;
      for (std::size_t i = n_in; i-- > 0;) {
        if (out_pos[i] != dimsum::detail::npos) continue;
        if (++r[i] < ext[i]) break;
        r[i] = 0;
      }
    }
  }
  // Every slice: an odometer over the kept dims.
  std::array<std::size_t, n_in> idx{};
  while (true) {
    std::ptrdiff_t base = 0, o = 0;
    for (std::size_t i = 0; i < n_in; ++i) {
      if (out_pos[i] == dimsum::detail::npos) continue;
      base += static_cast<std::ptrdiff_t>(idx[i]) * in_st[i];
      o += static_cast<std::ptrdiff_t>(idx[i]) * out_st[out_pos[i]];
    }
    slice_gradient<Rule, T>(
        n, [&](std::size_t k) { return x[base + offsets[k]]; }, out[o], g[o],
        [&](std::size_t k, T v) { dx[base + offsets[k]] = v; });
    std::size_t d = n_in;
    while (true) {
      if (d == 0) return;
      --d;
      if (out_pos[d] == dimsum::detail::npos) continue;
      if (++idx[d] < ext[d]) break;
      idx[d] = 0;
    }
  }
}

/// Records the reduction `fwd` of v over what In has and Out lacks (flat
/// dims: v's value seen as In, the result as Out, with extents ext and
/// out_ext), its gradient by Rule.
template <slice_rule Rule, class In, class Out, class Fwd, class V>
auto record_reduction(Fwd&& fwd, const V& v, const std::array<std::size_t, In::size>& ext,
                      const std::array<std::size_t, Out::size>& out_ext) {
  using T = typename V::value_type;
  return record_op(std::forward<Fwd>(fwd), [v, ext, out_ext](const auto& g, const auto& out) {
    auto dx = tensor_for_t<T, In>::from_extents(ext);
    reduction_backward<Rule, In, Out>(v.value().data(), ext, out.data(), g.data(), out_ext, dx.data());
    v.node()->accumulate_raw(dx.data());
  }, v);
}

template <slice_rule Rule, class Fwd, class V>
auto record_named_reduction(Fwd&& fwd, const V& v) {
  using In = typename V::dims;
  using Out = dims_of_t<Fwd>;
  if constexpr (is_invalid_v<Fwd>)
    return invalid_expression{};
  else
    return record_reduction<Rule, In, Out>(std::forward<Fwd>(fwd), v, v.extents(),
                                           dimsum::detail::permute<In, Out>(v.extents()));
}

}  // namespace grad::detail

/// Product of a var over the named dims; each element's gradient is the
/// product of the others (PyTorch's rule, zeros included).
template <dimension... Ds, grad::detail::var_like V>
auto prod(V&& v) {
  return grad::detail::record_named_reduction<grad::detail::slice_rule::prod>(dimsum::prod<Ds...>(v.value()), v);
}

/// log(sum(exp(v))) over the named dims; the gradient is the softmax of
/// each slice times the output's gradient.
template <dimension... Ds, grad::detail::var_like V>
auto logsumexp(V&& v) {
  return grad::detail::record_named_reduction<grad::detail::slice_rule::logsumexp>(dimsum::logsumexp<Ds...>(v.value()),
                                                                                  v);
}

/// einops' reduce on a var (a named operation with a gradient: sum, mean,
/// max, min, prod, logsumexp), recorded as one node; the flat dims come
/// from the same pattern resolution as the forward.
template <fixed_string S, fixed_string Op, grad::detail::var_like V, class... Dims>
auto reduce(V&& v, Dims&&... dims) {
  using Node = detail::reduction_node_named_t<Op>;
  if constexpr (std::is_void_v<Node>) {
    detail::report<reduce_operation_is_not_a_reduction<label<Op>>>();
    return invalid_expression{};
  } else if constexpr (grad::detail::slice_rule_of<Node> == grad::detail::slice_rule::none) {
    detail::report<reduce_of_a_var_needs_a_differentiable_operation<label<Op>>>();
    return invalid_expression{};
  } else {
    auto fwd = dimsum::reduce<S, Op>(v.value(), dims...);
    if constexpr (is_invalid_v<decltype(fwd)>) {
      return invalid_expression{};
    } else {
      const auto f = detail::flats_of<S, true, false>(v.value(), std::remove_cvref_t<Dims>(dims)...);
      using F = decltype(f);
      return grad::detail::record_reduction<grad::detail::slice_rule_of<Node>, typename F::in, typename F::out>(
          std::move(fwd), v, f.in_extents, f.out_extents);
    }
  }
}

/// reduce on a var with a fold: a compile error (a fold has no gradient).
template <fixed_string S, grad::detail::var_like V, class R, class... Dims>
auto reduce(V&&, R&&, Dims&&...) {
  detail::report<reduce_of_a_var_needs_a_differentiable_operation<std::remove_cvref_t<R>>>();
  return invalid_expression{};
}

}  // namespace dimsum
