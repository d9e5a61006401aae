#pragma once
/// \file
/// Element-wise operations with strict broadcasting by name: `+ - * /`,
/// unary minus, `exp`, `sqrt`, comparisons, `where`, `cast`, `outer`, and
/// scalar operands.
///
/// Shape rule (DESIGN.md §5): the result has the left operand's dims, then
/// the right operand's dims that the left lacks, in the right operand's
/// order. Shared dims must agree in extent (static: compile error; dynamic:
/// `shape_error` when the expression is built). Two tensors that share no
/// dim do not combine (compile error) unless one is a scalar or rank 0, or
/// the outer product is asked for with `outer(a, b)`.

#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <dimsum/core/bf16.hpp>
#include <dimsum/kernels/detail/bf16_convert.hpp>
#include <dimsum/kernels/vector_math.hpp>
#include <dimsum/ops/detail/wrapping.hpp>
#include <dimsum/plan/fusion_traits.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// A scalar as a rank-0 expression.
template <class T>
struct scalar_expr : expression_tag {
  using value_type = T;
  using dims = dim_list<>;
  static constexpr std::size_t rank = 0;
  using fusion_traits = plan::scalar_node;
  T value;

  explicit scalar_expr(T v) : value(v) {}
  std::array<std::size_t, 0> extents() const { return {}; }

  struct evaluator_type {
    T value;
    void seek(const std::size_t*) {}
    T operator[](std::size_t) const { return value; }
    bool merges(std::size_t, std::size_t) const { return true; }
  };
  template <class Root>
  evaluator_type evaluator() const {
    return {value};
  }
  void eval_to(const strided<T, 0>& dst) const { *dst.data = value; }
};

/// Checker: an element-wise operation between tensors that share no dim,
/// where a dim of one is the other's dim under a longer name (`posn` and
/// `q_posn`): `Fix` is the rename that makes them share it.
template <class Left, class Right, class Fix>
struct elementwise_operands_share_no_dim_did_you_mean_rename {
  static_assert(detail::always_false<Left, Right, Fix>,
                "dimsum: element-wise operation between tensors that share no dim, but one has a dim named like a dim "
                "of the other; if they are the same axis, rename one as the last argument shows (e.g. "
                "dimsum::rename<posn, q_posn>(mask)); if an outer product is meant, use dimsum::outer(a, b)");
};

namespace detail {
/// A math function `f` of one element: of a bf16, computed in float32 and
/// rounded to bf16 once, so that the result keeps the operand's value type
/// (as PyTorch's functions of bfloat16 tensors); of any other type, `f(a)`.
template <class A, class F>
auto bf16_math(A a, F f) {
  if constexpr (std::is_same_v<A, bf16>)
    return bf16(f(static_cast<float>(a)));
  else
    return f(a);
}
}  // namespace detail

