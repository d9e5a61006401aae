#pragma once
/// \file
/// `einsum`: contraction with an explicit output (DESIGN.md §4), in two
/// spellings with one meaning:
///
///     einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, W_Q)
///     einsum<batch, posn, nheads, d_head>(x, W_Q)
///
/// The result has exactly the output's dims; every operand dim absent from
/// the output is summed; an output dim that no operand has is a compile
/// error. In the string form each term must list its operand's dims in
/// order, so the string is documentation the compiler checks. Static extents
/// of the same dim must agree (compile time); dynamic ones are checked when
/// the expression is built (`shape_error`).

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <dimsum/core/bf16.hpp>
#include <dimsum/core/einsum_string.hpp>
#include <dimsum/kernels/gemm.hpp>
#include <dimsum/kernels/reference.hpp>
#include <dimsum/ops/detail/fused_attention.hpp>
#include <dimsum/ops/elementwise.hpp>
#include <dimsum/ops/regroup.hpp>
#include <dimsum/plan/contraction_plan.hpp>
#include <dimsum/plan/fusion_patterns.hpp>
#include <dimsum/plan/fusion_traits.hpp>
#include <dimsum/plan/pairwise_order.hpp>

namespace dimsum {

namespace detail {
template <class Out, class T, std::size_t R, class... M>
void contract_pairwise(const strided<T, R>& dst, const M&... m);
template <class E, std::size_t R>
void eval_rounded(const E& e, const strided<bf16, R>& dst);
}  // namespace detail

/// A lazy contraction of `Ops` into the dims `Out` (a dim_list).
template <class Out, class... Ops>
class einsum_expr : public expression_tag {
 public:
  using value_type = value_type_of_t<std::tuple_element_t<0, std::tuple<Ops...>>>;
  using dims = Out;
  static constexpr std::size_t rank = Out::size;
  using plan_type = plan::contraction_plan<Out, dims_of_t<Ops>...>;
  using operands_type = std::tuple<detail::closure_t<Ops>...>;
  using fusion_traits = plan::contraction_node<Out, Ops...>;

  /// Whether this contraction runs on the packed GEMM kernel (two operands
  /// of float, double or bf16, no dim summed out of one operand alone, at
  /// most kernels::max_group_rank dims per role); otherwise the general
  /// loops run. bf16 operands are summed in float32 either way.
  static constexpr bool uses_gemm =
      sizeof...(Ops) == 2 &&
      (std::is_same_v<value_type, float> || std::is_same_v<value_type, double> || is_bf16_v<value_type>) &&
      plan_type::count(plan::role::reduce_a) == 0 && plan_type::count(plan::role::reduce_b) == 0 &&
      plan_type::count(plan::role::batch) <= kernels::max_group_rank &&
      plan_type::count(plan::role::m) <= kernels::max_group_rank &&
      plan_type::count(plan::role::n) <= kernels::max_group_rank &&
      plan_type::count(plan::role::k) <= kernels::max_group_rank;

  /// Whether this contraction is the `einsum(softmax(scores), v)` end of an
  /// attention whose scores are still lazy: then it runs the fused kernel
  /// and the scores are never materialised (see plan/fusion_patterns.hpp).
  static constexpr bool uses_fused_attention = plan::fusion::match<einsum_expr, fusion_traits>::value;

  static constexpr bool floating = std::is_same_v<value_type, float> || std::is_same_v<value_type, double>;
  /// Whether dims summed out of one operand alone are summed first (a
  /// reduction, linear in the operand's size), so that the contraction
  /// proper runs on the GEMM kernel: `einsum<"a b, b c -> c">`.
  static constexpr bool pre_reduces = sizeof...(Ops) == 2 && floating &&
                                      (plan_type::count(plan::role::reduce_a) + plan_type::count(plan::role::reduce_b)) > 0;
  /// Whether three or more operands are contracted pairwise (each pair on
  /// the GEMM kernel, into an intermediate that keeps only the dims still
  /// needed), the pair with the smallest intermediate first.
  static constexpr bool pairwise = sizeof...(Ops) >= 3 && floating;

  template <class... X>
  explicit einsum_expr(X&&... ops) : ops_(std::forward<X>(ops)...) {
    std::array<bool, plan_type::n_labels> seen{};
    std::array<std::size_t, plan_type::n_labels> first{};
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      (gather_extents<J>(seen, first), ...);
    }(std::index_sequence_for<Ops...>{});
  }

