#pragma once
/// \file
/// Reductions by name: `sum<D...>(t)`, `max<D...>(t)`, `min<D...>(t)`,
/// `mean<D...>(t)`, `prod<D...>(t)`, `any<D...>(t)`, `all<D...>(t)`,
/// `logsumexp<D...>(t)`. The result has t's dims without the reduced ones,
/// in t's order; reducing over a dim t lacks is a compile error. max and min
/// over an empty dim throw `shape_error` (as PyTorch does); mean over an
/// empty dim gives NaN; prod gives 1, any false, all true and logsumexp
/// -inf there, as in PyTorch. The sum and the product of a bool tensor or
/// of an integer type narrower than 64 bits are int64 (as torch.sum and
/// torch.prod); the mean of an integer tensor is a double (as numpy's).

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <dimsum/kernels/reduce.hpp>
#include <dimsum/ops/detail/wrapping.hpp>
#include <dimsum/ops/elementwise.hpp>
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

namespace reductions {
/// A left fold of the elements from Identity with Step::apply<T>: the
/// shape of prod and integer_sum.
template <int Identity, class Step>
struct accumulation {
  template <class T>
  using result_t = T;
  template <class T, class Read>
  static T reduce(std::size_t n, Read&& read) {
    T acc(Identity);
    for (std::size_t i = 0; i < n; ++i) acc = Step::template apply<T>(acc, read(i));
    return acc;
  }
};
struct wrapping_times {
  template <class T>
  static T apply(T a, T b) { return detail::wrapping_mul<T>(a, b); }
};
struct wrapping_plus {
  template <class T>
  static T apply(T a, T b) { return detail::wrapping_add<T>(a, b); }
};
/// The product (1 over an empty dim); an integer product wraps around on
/// overflow, as torch.prod's int64 does.
struct prod : accumulation<1, wrapping_times> {
  static constexpr const char* name = "prod";
};
/// The sum of integers (0 over an empty dim), wrapping around on overflow
/// as torch.sum's int64 does; floating-point sums run in the kernel
/// (kernels/reduce.hpp), whose integer accumulation could overflow.
struct integer_sum : accumulation<0, wrapping_plus> {
  static constexpr const char* name = "sum";
};
/// any (Any = true: whether some element is nonzero) and all (Any = false:
/// whether every element is): the first element whose truth equals Any
/// decides; an empty dim gives !Any. NaN is nonzero.
template <bool Any>
struct truth_reduction {
  template <class T>
  using result_t = bool;
  template <class T, class Read>
  static bool reduce(std::size_t n, Read&& read) {
    for (std::size_t i = 0; i < n; ++i)
      if ((read(i) != T(0)) == Any) return Any;
    return !Any;
  }
};
/// Whether any element is nonzero (NaN is nonzero; false over an empty dim).
struct any : truth_reduction<true> {
  static constexpr const char* name = "any";
};
/// Whether every element is nonzero (true over an empty dim).
struct all : truth_reduction<false> {
  static constexpr const char* name = "all";
};
/// log(sum(exp(x))), computed as m + log(sum(exp(x - m))) with m the
/// maximum, as torch.logsumexp: NaN if any element is NaN, +inf if one is
/// +inf, -inf if all are -inf or the dim is empty.
struct logsumexp {
  static constexpr const char* name = "logsumexp";
  template <class T>
  using result_t = decltype(std::log(std::declval<T>()));
  template <class T, class Read>
  static result_t<T> reduce(std::size_t n, Read&& read) {
    using R = result_t<T>;
    R m = -std::numeric_limits<R>::infinity();
    for (std::size_t i = 0; i < n; ++i) {
      const R v = static_cast<R>(read(i));
      if (std::isnan(v)) return v;
      if (v > m) m = v;
    }
    if (std::isinf(m)) return m;
    R s(0);
    for (std::size_t i = 0; i < n; ++i) s += std::exp(static_cast<R>(read(i)) - m);
    return m + std::log(s);
  }
};
}  // namespace reductions

/// A user's associative operation as a reduction: the elements of each
/// output position folded left to right (row-major order of the reduced
/// dims) with `f`, starting from `identity`, whose type is the result's:
/// `fold{[](float a, float b) { return a * b; }, 1.0f}`. An empty dim gives
/// the identity. Used by `reduce<"pattern">(x, fold{f, identity})`.
template <class F, class T>
struct fold {
  F f;
  T identity;
  template <class U>
  using result_t = T;
  template <class U, class Read>
  T reduce(std::size_t n, Read&& read) const {
    T acc = identity;
    for (std::size_t i = 0; i < n; ++i) acc = static_cast<T>(f(acc, read(i)));
    return acc;
  }
};
template <class F, class T>
fold(F, T) -> fold<F, T>;