namespace ops {
// Functors name the operation: the planner recognises them (e.g. a scale
// `* s` or `/ s` in front of a softmax) and errors quote `name`.
// Signed integers wrap around on overflow (ops/detail/wrapping.hpp), as
// PyTorch's integer tensors do, instead of being undefined behaviour.
struct plus { static constexpr const char* name = "element-wise +"; template <class A, class B> auto operator()(A a, B b) const { using R = ::dimsum::detail::arithmetic_t<A, B>; return ::dimsum::detail::wrapping_add<R>(a, b); } };
struct minus { static constexpr const char* name = "element-wise -"; template <class A, class B> auto operator()(A a, B b) const { using R = ::dimsum::detail::arithmetic_t<A, B>; return ::dimsum::detail::wrapping_sub<R>(a, b); } };
struct multiplies { static constexpr const char* name = "element-wise *"; template <class A, class B> auto operator()(A a, B b) const { using R = ::dimsum::detail::arithmetic_t<A, B>; return ::dimsum::detail::wrapping_mul<R>(a, b); } };
// Integer division checks its divisor (zero throws dimsum::error, -1 wraps);
// floating-point division is the plain `a / b`, unchecked.
struct divides { static constexpr const char* name = "element-wise /"; template <class A, class B> auto operator()(A a, B b) const { using R = ::dimsum::detail::arithmetic_t<A, B>; return ::dimsum::detail::wrapping_div<R>(a, b); } };
struct negate { static constexpr const char* name = "unary -"; template <class A> A operator()(A a) const { return static_cast<A>(::dimsum::detail::wrapping_neg<::dimsum::detail::arithmetic_t<A, A>>(a)); } };
// exp and sqrt of an integer are double (std::exp's type), as the other
// math functions' (ops/math.hpp), not truncated back to the integer; of a
// bf16, bf16 (`bf16_math`).
struct exp { static constexpr const char* name = "exp"; static constexpr auto vector_fn = kernels::math_fn::exp; template <class A> auto operator()(A a) const { return ::dimsum::detail::bf16_math(a, [](auto x) { return std::exp(x); }); } };
struct sqrt { static constexpr const char* name = "sqrt"; template <class A> auto operator()(A a) const { return ::dimsum::detail::bf16_math(a, [](auto x) { return std::sqrt(x); }); } };
struct less { static constexpr const char* name = "<"; template <class A, class B> bool operator()(A a, B b) const { return a < b; } };
struct less_equal { static constexpr const char* name = "<="; template <class A, class B> bool operator()(A a, B b) const { return a <= b; } };
struct greater { static constexpr const char* name = ">"; template <class A, class B> bool operator()(A a, B b) const { return a > b; } };
struct greater_equal { static constexpr const char* name = ">="; template <class A, class B> bool operator()(A a, B b) const { return a >= b; } };
struct equal_to { static constexpr const char* name = "=="; template <class A, class B> bool operator()(A a, B b) const { return a == b; } };
struct not_equal_to { static constexpr const char* name = "!="; template <class A, class B> bool operator()(A a, B b) const { return a != b; } };
struct logical_and { static constexpr const char* name = "&&"; bool operator()(bool a, bool b) const { return a && b; } };
struct logical_or { static constexpr const char* name = "||"; bool operator()(bool a, bool b) const { return a || b; } };
struct logical_not { static constexpr const char* name = "!"; bool operator()(bool a) const { return !a; } };
struct where { static constexpr const char* name = "where"; template <class A, class B> auto operator()(bool c, A a, B b) const { return c ? a : b; } };
// masked_fill(t, mask, v): t where the mask is false, v where it is true.
struct masked_fill { static constexpr const char* name = "masked_fill"; template <class A, class B> A operator()(A t, bool m, B v) const { return m ? static_cast<A>(v) : t; } };
template <class T>
struct cast { static constexpr const char* name = "cast"; template <class A> T operator()(A a) const { return static_cast<T>(a); } };
}  // namespace ops

namespace detail {
/// Calls run(p, n) for each stretch of n consecutive elements of dst (the
/// whole buffer when dst is dense in row-major order, else each innermost
/// row of stride 1), and one(v) per element when the innermost stride is
/// not 1.
template <class T, std::size_t R, class Run, class One>
void for_each_contiguous_run(const strided<T, R>& dst, Run&& run, One&& one) {
  if constexpr (R == 0) {
    one(*dst.data);
  } else {
    const auto dense = row_major_strides(dst.extents);
    bool packed = true;
    for (std::size_t i = 0; i < R; ++i) packed = packed && (dst.extents[i] <= 1 || dst.strides[i] == dense[i]);
    if (packed) return run(dst.data, checked_product(dst.extents.data(), R));
    const std::size_t inner = dst.extents[R - 1];
    const std::ptrdiff_t s = dst.strides[R - 1];
    for_each_row(dst, [&](const std::size_t*, T* row) {
      if (s == 1 || inner <= 1)
        run(row, inner);
      else
        for (std::size_t j = 0; j < inner; ++j) one(row[static_cast<std::ptrdiff_t>(j) * s]);
    });
  }
}
/// How the fusion patterns (plan/fusion_patterns.hpp) see an element-wise
/// functor.
template <class Op>
inline constexpr plan::pointwise pointwise_v = plan::pointwise::other;
template <>
inline constexpr plan::pointwise pointwise_v<ops::multiplies> = plan::pointwise::multiply;
template <>
inline constexpr plan::pointwise pointwise_v<ops::divides> = plan::pointwise::divide;
template <>
inline constexpr plan::pointwise pointwise_v<ops::masked_fill> = plan::pointwise::masked_fill;
template <>
inline constexpr plan::pointwise pointwise_v<ops::plus> = plan::pointwise::plus;
template <>
inline constexpr plan::pointwise pointwise_v<ops::where> = plan::pointwise::where;

template <class... Ls>
struct union_all;
template <class L>
struct union_all<L> {
  using type = L;
};
template <class A, class B, class... Rest>
struct union_all<A, B, Rest...> {
  using type = typename union_all<union_t<A, B>, Rest...>::type;
};

}  // namespace detail