  std::array<std::size_t, rank> extents() const {
    std::array<std::size_t, rank> e{};
    for (std::size_t i = 0; i < rank; ++i) e[i] = label_extents_[i];
    return e;
  }
  /// Extents of every label (output first, then summed).
  const auto& label_extents() const { return label_extents_; }
  const operands_type& operands() const { return ops_; }

  template <class Root>
  auto evaluator() const {
    return detail::materializing_evaluator<Root>(*this);
  }

  void eval_to(const strided<value_type, rank>& dst) const {
    if constexpr (uses_fused_attention)  // bf16 too: float32 sums, the output rounded once
      detail::fused::run(*this, dst);
    else if constexpr (is_bf16_v<value_type>)  // float32 sums, rounded once into dst
      detail::eval_rounded(*this, dst);
    else if constexpr (pre_reduces || pairwise)
      std::apply([&](const auto&... op) { detail::contract_pairwise<Out>(dst, detail::materialize(op)...); }, ops_);
    else
      std::apply([&](const auto&... op) { contract(dst, detail::materialize(op)...); }, ops_);
  }

 private:
  template <std::size_t J>
  void gather_extents(std::array<bool, plan_type::n_labels>& seen, std::array<std::size_t, plan_type::n_labels>& first) {
    const auto ext = std::get<J>(ops_).extents();
    for (std::size_t l = 0; l < plan_type::n_labels; ++l) {
      const std::size_t p = plan_type::position[J][l];
      if (p == detail::npos) continue;
      if (!seen[l]) {
        seen[l] = true;
        first[l] = J;
        label_extents_[l] = ext[p];
      } else if (label_extents_[l] != ext[p]) {
        throw shape_error("einsum: dim '" + std::string(plan_type::labels[l]) + "' has extent " +
                          std::to_string(label_extents_[l]) + " in operand " + std::to_string(first[l]) + " but " +
                          std::to_string(ext[p]) + " in operand " + std::to_string(J));
      }
    }
  }

 public:
  /// dst += this contraction, on the GEMM kernel (beta = 1): lets
  /// `tensor = einsum(...) + bias` write the bias, then accumulate the
  /// product onto it in one pass, as BLAS addmm does. Only for contractions
  /// that run on the GEMM kernel.
  void accumulate_to(const strided<value_type, rank>& dst) const
    requires(uses_gemm && !uses_fused_attention && !is_bf16_v<value_type>)
  {
    if (!has_empty_label())
      std::apply([&](const auto&... op) { contract_gemm(dst, detail::materialize(op)..., value_type(1)); }, ops_);
  }

  /// dst = this contraction + bias, the bias added in the GEMM kernel's
  /// store (the same arithmetic as `accumulate_to` onto the written bias,
  /// one pass fewer over dst). `bias_strides` are in this expression's dims
  /// order, 0 where the bias is broadcast. Returns false, doing nothing,
  /// unless the bias varies along N dims only (an addmm-style bias).
  bool eval_with_bias(const strided<value_type, rank>& dst, const value_type* bias,
                      const std::array<std::ptrdiff_t, rank>& bias_strides) const
    requires(uses_gemm && !uses_fused_attention && !is_bf16_v<value_type>)
  {
    for (std::size_t l = 0; l < rank; ++l)
      if (plan_type::roles[l] != plan::role::n && bias_strides[l] != 0 && label_extents_[l] != 1) return false;
    std::apply([&](const auto&... op) { contract_gemm(dst, detail::materialize(op)..., value_type(0), bias, &bias_strides); },
               ops_);
    return true;
  }

  /// For bf16 operands on the GEMM kernel: dst += the float32 sums (the
  /// bf16 kernel with beta = 1), as `accumulate_to` for float operands.
  void accumulate_sums_to(const strided<float, rank>& dst) const
    requires(uses_gemm && !uses_fused_attention && is_bf16_v<value_type>)
  {
    if (!has_empty_label())
      std::apply([&](const auto&... op) { contract_gemm(dst, detail::materialize(op)..., 1.0f); }, ops_);
  }

