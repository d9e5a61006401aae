#pragma once
/// \file
/// `softmax<D>(x, sinks)`: softmax along D with one more logit per slice in
/// the denominator only, an attention sink (gpt-oss, StreamingLLM):
///
///     y[..., j] = exp(x[..., j]) / (exp(sinks[...]) + sum_k exp(x[..., k]))
///
/// the softmax of x with the sink appended along D, with the sink's own
/// weight dropped (the rows of y sum to less than 1). `sinks` has some of
/// x's dims other than D, at least one (a logit per head), broadcast by
/// name. A slice whose values and sink are all -inf gives NaN, as softmax;
/// a finite sink with values all -inf gives zeros. Inside attention the
/// fused kernel runs it (plan/fusion_patterns.hpp); its gradient on vars is
/// in grad/rules/sink_softmax.hpp.

#include <cstddef>
#include <type_traits>
#include <utility>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/dim_list.hpp>
#include <dimsum/ops/elementwise.hpp>
#include <dimsum/ops/math.hpp>
#include <dimsum/ops/reduce.hpp>
#include <dimsum/plan/fusion_traits.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

// --- compile-time errors of softmax<D>(x, sinks) (docs/errors.md) ---
template <class Dim, class SinkDims, class Dims>
struct softmax_sinks_need_dims_of_the_tensor_other_than_the_softmax_dim {
  static_assert(detail::always_false<Dim, SinkDims, Dims>,
                "dimsum: softmax<D>(x, sinks): the sinks must have at least one dim, and only dims of x other than D "
                "(one logit per head, say)");
};
template <class X, class Sinks>
struct softmax_sinks_need_the_value_type_of_the_tensor {
  static_assert(detail::always_false<X, Sinks>,
                "dimsum: softmax<D>(x, sinks): the sinks must have the value type of x");
};

namespace detail {

/// Whether the dims S are at least one, all dims of X, and not D.
template <class D, class S, class X>
inline constexpr bool sink_dims_fit = S::size > 0 && index_of<S>(D::name.view()) == npos && [] {
  for (auto n : S::names)
    if (find_name(X::names, n) == npos) return false;
  return true;
}();

/// Per slice of x along D (tensors over x's dims without D): the largest
/// of its values and its sink, m; the sink's term exp(sink - m); and the
/// denominator, that term plus sum_j exp(x_j - m).
template <class R>
struct sink_softmax_slices {
  R m, sink_term, denominator;
};

/// The slices' parts of softmax<D>(x, sinks), x a tensor. Mixed-rank
/// operands put the sliced tensor first: `sinks - m` trips a false
/// -Warray-bounds in g++ 12 at -O3, `m - sinks` does not.
template <class D, class X, class S>
auto sink_softmax_parts(const X& x, const S& sinks) {
  using T = value_type_of_t<X>;
  using R = tensor_for_t<T, without_t<dims_of_t<X>, dim_list<D>>>;
  const R largest = dimsum::max<D>(x);  // evaluated: a reduction inside a broadcast is not read lazily
  R m = maximum(largest, sinks);
  const R gap = m - sinks;
  R sink_term = exp(gap * T(-1));
  const R sums = dimsum::sum<D>(exp(x - m));
  R denominator = sums + sink_term;
  return sink_softmax_slices<R>{std::move(m), std::move(sink_term), std::move(denominator)};
}

/// The weight each slice's sink takes, exp(sink - m) / denominator
/// (the gradient of the sinks reads it).
template <class D, class X, class S>
auto sink_weights(const X& x, const S& sinks) {
  const auto parts = sink_softmax_parts<D>(x, sinks);
  return eval(parts.sink_term / parts.denominator);
}

}  // namespace detail

/// A lazy softmax of E along dim D with the sink logits S.
template <dimension D, class E, class S>
class sink_softmax_expr : public expression_tag {
 public:
  using value_type = value_type_of_t<E>;
  using dims = dims_of_t<E>;
  using dim_type = D;
  static constexpr std::size_t rank = dims::size;
  using fusion_traits = plan::sink_softmax_node<D, E, S>;

  template <class X, class Y>
  sink_softmax_expr(X&& e, Y&& sinks) : e_(std::forward<X>(e)), s_(std::forward<Y>(sinks)) {}

  auto extents() const { return e_.extents(); }
  const auto& operand() const { return e_; }
  const auto& sinks() const { return s_; }

  template <class Root>
  auto evaluator() const {
    return detail::materializing_evaluator<Root>(*this);
  }
  void eval_to(const strided<value_type, rank>& dst) const {
    const tensor_for_t<value_type, dims> x = e_;
    const auto parts = detail::sink_softmax_parts<D>(x, s_);
    (exp(x - parts.m) / parts.denominator).eval_to(dst);
  }

 private:
  detail::closure_t<E> e_;
  detail::closure_t<S> s_;
};

/// Softmax along dim D with a sink logit per slice in the denominator:
/// `softmax<k_posn>(scores, sinks)` with `sinks` over (say) the heads. An
/// lvalue operand is held by reference, an rvalue moved in. Sinks with a
/// dim x lacks, with D, or with no dim, or of another value type, are
/// compile errors.
template <dimension D, named_expression E, named_expression S>
auto softmax(E&& e, S&& sinks) {
  if constexpr (is_invalid_v<E> || is_invalid_v<S>) {
    return invalid_expression{};
  } else if constexpr (!contains_v<dims_of_t<E>, D>) {
    detail::report<softmax_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<D>, diagnostic_dims_t<dims_of_t<E>>>>();
    return invalid_expression{};
  } else if constexpr (!detail::sink_dims_fit<D, dims_of_t<S>, dims_of_t<E>>) {
    detail::report<softmax_sinks_need_dims_of_the_tensor_other_than_the_softmax_dim<
        diagnostic_name_t<D>, diagnostic_dims_t<dims_of_t<S>>, diagnostic_dims_t<dims_of_t<E>>>>();
    return invalid_expression{};
  } else if constexpr (!std::is_same_v<value_type_of_t<E>, value_type_of_t<S>>) {
    detail::report<softmax_sinks_need_the_value_type_of_the_tensor<value_type_of_t<E>, value_type_of_t<S>>>();
    return invalid_expression{};
  } else {
    return sink_softmax_expr<D, E, S>(std::forward<E>(e), std::forward<S>(sinks));
  }
}

}  // namespace dimsum