/// A lazy element-wise operation `Op` over named expressions `Args`.
template <class Op, class... Args>
class elementwise_expr : public expression_tag {
 public:
  using dims = typename detail::union_all<dims_of_t<Args>...>::type;
  using value_type = std::remove_cvref_t<decltype(std::declval<const Op&>()(std::declval<value_type_of_t<Args>>()...))>;
  static constexpr std::size_t rank = dims::size;
  using operands_type = std::tuple<detail::closure_t<Args>...>;
  using fusion_traits = plan::elementwise_node<detail::pointwise_v<Op>, Args...>;

  template <class... A>
  explicit elementwise_expr(Op op, A&&... args) : op_(op), args_(std::forward<A>(args)...) {
    compute_extents(std::index_sequence_for<Args...>{});
  }

  const std::array<std::size_t, rank>& extents() const { return extents_; }
  const operands_type& operands() const { return args_; }
  const Op& op() const { return op_; }

  template <class Root>
  auto evaluator() const {
    return std::apply([&](const auto&... a) { return evaluator_type<Root, decltype(a.template evaluator<Root>())...>{op_, {a.template evaluator<Root>()...}}; }, args_);
  }
  /// Whether this is `contraction + bias` evaluated by accumulation (below).
  static constexpr bool accumulates_bias = [] {
    if constexpr (sizeof...(Args) == 2 && std::is_same_v<Op, ops::plus>) {
      using A = std::remove_cvref_t<std::tuple_element_t<0, std::tuple<Args...>>>;
      using B = std::remove_cvref_t<std::tuple_element_t<1, std::tuple<Args...>>>;
      return std::is_same_v<dims_of_t<A>, dims> && std::is_same_v<value_type_of_t<A>, value_type> &&
             std::is_same_v<value_type_of_t<B>, value_type> &&
             requires(const A& a, const strided<value_type, rank>& d) { a.accumulate_to(d); };
    } else {
      return false;
    }
  }();