  /// For bf16 operands into a bf16 dst: the bf16 GEMM rounding each
  /// float32 sum once as it stores it, where the kernel does
  /// (kernels::bf16_rounds_in_store); false, doing nothing, otherwise.
  bool eval_rounded_in_store(const strided<bf16, rank>& dst) const
    requires(is_bf16_v<value_type>)
  {
    if constexpr (uses_gemm && !uses_fused_attention) {
      std::size_t nk = 1, nn = 1;
      for (std::size_t l = 0; l < plan_type::n_labels; ++l) {
        if (plan_type::roles[l] == plan::role::k) nk *= label_extents_[l];
        if (plan_type::roles[l] == plan::role::n) nn *= label_extents_[l];
      }
      if (has_empty_label() || !kernels::bf16_rounds_in_store(nk, nn)) return false;
      return std::apply(
          [&](const auto&... op) {
            return kernels::contract_rounded(gemm_args(static_cast<float*>(nullptr), dst.strides, detail::materialize(op)...),
                                             dst.data);
          },
          ops_);
    } else {
      (void)dst;
      return false;
    }
  }

  /// For bf16 operands: the float32 sums themselves, written into a float
  /// dst (what `einsum<float>(...)` of bf16 operands returns): on the bf16
  /// GEMM kernel where the contraction fits it, else the float einsum of
  /// the operands converted to float (exactly).
  void eval_sums_to(const strided<float, rank>& dst) const
    requires(is_bf16_v<value_type>)
  {
    if constexpr (uses_gemm) {
      if (!has_empty_label())
        return std::apply([&](const auto&... op) { contract_gemm(dst, detail::materialize(op)...); }, ops_);
    }
    std::apply(
        [&](const auto&... op) {
          const auto as_float = [](const auto& m) {
            return tensor_for_t<float, dims_of_t<decltype(m)>>(cast<float>(m));
          };
          [&](const auto&... f) { einsum_expr<Out, decltype(f)...>(f...).eval_to(dst); }(as_float(detail::materialize(op))...);
        },
        ops_);
  }

 private:
  bool has_empty_label() const {
    for (auto e : label_extents_)
      if (e == 0) return true;
    return false;
  }

  template <class... M>
  void contract(const strided<value_type, rank>& dst, const M&... m) const {
    if constexpr (uses_gemm && !is_bf16_v<value_type>) {
      if (!has_empty_label()) return contract_gemm(dst, m...);  // an empty problem takes the loops: zeros, nothing read
    }
    contract_loops(dst, m...);
  }

  // The planner's roles become the kernel's dim groups: extents per label,
  // each operand's strides (and the destination's) per label. beta == 1
  // adds to what dst holds.
  // A float dst of bf16 operands takes the bf16 kernel (float32 sums).
  template <class D, class MA, class MB>
  void contract_gemm(const strided<D, rank>& dst, const MA& a, const MB& b, D beta = D(0), const D* bias = nullptr,
                     const std::array<std::ptrdiff_t, rank>* bias_strides = nullptr) const {
    kernels::contract(gemm_args(dst.data, dst.strides, a, b, beta, bias, bias_strides));
  }

  // The kernel's arguments for C at c with strides c_strides (C's value
  // type D; float for bf16 operands).
  template <class D, class MA, class MB>
  kernels::contraction_args<value_type, D> gemm_args(D* c, const std::array<std::ptrdiff_t, rank>& c_strides,
                                                     const MA& a, const MB& b, D beta = D(0), const D* bias = nullptr,
                                                     const std::array<std::ptrdiff_t, rank>* bias_strides = nullptr) const {
    kernels::contraction_args<value_type, D> args;
    args.beta = beta;
    args.bias = bias;
    args.a = a.data();
    args.b = b.data();
    args.c = c;
    const auto sa = a.strides();
    const auto sb = b.strides();
    for (std::size_t l = 0; l < plan_type::n_labels; ++l) {
      const std::size_t pa = plan_type::position[0][l], pb = plan_type::position[1][l];
      const std::ptrdiff_t stride_a = pa == detail::npos ? 0 : sa[pa];
      const std::ptrdiff_t stride_b = pb == detail::npos ? 0 : sb[pb];
      const std::ptrdiff_t stride_c = l < rank ? c_strides[l] : 0;
      kernels::dim_group* g = nullptr;
      switch (plan_type::roles[l]) {
        case plan::role::batch: g = &args.batch; break;
        case plan::role::m: g = &args.m; break;
        case plan::role::n: g = &args.n; break;
        case plan::role::k: g = &args.k; break;
        default: break;  // excluded by uses_gemm
      }
      if (bias && g == &args.n) args.bias_n[g->rank] = (*bias_strides)[l];  // N labels are output labels
      g->extents[g->rank] = label_extents_[l];
      g->stride_a[g->rank] = stride_a;
      g->stride_b[g->rank] = stride_b;
      g->stride_c[g->rank] = stride_c;
      ++g->rank;
    }
    return args;
  }