namespace detail {
/// The offset of element k of a block (extents, strides; row-major, the
/// last dim fastest). Reading k right after k - 1 (as every reduction
/// does, logsumexp in two passes) steps an odometer; any other k is
/// decomposed afresh.
template <std::size_t R>
struct reduced_offsets {
  std::array<std::size_t, R> extents{};
  std::array<std::ptrdiff_t, R> strides{};
  std::array<std::size_t, R> idx{};
  std::size_t next = 0;
  std::ptrdiff_t off = 0;

  std::ptrdiff_t offset(std::size_t k) {
    if (k != next) {
      off = 0;
      for (std::size_t i = R, r = k; i-- > 0; r /= extents[i]) {
        idx[i] = r % extents[i];
        off += static_cast<std::ptrdiff_t>(idx[i]) * strides[i];
      }
    }
    const std::ptrdiff_t o = off;
    for (std::size_t i = R; i-- > 0;) {
      off += strides[i];
      if (++idx[i] < extents[i]) break;
      off -= static_cast<std::ptrdiff_t>(extents[i]) * strides[i];
      idx[i] = 0;
    }
    next = k + 1;
    return o;
  }
};
}  // namespace detail

/// A lazy reduction of E over the dims in Reduced (a dim_list) by a
/// reduction functor (`reductions::prod`, `any`, `all`, `logsumexp`, or a
/// `fold`): `op.reduce<T>(n, read)` folds the n elements
/// `read(i)` of one output position.
template <class Op, class Reduced, class E>
class reduction_expr : public expression_tag {
 public:
  using value_type = typename Op::template result_t<value_type_of_t<E>>;
  using dims = without_t<dims_of_t<E>, Reduced>;
  static constexpr std::size_t rank = dims::size;

  template <class X>
  explicit reduction_expr(X&& e, Op op = {}) : e_(std::forward<X>(e)), op_(std::move(op)) {
    constexpr auto pos = positions_in<dims, dims_of_t<E>>();
    const auto in = e_.extents();
    for (std::size_t i = 0; i < rank; ++i) extents_[i] = in[pos[i]];
  }

  const std::array<std::size_t, rank>& extents() const { return extents_; }
  const auto& operand() const { return e_; }

  template <class Root>
  auto evaluator() const {
    return detail::materializing_evaluator<Root>(*this);
  }
  void eval_to(const strided<value_type, rank>& dst) const {
    using In = dims_of_t<E>;
    using T = value_type_of_t<E>;
    auto&& src = detail::materialize(e_);
    constexpr auto out_pos = positions_in<dims, In>();
    constexpr auto red_pos = positions_in<Reduced, In>();
    const auto in_ext = src.extents();
    const auto in_st = src.strides();
    for (std::size_t i = 0; i < rank; ++i)
      if (in_ext[out_pos[i]] == 0) return;
    // One output position's elements, in row-major order of the reduced
    // dims, read through an odometer: no table of offsets (which took 8
    // bytes per reduced element).
    detail::reduced_offsets<Reduced::size> reader{};
    for (std::size_t i = 0; i < Reduced::size; ++i) {
      reader.extents[i] = in_ext[red_pos[i]];
      reader.strides[i] = in_st[red_pos[i]];
    }
    const std::size_t count = detail::checked_product(reader.extents.data(), Reduced::size);
    std::array<std::size_t, rank> idx{};
    while (true) {
      // An integer offset: a source empty along a reduced dim has no
      // buffer, and no offset may be added to its null pointer.
      std::ptrdiff_t base = 0;
      value_type* out = dst.data;
      for (std::size_t i = 0; i < rank; ++i) {
        base += static_cast<std::ptrdiff_t>(idx[i]) * in_st[out_pos[i]];
        out += static_cast<std::ptrdiff_t>(idx[i]) * dst.strides[i];
      }
      *out = op_.template reduce<T>(count, [&](std::size_t k) { return src.data()[base + reader.offset(k)]; });
      std::size_t d = rank;
      while (true) {
        if (d == 0) return;
        --d;
        if (++idx[d] < extents_[d]) break;
        idx[d] = 0;
      }
    }
  }

 private:
  detail::closure_t<E> e_;
  [[no_unique_address]] Op op_;
  std::array<std::size_t, rank> extents_{};
};