  /// `contraction + bias` (the bias's dims a subset of the contraction's,
  /// one value type) writes the bias, then has the contraction accumulate
  /// onto it (`accumulate_to`, the GEMM kernel with beta = 1): no temporary,
  /// one pass. Anything else runs as one element-wise loop.
  void eval_to(const strided<value_type, rank>& dst) const {
    if constexpr (accumulates_bias) {
      auto bias = std::get<1>(args_).template evaluator<dims>();
      const auto& product = std::get<0>(args_);
      // A bias tensor that varies along the contraction's N dims only is
      // added by the GEMM kernel as it stores (addmm); any other bias is
      // written first and the product accumulated onto it.
      if constexpr (std::is_same_v<decltype(bias), detail::leaf_evaluator<value_type, rank>>) {
        if (product.eval_with_bias(dst, bias.data, bias.strides)) return;
      }
      detail::run_elementwise(dst, bias);
      product.accumulate_to(dst);  // nothing to add when a summed dim is empty
    } else if constexpr (vectorised) {
      // A vectorised function at the root (`y = tanh(x)`): the operand is
      // written into dst, then the function runs over dst's rows in place,
      // whole vectors first (kernels/vector_math.hpp). Inside a larger
      // element-wise tree the function runs per element (same definition).
      std::get<0>(args_).eval_to(dst);
      detail::for_each_contiguous_run(dst, [](value_type* p, std::size_t n) {
        kernels::math_contiguous<Op::vector_fn>(p, p, n);
      }, [&](value_type& v) { v = op_(v); });
    } else {
      if constexpr (converts_bf16) {
        // cast between float and bf16 of a tensor laid out as dst (both
        // dense, row-major): one vector conversion of the whole buffer
        const auto src = std::get<0>(args_).template evaluator<dims>();
        if (dense_like(dst, src.strides)) {
          const std::size_t n = detail::checked_product(dst.extents.data(), rank);
          if constexpr (std::is_same_v<value_type, float>)
            kernels::detail::widen_contiguous(src.data, n, dst.data);
          else
            kernels::detail::round_contiguous(src.data, n, dst.data);
          return;
        }
      }
      auto ev = evaluator<dims>();
      detail::run_elementwise(dst, ev);
    }
  }

 private:
  /// Whether this is cast<float> of a bf16 tensor or cast<bf16> of a float one.
  static constexpr bool converts_bf16 = [] {
    if constexpr (sizeof...(Args) == 1) {
      using A = std::remove_cvref_t<std::tuple_element_t<0, std::tuple<Args...>>>;
      using From = value_type_of_t<A>;
      constexpr bool pair = (std::is_same_v<Op, ops::cast<float>> && std::is_same_v<From, bf16>) ||
                            (std::is_same_v<Op, ops::cast<bf16>> && std::is_same_v<From, float>);
      if constexpr (pair)
        return std::is_same_v<decltype(std::declval<const A&>().template evaluator<dims>()),
                              detail::leaf_evaluator<From, rank>>;
      else
        return false;
    } else {
      return false;
    }
  }();
  /// Whether dst and a source of strides `s` are both dense row-major over dst's extents.
  static bool dense_like(const strided<value_type, rank>& dst, const std::array<std::ptrdiff_t, rank>& s) {
    if constexpr (rank == 0) {
      return true;
    } else {
      const auto dense = detail::row_major_strides(dst.extents);
      for (std::size_t i = 0; i < rank; ++i)
        if (dst.extents[i] > 1 && (dst.strides[i] != dense[i] || s[i] != dense[i])) return false;
      return true;
    }
  }
  static constexpr bool vectorised = [] {
    if constexpr (sizeof...(Args) == 1 && requires { Op::vector_fn; }) {
      using A = std::remove_cvref_t<std::tuple_element_t<0, std::tuple<Args...>>>;
      return kernels::has_vector_math<Op::vector_fn, value_type> && std::is_same_v<value_type_of_t<A>, value_type>;
    } else {
      return false;
    }
  }();

  template <class Root, class... Evs>
  struct evaluator_type {
    Op op;
    std::tuple<Evs...> evs;
    void seek(const std::size_t* idx) {
      std::apply([&](auto&... e) { (e.seek(idx), ...); }, evs);
    }
    auto operator[](std::size_t j) const {
      return std::apply([&](const auto&... e) { return op(e[j]...); }, evs);
    }
    bool merges(std::size_t d, std::size_t next) const
      requires(detail::merging_evaluator<Evs> && ...)
    {
      return std::apply([&](const auto&... e) { return (e.merges(d, next) && ...); }, evs);
    }
  };

  template <std::size_t... I>
  void compute_extents(std::index_sequence<I...>) {
    std::array<bool, rank> seen{};
    (merge_extents<I>(seen), ...);
  }
  template <std::size_t I>
  void merge_extents(std::array<bool, rank>& seen) {
    using A = dims_of_t<std::tuple_element_t<I, std::tuple<Args...>>>;
    constexpr auto pos = positions_in<A, dims>();
    const auto ext = std::get<I>(args_).extents();
    for (std::size_t k = 0; k < A::size; ++k) {
      if (seen[pos[k]]) {
        detail::check_extent(A::names[k], extents_[pos[k]], ext[k], Op::name);
      } else {
        extents_[pos[k]] = ext[k];
        seen[pos[k]] = true;
      }
    }
  }