  template <class... M>
  void contract_loops(const strided<value_type, rank>& dst, const M&... m) const {
    constexpr std::size_t L = plan_type::n_labels;
    std::vector<const value_type*> ptrs{m.data()...};
    std::vector<std::vector<std::ptrdiff_t>> strides;
    std::size_t j = 0;
    (
        [&](const auto& op) {
          std::vector<std::ptrdiff_t> s(L, 0);
          const auto st = op.strides();
          for (std::size_t l = 0; l < L; ++l)
            if (plan_type::position[j][l] != detail::npos) s[l] = st[plan_type::position[j][l]];
          strides.push_back(std::move(s));
          ++j;
        }(m),
        ...);
    kernels::contract_loops(dst.data, dst.strides.data(), rank, label_extents_.data(), L, ptrs, strides);
  }

  operands_type ops_;
  std::array<std::size_t, plan_type::n_labels> label_extents_{};
};

namespace detail {

/// A bf16 contraction into a bf16 dst: its float32 sums into a float
/// buffer, then each rounded once to bf16.
template <class E, std::size_t R>
void eval_rounded(const E& e, const strided<bf16, R>& dst) {
  if (e.eval_rounded_in_store(dst)) return;
  // written in full by eval_sums_to (the GEMM with beta = 0, or the loops)
  auto sums = uninitialized_tensor<tensor_for_t<float, dims_of_t<E>>>(e.extents());
  e.eval_sums_to(strided<float, R>{sums.data(), sums.extents(), sums.strides()});
  cast<bf16>(sums).eval_to(dst);
}

/// Operand K with the dims no one else needs summed out (or itself).
template <class Out, std::size_t K, class... Ls, class M>
decltype(auto) pre_reduce(const M& m) {
  using L = dims_of_t<M>;
  using Kept = plan::kept_t<L, Out, K, K, Ls...>;
  if constexpr (Kept::size == L::size)
    return (m);
  else
    return tensor_for_t<value_type_of_t<M>, Kept>(einsum_expr<Kept, const M&>(m));
}

/// Contracts operands that need no pre-reduction: one or two directly, more
/// pair by pair in the order plan/pairwise_order.hpp chooses, each pair
/// into a tensor of the dims still needed.
template <class Out, class T, std::size_t R, class... X>
void contract_pairs(const strided<T, R>& dst, const X&... x) {
  if constexpr (sizeof...(X) <= 2) {
    einsum_expr<Out, const X&...>(x...).eval_to(dst);
  } else {
    using step = plan::pairwise_step<Out, dims_of_t<X>...>;
    const std::tuple<const X&...> refs(x...);
    const auto& xi = std::get<step::first>(refs);
    const auto& xj = std::get<step::second>(refs);
    using XI = std::remove_cvref_t<decltype(xi)>;
    using XJ = std::remove_cvref_t<decltype(xj)>;
    const tensor_for_t<T, typename step::kept> tmp(einsum_expr<typename step::kept, const XI&, const XJ&>(xi, xj));
    [&]<std::size_t... O>(std::index_sequence<O...>) {
      contract_pairs<Out>(dst, tmp, std::get<step::others[O]>(refs)...);
    }(std::make_index_sequence<sizeof...(X) - 2>{});
  }
}

/// Evaluates a contraction pairwise after pre-reducing every operand.
template <class Out, class T, std::size_t R, class... M>
void contract_pairwise(const strided<T, R>& dst, const M&... m) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    contract_pairs<Out>(dst, pre_reduce<Out, I, dims_of_t<M>...>(m)...);
  }(std::index_sequence_for<M...>{});
}

/// Whether each operand's static extents agree with those of the operands
/// before it (the union keeps a static extent wherever one was seen): `ok`
/// is a pure condition, `report()` reports the first disagreement.
template <class Acc, class... Rest>
struct static_agreement_fold {
  static constexpr bool ok = true;
  static constexpr void report() {}
};
template <class Acc, class Next, class... Tail>
struct static_agreement_fold<Acc, Next, Tail...> {
  static constexpr bool ok = [] {
    if constexpr (!static_extents_agree_v<Acc, Next>)
      return false;
    else
      return static_agreement_fold<union_t<Acc, Next>, Tail...>::ok;
  }();
  static constexpr void report() {
    if constexpr (!static_extents_agree_v<Acc, Next>)
      report_static_disagreement<Acc, Next>();
    else
      static_agreement_fold<union_t<Acc, Next>, Tail...>::report();
  }
};
template <class... Ls>
using static_agreement_all = static_agreement_fold<dim_list<>, Ls...>;

