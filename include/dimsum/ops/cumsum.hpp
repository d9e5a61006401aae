#pragma once
/// \file
/// `cumsum<D>(t)`: the running sum along the named dim D, torch.cumsum(t,
/// dim): element i along D is the sum of elements 0..i. The result has t's
/// dims. As in PyTorch, bool and integer inputs accumulate and give int64,
/// and a float input accumulates in double (torch's CPU accumulator) and is
/// rounded to its own type at each element; an int64 sum wraps around past
/// 2^63, as torch's (ops/detail/wrapping.hpp). A dim t lacks is a compile
/// error.

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <dimsum/ops/detail/wrapping.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// A lazy cumulative sum of E along dim D; Reverse sums from the end
/// (element i is the sum of elements i..n-1: the gradient of cumsum).
template <dimension D, class E, bool Reverse = false>
class cumsum_expr : public expression_tag {
  using in_type = value_type_of_t<E>;
  using acc_type = std::conditional_t<std::is_floating_point_v<in_type>,
                                      std::conditional_t<(sizeof(in_type) > sizeof(double)), in_type, double>,
                                      std::int64_t>;

 public:
  using value_type = std::conditional_t<std::is_floating_point_v<in_type>, in_type, std::int64_t>;
  using dims = dims_of_t<E>;
  static constexpr std::size_t rank = dims::size;
  static constexpr std::size_t axis = index_of<dims>(D::name.view());

  template <class X>
  explicit cumsum_expr(X&& e) : e_(std::forward<X>(e)) {}

  auto extents() const { return e_.extents(); }
  const auto& operand() const { return e_; }

  template <class Root>
  auto evaluator() const {
    return detail::materializing_evaluator<Root>(*this);
  }
  /// One running sum per line along D, read from the operand in place (a
  /// tensor or view) or from its evaluation.
  void eval_to(const strided<value_type, rank>& dst) const {
    auto&& src = detail::materialize(e_);
    const auto ext = src.extents();
    const auto st = src.strides();
    for (std::size_t i = 0; i < rank; ++i)
      if (ext[i] == 0) return;
    const std::size_t n = ext[axis];
    std::array<std::size_t, rank> idx{};
    while (true) {
      std::ptrdiff_t in = 0;
      value_type* out = dst.data;
      for (std::size_t i = 0; i < rank; ++i) {
        in += static_cast<std::ptrdiff_t>(idx[i]) * st[i];
        out += static_cast<std::ptrdiff_t>(idx[i]) * dst.strides[i];
      }
      acc_type acc(0);
      for (std::size_t step = 0; step < n; ++step) {
        const auto k = static_cast<std::ptrdiff_t>(Reverse ? n - 1 - step : step);
        acc = detail::wrapping_add(acc, static_cast<acc_type>(src.data()[in + k * st[axis]]));
        out[k * dst.strides[axis]] = static_cast<value_type>(acc);
      }
      // Odometer over the dims other than D.
      std::size_t d = rank;
      while (true) {
        if (d == 0) return;
        --d;
        if (d == axis) continue;
        if (++idx[d] < ext[d]) break;
        idx[d] = 0;
      }
    }
  }

 private:
  detail::closure_t<E> e_;
};

namespace detail {
template <dimension D, class E>
auto cumsum_impl(E&& e) {
  using L = dims_of_t<E>;
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else if constexpr (!contains_v<L, D>) {
    report<argument_is_not_a_dim_of_the_tensor<diagnostic_name_t<D>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else {
    return cumsum_expr<D, E>(std::forward<E>(e));
  }
}
}  // namespace detail

/// The running sum along D, torch.cumsum(t, dim): `cumsum<posn>(x)` has x's
/// dims; element i along posn sums elements 0..i. bool and integer inputs
/// give int64 (as torch); float and double keep their type, accumulated in
/// double. NaN and inf propagate to the end of their line. D must be a dim
/// of t (`argument_is_not_a_dim_of_the_tensor`). Lazy: an lvalue operand is
/// held by reference (DIMSUM_LIFETIMEBOUND), an rvalue moved in.
template <dimension D, named_expression E>
auto cumsum(E& e DIMSUM_LIFETIMEBOUND) {
  return detail::cumsum_impl<D>(e);
}
template <dimension D, named_expression E>
  requires(!std::is_lvalue_reference_v<E>)
auto cumsum(E&& e) {
  return detail::cumsum_impl<D>(std::forward<E>(e));
}

}  // namespace dimsum