  Op op_;
  operands_type args_;
  std::array<std::size_t, rank> extents_{};
};

namespace detail {
// A named expression passes through as the same reference (so the node
// holds an lvalue by reference and moves an rvalue in); a scalar becomes a
// scalar_expr of the expression's value type.
template <class X, class T>
decltype(auto) as_expression(X&& x) {
  if constexpr (named_expression<X>)
    return static_cast<X&&>(x);
  else
    return scalar_expr<T>(static_cast<T>(x));
}
// The value type a scalar S adopts next to an expression of value type V:
// V (a float tensor times 0.5 stays float, as in PyTorch), except that a
// floating-point scalar next to an integer or bool expression keeps its
// type, so `ids * 0.5` and `ids > 0.5` compute in floating point, as
// PyTorch promotes, instead of truncating 0.5 to 0.
template <class V, class S>
using adopted_value_t =
    std::conditional_t<std::is_integral_v<V> && std::is_floating_point_v<std::remove_cvref_t<S>>, std::remove_cvref_t<S>, V>;
template <class A, class B>
struct operand_value {
  using type = adopted_value_t<value_type_of_t<B>, A>;
};
template <named_expression A, class B>
struct operand_value<A, B> {
  using type = adopted_value_t<value_type_of_t<A>, B>;
};
template <class A, class B>
using operand_value_t = typename operand_value<A, B>::type;

// Declared before make_elementwise: for operands whose types bring no
// dimsum::detail into argument-dependent lookup (rank-0 tensors, unary
// operations) ordinary lookup must find them.
template <bool Strict, class Op, class A, class... X>
auto make_checked(Op op, A&& a, X&&... x);

// bf16 is never promoted silently: operands that mix it with another
// value type (bool conditions and masks aside) are an error naming both.
template <class First, class... Vs>
struct first_other_than_bf16 {
  using type = void;
};
template <class First, class V, class... Vs>
struct first_other_than_bf16<First, V, Vs...> {
  using type = std::conditional_t<is_bf16_v<V> || std::is_same_v<V, bool>,
                                  typename first_other_than_bf16<First, Vs...>::type, V>;
};
template <class... X>
using non_bf16_value_t = typename first_other_than_bf16<void, value_type_of_t<X>...>::type;
template <class... X>
inline constexpr bool mixes_bf16_v = (is_bf16_v<value_type_of_t<X>> || ...) && !std::is_void_v<non_bf16_value_t<X...>>;

/// Builds an element-wise node after the compile-time checks. Strict says
/// whether two non-scalar operands must share a dim.
template <bool Strict, class Op, class... X>
auto make_elementwise(Op op, X&&... x) {
  if constexpr ((is_invalid_v<X> || ...)) {
    return invalid_expression{};
  } else if constexpr (mixes_bf16_v<X...>) {
    report<elementwise_operands_have_different_value_types<bf16, non_bf16_value_t<X...>>>();
    return invalid_expression{};
  } else {
    return make_checked<Strict>(op, std::forward<X>(x)...);
  }
}
// Operands are checked left to right: each against the union of the dims
// before it (strictly: they must share a dim unless either side has none;
// static extents must agree), so one mistake gives one diagnostic. The
// check is a plain predicate and the report sits in the failing branch
// (a condition that reports gives clang follow-up errors).
template <bool Strict, class Acc>
constexpr bool operand_dims_ok() {
  return true;
}
template <bool Strict, class Acc, class L, class... Rest>
constexpr bool operand_dims_ok() {
  if constexpr (Strict && Acc::size > 0 && L::size > 0 && !share_a_dim_v<Acc, L>)
    return false;
  else if constexpr (!static_extents_agree_v<Acc, L>)
    return false;
  else
    return operand_dims_ok<Strict, union_t<Acc, L>, Rest...>();
}
// Whether `longer` is `name` with a word added before or after it
// (`q_posn`, `posn_k` for `posn`): the mark of a dim renamed in one operand
// and not in the other.
constexpr bool is_renamed_form_of(std::string_view longer, std::string_view name) {
  if (longer.size() <= name.size() + 1) return false;
  return (longer.ends_with(name) && longer[longer.size() - name.size() - 1] == '_') ||
         (longer.starts_with(name) && longer[name.size()] == '_');
}
// The first dims (i of A, j of B) of which one is a renamed form of the
// other; {npos, npos} if none.
template <class A, class B>
constexpr std::pair<std::size_t, std::size_t> renamed_pair() {
  for (std::size_t i = 0; i < A::size; ++i)
    for (std::size_t j = 0; j < B::size; ++j)
      if (is_renamed_form_of(A::names[i], B::names[j]) || is_renamed_form_of(B::names[j], A::names[i])) return {i, j};
  return {npos, npos};
}
// Two operands that share no dim: when a dim of one is a renamed form of a
// dim of the other, the likely fix is a rename (the rename suggested turns
// the shorter name into the longer); otherwise an outer product.
template <class A, class B>
constexpr void report_no_shared_dim() {
  constexpr auto p = renamed_pair<A, B>();
  if constexpr (p.first == npos) {
    report<elementwise_operands_share_no_dim<diagnostic_dims_t<A>, diagnostic_dims_t<B>>>();
  } else {
    using DA = diagnostic_name_t<at_t<A, p.first>>;
    using DB = diagnostic_name_t<at_t<B, p.second>>;
    using Fix = std::conditional_t<(A::names[p.first].size() < B::names[p.second].size()), fix::rename<DA, DB>,
                                   fix::rename<DB, DA>>;
    report<elementwise_operands_share_no_dim_did_you_mean_rename<diagnostic_dims_t<A>, diagnostic_dims_t<B>, Fix>>();
  }
}
/// Reports the first operand that operand_dims_ok rejects (constexpr, so
/// that clang's diagnostic leads back to the user's line).
template <bool Strict, class Acc>
constexpr void report_operand_dims() {}
template <bool Strict, class Acc, class L, class... Rest>
constexpr void report_operand_dims() {
  if constexpr (Strict && Acc::size > 0 && L::size > 0 && !share_a_dim_v<Acc, L>)
    report_no_shared_dim<Acc, L>();
  else if constexpr (!static_extents_agree_v<Acc, L>)
    report_static_disagreement<Acc, L>();
  else
    report_operand_dims<Strict, union_t<Acc, L>, Rest...>();
}
template <bool Strict, class Op, class A, class... X>
auto make_checked(Op op, A&& a, X&&... x) {
  if constexpr (!operand_dims_ok<Strict, dims_of_t<A>, dims_of_t<X>...>()) {
    report_operand_dims<Strict, dims_of_t<A>, dims_of_t<X>...>();
    return invalid_expression{};
  } else {
    return elementwise_expr<Op, A, X...>(op, std::forward<A>(a), std::forward<X>(x)...);
  }
}

template <class A, class B>
concept binary_operands = (named_expression<A> && (named_expression<B> || scalar<B>)) ||
                          (scalar<A> && named_expression<B>);

template <class Op, class A, class B>
auto binary(A&& a, B&& b) {
  using T = operand_value_t<A, B>;
  return make_elementwise<true>(Op{}, as_expression<A, T>(std::forward<A>(a)), as_expression<B, T>(std::forward<B>(b)));
}
}  // namespace detail