/// Checks shared by both spellings, then builds the node. `Out` holds the
/// output dims as the user named them; the result takes each one's type
/// from the operands (so static extents carry over).
template <class Out, class... Ops>
auto make_einsum(Ops&&... ops) {
  constexpr std::size_t foreign = [] {
    std::size_t i = 0;
    for (bool ok : std::array<bool, sizeof...(Ops)>{named_expression<Ops>...}) {
      if (!ok) return i;
      ++i;
    }
    return npos;
  }();
  if constexpr (sizeof...(Ops) == 0) {
    report<einsum_needs_at_least_one_operand<diagnostic_dims_t<Out>>>();
    return invalid_expression{};
  } else if constexpr (foreign != npos) {
    report<einsum_operand_is_not_a_named_tensor<operand<foreign>,
                                                std::remove_cvref_t<std::tuple_element_t<foreign, std::tuple<Ops...>>>>>();
    return invalid_expression{};
  } else if constexpr ((is_invalid_v<Ops> || ...)) {
    return invalid_expression{};
  } else {
    using U = typename union_all<dims_of_t<Ops>...>::type;
    constexpr std::size_t missing = [] {
      for (std::size_t i = 0; i < Out::size; ++i)
        if (find_name(U::names, Out::names[i]) == npos) return i;
      return npos;
    }();
    constexpr std::size_t twice = [] {
      for (std::size_t i = 0; i < Out::size; ++i)
        for (std::size_t j = i + 1; j < Out::size; ++j)
          if (Out::names[i] == Out::names[j]) return j;
      return npos;
    }();
    using T0 = value_type_of_t<std::tuple_element_t<0, std::tuple<Ops...>>>;
    constexpr std::size_t other_type = [] {
      std::size_t i = 0;
      for (bool same : {std::is_same_v<value_type_of_t<Ops>, T0>...}) {
        if (!same) return i;
        ++i;
      }
      return npos;
    }();
    if constexpr (missing != npos) {
      report<einsum_output_label_is_not_in_any_operand<diagnostic_name_t<at_t<Out, missing>>>>();
      return invalid_expression{};
    } else if constexpr (twice != npos) {
      report<einsum_output_names_a_dim_twice<diagnostic_name_t<at_t<Out, twice>>>>();
      return invalid_expression{};
    } else if constexpr (!static_agreement_all<dims_of_t<Ops>...>::ok) {
      static_agreement_all<dims_of_t<Ops>...>::report();
      return invalid_expression{};
    } else if constexpr (other_type != npos) {
      report<einsum_operands_have_different_value_types<
          T0, value_type_of_t<std::tuple_element_t<other_type, std::tuple<Ops...>>>>>();
      return invalid_expression{};
    } else {
      constexpr auto pos = positions_in<Out, U>();
      using R = select_t<U, pos>;
      return einsum_expr<R, Ops...>(std::forward<Ops>(ops)...);
    }
  }
}

/// A contraction whose result type R the user stated (`einsum<float>(...)`):
/// E's operands share a value type; bf16 operands with R = float give
/// E's float32 sums themselves, any other pair evaluates E and converts.
template <class R, class E>
class typed_einsum_expr : public expression_tag {
 public:
  using value_type = R;
  using dims = dims_of_t<E>;
  static constexpr std::size_t rank = dims::size;
  using fusion_traits = plan::opaque_node;

  explicit typed_einsum_expr(E e) : e_(std::move(e)) {}
  std::array<std::size_t, rank> extents() const { return e_.extents(); }
  template <class Root>
  auto evaluator() const {
    return materializing_evaluator<Root>(*this);
  }
  void eval_to(const strided<R, rank>& dst) const {
    using V = value_type_of_t<E>;
    if constexpr (is_bf16_v<V> && std::is_same_v<R, float>) {
      e_.eval_sums_to(dst);
    } else if constexpr (is_bf16_v<V>) {
      const auto sums = eval(typed_einsum_expr<float, const E&>(e_));
      cast<R>(sums).eval_to(dst);
    } else {
      const tensor_for_t<V, dims> result(e_);
      cast<R>(result).eval_to(dst);
    }
  }

 private:
  closure_t<E> e_;
};

