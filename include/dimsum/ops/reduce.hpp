#pragma once
/// \file
/// Reductions by name: `sum<D...>(t)`, `max<D...>(t)`, `min<D...>(t)`,
/// `mean<D...>(t)`. The result has t's dims without the reduced ones, in t's
/// order; reducing over a dim t lacks is a compile error. max and min over
/// an empty dim throw `shape_error` (as PyTorch does); mean over an empty dim
/// gives NaN.

#include <array>
#include <cstddef>

#include <dimsum/kernels/reduce.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// A lazy reduction of E over the dims in Reduced (a dim_list).
template <kernels::reduce_op Op, class Reduced, class E>
class reduce_expr : public expression_tag {
 public:
  using value_type = value_type_of_t<E>;
  using dims = without_t<dims_of_t<E>, Reduced>;
  static constexpr std::size_t rank = dims::size;

  template <class X>
  explicit reduce_expr(X&& e) : e_(std::forward<X>(e)) {
    constexpr auto pos = positions_in<dims, dims_of_t<E>>();
    const auto in = e_.extents();
    for (std::size_t i = 0; i < rank; ++i) extents_[i] = in[pos[i]];
    if constexpr (Op == kernels::reduce_op::max || Op == kernels::reduce_op::min) {
      constexpr auto rpos = positions_in<Reduced, dims_of_t<E>>();
      for (std::size_t i = 0; i < Reduced::size; ++i)
        if (in[rpos[i]] == 0)
          throw shape_error("max/min over dim '" + std::string(Reduced::names[i]) +
                            "' of extent 0 has no identity; PyTorch raises here too");
    }
  }

  const std::array<std::size_t, rank>& extents() const { return extents_; }
  const auto& operand() const { return e_; }

  template <class Root>
  auto evaluator() const {
    return detail::materializing_evaluator<Root>(*this);
  }
  void eval_to(const strided<value_type, rank>& dst) const {
    using In = dims_of_t<E>;
    auto&& src = detail::materialize(e_);
    // Axes: the output's dims first, then the reduced ones.
    constexpr auto out_pos = positions_in<dims, In>();
    constexpr auto red_pos = positions_in<Reduced, In>();
    constexpr std::size_t n = rank + Reduced::size;
    std::array<std::size_t, n> ext{};
    std::array<std::ptrdiff_t, n> st{};
    const auto in_ext = src.extents();
    const auto in_st = src.strides();
    for (std::size_t i = 0; i < rank; ++i) {
      ext[i] = in_ext[out_pos[i]];
      st[i] = in_st[out_pos[i]];
    }
    for (std::size_t i = 0; i < Reduced::size; ++i) {
      ext[rank + i] = in_ext[red_pos[i]];
      st[rank + i] = in_st[red_pos[i]];
    }
    kernels::reduce_loops(Op, dst.data, dst.strides.data(), rank, ext.data(), n, src.data(), st.data());
  }

 private:
  detail::closure_t<E> e_;
  std::array<std::size_t, rank> extents_{};
};

namespace detail {
template <kernels::reduce_op Op, class E, dimension... Ds>
auto make_reduction(E&& e) {
  using L = dims_of_t<E>;
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else if constexpr (constexpr std::size_t bad = [] {
                         std::size_t i = 0;
                         for (auto n : dim_list<Ds...>::names) {
                           if (find_name(L::names, n) == npos) return i;
                           ++i;
                         }
                         return npos;
                       }();
                       bad != npos) {
    report<reduction_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<at_t<dim_list<Ds...>, bad>>,
                                                    diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (constexpr std::size_t twice = [] {
                         using R = dim_list<Ds...>;
                         for (std::size_t i = 0; i < R::size; ++i)
                           for (std::size_t j = i + 1; j < R::size; ++j)
                             if (R::names[i] == R::names[j]) return j;
                         return npos;
                       }();
                       twice != npos) {
    report<reduction_names_a_dim_twice<diagnostic_name_t<at_t<dim_list<Ds...>, twice>>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else {
    return reduce_expr<Op, dim_list<Ds...>, E>(std::forward<E>(e));
  }
}
}  // namespace detail

/// Sum over the named dims: `sum<d_head>(t)`; `sum<>(t)` is t itself.
template <dimension... Ds, named_expression E>
auto sum(E&& e) {
  return detail::make_reduction<kernels::reduce_op::sum, E, Ds...>(std::forward<E>(e));
}
/// Maximum over the named dims (NaN propagates).
template <dimension... Ds, named_expression E>
auto max(E&& e) {
  return detail::make_reduction<kernels::reduce_op::max, E, Ds...>(std::forward<E>(e));
}
/// Minimum over the named dims (NaN propagates).
template <dimension... Ds, named_expression E>
auto min(E&& e) {
  return detail::make_reduction<kernels::reduce_op::min, E, Ds...>(std::forward<E>(e));
}
/// Arithmetic mean over the named dims.
template <dimension... Ds, named_expression E>
auto mean(E&& e) {
  return detail::make_reduction<kernels::reduce_op::mean, E, Ds...>(std::forward<E>(e));
}

}  // namespace dimsum