// Four overloads per operator, so that only the operands held by reference
// (lvalue named expressions) are DIMSUM_LIFETIMEBOUND: clang then warns when
// an expression over local tensors is returned, and not for rvalues, which
// are moved in.
#define DIMSUM_BINARY_OPERATOR_(sym, functor)                                                          \
  template <class A, class B>                                                                          \
    requires detail::binary_operands<A, B> && detail::held_by_reference<A&> && detail::held_by_reference<B&> \
  auto operator sym(A& a DIMSUM_LIFETIMEBOUND, B& b DIMSUM_LIFETIMEBOUND) {                            \
    return detail::binary<ops::functor>(a, b);                                                         \
  }                                                                                                    \
  template <class A, class B>                                                                          \
    requires detail::binary_operands<A, B> && detail::held_by_reference<A&> && (!detail::held_by_reference<B>) \
  auto operator sym(A& a DIMSUM_LIFETIMEBOUND, B&& b) {                                                \
    return detail::binary<ops::functor>(a, std::forward<B>(b));                                        \
  }                                                                                                    \
  template <class A, class B>                                                                          \
    requires detail::binary_operands<A, B> && (!detail::held_by_reference<A>) && detail::held_by_reference<B&> \
  auto operator sym(A&& a, B& b DIMSUM_LIFETIMEBOUND) {                                                \
    return detail::binary<ops::functor>(std::forward<A>(a), b);                                        \
  }                                                                                                    \
  template <class A, class B>                                                                          \
    requires detail::binary_operands<A, B> && (!detail::held_by_reference<A>) && (!detail::held_by_reference<B>) \
  auto operator sym(A&& a, B&& b) {                                                                    \
    return detail::binary<ops::functor>(std::forward<A>(a), std::forward<B>(b));                       \
  }