namespace detail {
template <kernels::reduce_op Op>
struct kernel_reduction {
  template <class Reduced, class E>
  using node = reduce_expr<Op, Reduced, E>;
};
template <class Op>
struct functor_reduction {
  template <class Reduced, class E>
  using node = reduction_expr<Op, Reduced, E>;
};

template <class Node, class E, dimension... Ds, class... OpArgs>
auto make_reduction_node(E&& e, OpArgs&&... op) {
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
  } else if constexpr ((std::is_same_v<Node, kernel_reduction<kernels::reduce_op::sum>> ||
                        std::is_same_v<Node, functor_reduction<reductions::prod>>) &&
                       std::is_integral_v<value_type_of_t<E>> && sizeof(value_type_of_t<E>) < sizeof(std::int64_t)) {
    // A sum or product of bools or of narrower integers is an int64, as
    // torch.sum and torch.prod: a count of bools (not a bool "or"), no
    // wrapping of a uint8 image's sum at 256.
    return make_reduction_node<Node, decltype(dimsum::cast<std::int64_t>(std::forward<E>(e))), Ds...>(
        dimsum::cast<std::int64_t>(std::forward<E>(e)));
  } else if constexpr (std::is_same_v<Node, kernel_reduction<kernels::reduce_op::sum>> &&
                       std::is_integral_v<value_type_of_t<E>>) {
    // An integer sum wraps around on overflow (as torch.sum's), which the
    // kernel's signed accumulation would not: the functor sum.
    return make_reduction_node<functor_reduction<reductions::integer_sum>, E, Ds...>(std::forward<E>(e));
  } else if constexpr (std::is_same_v<Node, kernel_reduction<kernels::reduce_op::mean>> &&
                       std::is_integral_v<value_type_of_t<E>>) {
    // A mean of integers is a double, as numpy's (torch refuses it): no
    // truncating division, and NaN over an empty dim, not a division by 0.
    return make_reduction_node<Node, decltype(dimsum::cast<double>(std::forward<E>(e))), Ds...>(
        dimsum::cast<double>(std::forward<E>(e)));
  } else {
    return typename Node::template node<dim_list<Ds...>, E>(std::forward<E>(e), std::forward<OpArgs>(op)...);
  }
}
template <kernels::reduce_op Op, class E, dimension... Ds>
auto make_reduction(E&& e) {
  return make_reduction_node<kernel_reduction<Op>, E, Ds...>(std::forward<E>(e));
}
}  // namespace detail

/// Sum over the named dims: `sum<d_head>(t)`; `sum<>(t)` is t itself.
template <dimension... Ds, named_expression E>
auto sum(E& e DIMSUM_LIFETIMEBOUND) {
  return detail::make_reduction<kernels::reduce_op::sum, E&, Ds...>(e);
}
template <dimension... Ds, named_expression E>
  requires(!std::is_lvalue_reference_v<E>)
auto sum(E&& e) {
  return detail::make_reduction<kernels::reduce_op::sum, E, Ds...>(std::forward<E>(e));
}
/// Maximum over the named dims (NaN propagates).
template <dimension... Ds, named_expression E>
auto max(E& e DIMSUM_LIFETIMEBOUND) {
  return detail::make_reduction<kernels::reduce_op::max, E&, Ds...>(e);
}
template <dimension... Ds, named_expression E>
  requires(!std::is_lvalue_reference_v<E>)
auto max(E&& e) {
  return detail::make_reduction<kernels::reduce_op::max, E, Ds...>(std::forward<E>(e));
}
/// Minimum over the named dims (NaN propagates).
template <dimension... Ds, named_expression E>
auto min(E& e DIMSUM_LIFETIMEBOUND) {
  return detail::make_reduction<kernels::reduce_op::min, E&, Ds...>(e);
}
template <dimension... Ds, named_expression E>
  requires(!std::is_lvalue_reference_v<E>)
auto min(E&& e) {
  return detail::make_reduction<kernels::reduce_op::min, E, Ds...>(std::forward<E>(e));
}
/// Arithmetic mean over the named dims.
template <dimension... Ds, named_expression E>
auto mean(E& e DIMSUM_LIFETIMEBOUND) {
  return detail::make_reduction<kernels::reduce_op::mean, E&, Ds...>(e);
}
template <dimension... Ds, named_expression E>
  requires(!std::is_lvalue_reference_v<E>)
auto mean(E&& e) {
  return detail::make_reduction<kernels::reduce_op::mean, E, Ds...>(std::forward<E>(e));
}
/// Product over the named dims (1 over an empty dim): `prod<posn>(t)`.
template <dimension... Ds, named_expression E>
auto prod(E&& e) {
  return detail::make_reduction_node<detail::functor_reduction<reductions::prod>, E, Ds...>(std::forward<E>(e));
}
/// Whether any element over the named dims is nonzero (NaN counts; false
/// over an empty dim); a bool expression: `any<posn>(isnan(t))`.
template <dimension... Ds, named_expression E>
auto any(E&& e) {
  return detail::make_reduction_node<detail::functor_reduction<reductions::any>, E, Ds...>(std::forward<E>(e));
}
/// Whether every element over the named dims is nonzero (true over an
/// empty dim); a bool expression: `all<posn>(t > 0.0f)`.
template <dimension... Ds, named_expression E>
auto all(E&& e) {
  return detail::make_reduction_node<detail::functor_reduction<reductions::all>, E, Ds...>(std::forward<E>(e));
}
/// log(sum(exp(t))) over the named dims, stable (the maximum is taken out
/// first), as torch.logsumexp: NaN if an element is NaN, +inf if one is
/// +inf, -inf if all are -inf or a reduced dim is empty: `logsumexp<k_posn>(scores)`.
template <dimension... Ds, named_expression E>
auto logsumexp(E&& e) {
  return detail::make_reduction_node<detail::functor_reduction<reductions::logsumexp>, E, Ds...>(std::forward<E>(e));
}

}  // namespace dimsum