/// einsum with a stated result type R: operands of one value type V run as
/// einsum (bf16 ones summed in float32) and give R; operands of different
/// value types are converted to R's accumulator type first (float for R =
/// bf16), exactly where that widens them.
template <class R, class Out, class... Ops>
auto make_einsum_as(Ops&&... ops) {
  if constexpr (!(named_expression<Ops> && ...) || (is_invalid_v<Ops> || ...)) {
    return make_einsum<Out>(std::forward<Ops>(ops)...);  // reports
  } else if constexpr (!(std::is_same_v<value_type_of_t<Ops>, value_type_of_t<std::tuple_element_t<0, std::tuple<Ops...>>>> && ...)) {
    using C = accumulator_t<R>;
    const auto to_c = []<class X>(X&& x) -> decltype(auto) {
      if constexpr (std::is_same_v<value_type_of_t<X>, C>)
        return static_cast<X&&>(x);
      else
        return cast<C>(static_cast<X&&>(x));
    };
    return make_einsum_as<R, Out>(to_c(std::forward<Ops>(ops))...);
  } else {
    auto e = make_einsum<Out>(std::forward<Ops>(ops)...);
    using E = decltype(e);
    if constexpr (is_invalid_v<E> || std::is_same_v<value_type_of_t<E>, R>)
      return e;
    else
      return typed_einsum_expr<R, E>(std::move(e));
  }
}

/// The string form's mode for a stated result type.
template <class R>
struct typed_einsum_mode;

}  // namespace detail
}  // namespace dimsum

// The string form needs make_einsum (above) and includes this header for
// it; when it is included first, its definitions follow this file, so the
// entry point the public functions below call is declared here.
namespace dimsum::detail {
template <fixed_string S, bool Rearrange, class... Args>
auto einsum_string_args(Args&&... args);
template <fixed_string S, class Mode, class... Args>
auto pattern_args(const Mode& mode, Args&&... args);
}  // namespace dimsum::detail

#include <dimsum/ops/detail/einsum_string_form.hpp>

namespace dimsum {

/// einsum, string spelling: `einsum<"a b, b c -> a c">(x, y)`. Each input
/// term lists its operand's dims in order; the output term lists the result
/// dims; dims not in the output are summed. A group `(h d)` in an input term
/// splits that operand dim (extent product checked); a named group
/// `hd(h d)` in the output merges dims into the dim `hd`. Trailing dim
/// values (`nheads{8}`) give the extent of group labels no operand has.
template <fixed_string S, class... Args>
  requires(sizeof...(Args) > 0)
auto einsum(Args&&... args) {
  return detail::einsum_string_args<S, false>(std::forward<Args>(args)...);
}

/// einsum with a stated result type, string spelling:
/// `einsum<"batch posn d_model, d_model d_ff -> batch posn d_ff", float>(x, w)`.
/// Operands of different value types (bf16 and float) may be contracted
/// only this way; bf16 operands are summed in float32 and, with R = float,
/// the sums are the result (no rounding to bf16 in between).
template <fixed_string S, class R, class... Args>
  requires(sizeof...(Args) > 0 && (std::is_arithmetic_v<R> || is_bf16_v<R>))
auto einsum(Args&&... args) {
  return detail::pattern_args<S>(detail::typed_einsum_mode<R>{}, std::forward<Args>(args)...);
}

/// rearrange: an einsum of one operand that keeps every dim, e.g.
/// `rearrange<"batch posn hd(nheads d_head) -> batch nheads posn d_head">(x, nheads{8})`.
/// Dropping a dim is a compile error (use einsum or sum to reduce).
template <fixed_string S, class... Args>
  requires(sizeof...(Args) > 0)
auto rearrange(Args&&... args) {
  return detail::einsum_string_args<S, true>(std::forward<Args>(args)...);
}

/// einsum, named spelling: `einsum<a, c>(x, y)` keeps dims a and c, in that
/// order, and sums every other dim of the operands.
template <dimension... Out, class... Ops>
auto einsum(Ops&&... ops) {
  return detail::make_einsum<dim_list<Out...>>(std::forward<Ops>(ops)...);
}

/// einsum with a stated result type, named spelling: `einsum<float, batch,
/// posn, d_ff>(x, w)` (see the string form above).
template <class R, dimension... Out, class... Ops>
  requires(!dimension<R> && (std::is_arithmetic_v<R> || is_bf16_v<R>))
auto einsum(Ops&&... ops) {
  return detail::make_einsum_as<R, dim_list<Out...>>(std::forward<Ops>(ops)...);
}

}  // namespace dimsum