DIMSUM_BINARY_OPERATOR_(+, plus)
DIMSUM_BINARY_OPERATOR_(-, minus)
DIMSUM_BINARY_OPERATOR_(*, multiplies)
DIMSUM_BINARY_OPERATOR_(/, divides)
DIMSUM_BINARY_OPERATOR_(<, less)
DIMSUM_BINARY_OPERATOR_(<=, less_equal)
DIMSUM_BINARY_OPERATOR_(>, greater)
DIMSUM_BINARY_OPERATOR_(>=, greater_equal)
DIMSUM_BINARY_OPERATOR_(==, equal_to)
DIMSUM_BINARY_OPERATOR_(!=, not_equal_to)
DIMSUM_BINARY_OPERATOR_(&&, logical_and)
DIMSUM_BINARY_OPERATOR_(||, logical_or)
#undef DIMSUM_BINARY_OPERATOR_

/// Compound assignment to a tensor, PyTorch's `t += e`: `t = t + e` (and
/// `-=`, `*=`, `/=`), so e (a named expression or a scalar) broadcasts by name
/// into t's dims under the rules of `+`; an e that would add a dim to t is
/// the compile error `assignment_between_different_dims`, another value type
/// `value_type_mismatch`. The result is evaluated into a fresh buffer that t
/// then takes, so e may read t.
///
/// On a view (`slice<posn>(x, 3, n) += y`, PyTorch's `x[3:] += y`) it is
/// `v = v + e`, written into the viewed elements (tensor_view::operator=);
/// the view is returned by value, as it is taken.
#define DIMSUM_COMPOUND_ASSIGNMENT_(sym, functor)                       \
  template <class T, dimension... Ds, class E>                          \
    requires(named_expression<E> || scalar<E>)                          \
  tensor<T, Ds...>& operator sym(tensor<T, Ds...>& t, E&& e) {          \
    t = detail::binary<ops::functor>(t, std::forward<E>(e));            \
    return t;                                                           \
  }                                                                     \
  template <class T, dimension... Ds, class E>                          \
    requires(named_expression<E> || scalar<E>)                          \
  tensor_view<T, Ds...> operator sym(tensor_view<T, Ds...> v, E&& e) {  \
    v = detail::binary<ops::functor>(v, std::forward<E>(e));            \
    return v;                                                           \
  }
DIMSUM_COMPOUND_ASSIGNMENT_(+=, plus)
DIMSUM_COMPOUND_ASSIGNMENT_(-=, minus)
DIMSUM_COMPOUND_ASSIGNMENT_(*=, multiplies)
DIMSUM_COMPOUND_ASSIGNMENT_(/=, divides)
#undef DIMSUM_COMPOUND_ASSIGNMENT_

// Two overloads per unary operation, so that only an operand held by
// reference (an lvalue) is DIMSUM_LIFETIMEBOUND, as for the binary
// operators: clang warns when the result outlives it; an rvalue is moved
// in. Used by ops/math.hpp too.
#define DIMSUM_DETAIL_UNARY_ELEMENTWISE(fn, functor)                          \
  template <named_expression E>                                              \
  auto fn(E& e DIMSUM_LIFETIMEBOUND) {                                       \
    return detail::make_elementwise<true>(functor{}, e);                     \
  }                                                                          \
  template <named_expression E>                                              \
    requires(!std::is_lvalue_reference_v<E>)                                 \
  auto fn(E&& e) {                                                           \
    return detail::make_elementwise<true>(functor{}, std::forward<E>(e));    \
  }

/// Unary minus.
DIMSUM_DETAIL_UNARY_ELEMENTWISE(operator-, ops::negate)
/// Logical not of a boolean expression; of any other value type the
/// compile error `logical_not_needs_bool_values` (torch's `~` refuses
/// floats; `!x` is not read as `x == 0`).
template <named_expression E>
auto operator!(E&& e) {
  if constexpr (!is_invalid_v<E> && !bool_valued_v<E>) {
    detail::report<logical_not_needs_bool_values<value_type_of_t<E>, diagnostic_dims_t<dims_of_t<E>>>>();
    (void)e;
    return invalid_expression{};
  } else {
    return detail::make_elementwise<true>(ops::logical_not{}, std::forward<E>(e));
  }
}
/// Element-wise e^x.
DIMSUM_DETAIL_UNARY_ELEMENTWISE(exp, ops::exp)
/// Element-wise square root.
DIMSUM_DETAIL_UNARY_ELEMENTWISE(sqrt, ops::sqrt)
/// Element-wise conversion to value type T.
template <class T, named_expression E>
auto cast(E&& e) {
  return detail::make_elementwise<true>(ops::cast<T>{}, std::forward<E>(e));
}

namespace detail {
// The value type where's scalar operands take: the other operand's (as for
// a + b), or, when both are scalars (`where(c, 1.0f, 0.0f)`), their common type.
template <class A, class B>
struct where_value {
  using type = std::common_type_t<std::remove_cvref_t<A>, std::remove_cvref_t<B>>;
};
template <class A, class B>
  requires named_expression<A> || named_expression<B>
struct where_value<A, B> {
  using type = typename std::conditional_t<named_expression<A>, operand_value<A, B>, operand_value<B, A>>::type;
};
}  // namespace detail

/// `a` where `cond` is true, else `b`; the dims are cond's, then a's, then
/// b's new ones, with the strict broadcasting rule between them. a and b may
/// both be scalars (`where(x > 0.0f, 1.0f, 0.0f)`: cond's dims). cond must
/// be of bool values (as torch.where's): a float condition is the compile
/// error `where_condition_is_not_boolean`, not read as `cond != 0`.
template <named_expression C, class A, class B>
  requires(named_expression<A> || scalar<A>) && (named_expression<B> || scalar<B>)
auto where(C&& cond, A&& a, B&& b) {
  if constexpr (!is_invalid_v<C> && !bool_valued_v<C>) {
    detail::report<where_condition_is_not_boolean<value_type_of_t<C>>>();
    return invalid_expression{};
  } else {
    using T = typename detail::where_value<A, B>::type;
    return detail::make_elementwise<true>(ops::where{}, std::forward<C>(cond),
                                          detail::as_expression<A, T>(std::forward<A>(a)),
                                          detail::as_expression<B, T>(std::forward<B>(b)));
  }
}

/// The outer product: `a * b` for operands that may share no dim.
template <named_expression A, named_expression B>
auto outer(A&& a, B&& b) {
  return detail::make_elementwise<false>(ops::multiplies{}, std::forward<A>(a), std::forward<B>(b));
}

}  // namespace dimsum
