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
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <dimsum/core/einsum_string.hpp>
#include <dimsum/kernels/reference.hpp>
#include <dimsum/ops/elementwise.hpp>
#include <dimsum/plan/contraction_plan.hpp>

namespace dimsum {

/// A lazy contraction of `Ops` into the dims `Out` (a dim_list).
template <class Out, class... Ops>
class einsum_expr : public expression_tag {
 public:
  using value_type = value_type_of_t<std::tuple_element_t<0, std::tuple<Ops...>>>;
  using dims = Out;
  static constexpr std::size_t rank = Out::size;
  using plan_type = plan::contraction_plan<Out, dims_of_t<Ops>...>;
  using operands_type = std::tuple<detail::closure_t<Ops>...>;

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

  template <class... M>
  void contract(const strided<value_type, rank>& dst, const M&... m) const {
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

/// Checks each operand's static extents against those of the operands
/// before it (the union keeps a static extent wherever one was seen).
template <class Acc, class... Rest>
constexpr bool check_static_agreement_fold() {
  if constexpr (sizeof...(Rest) == 0) {
    return true;
  } else {
    return []<class Next, class... Tail>(std::type_identity<Next>, std::type_identity<Tail>...) {
      if constexpr (!check_static_agreement<Acc, Next>())
        return false;
      else
        return check_static_agreement_fold<union_t<Acc, Next>, Tail...>();
    }(std::type_identity<Rest>{}...);
  }
}
template <class... Ls>
constexpr bool check_static_agreement_all() {
  return check_static_agreement_fold<dim_list<>, Ls...>();
}

/// Checks shared by both spellings, then builds the node. `Out` holds the
/// output dims as the user named them; the result takes each one's type
/// from the operands (so static extents carry over).
template <class Out, class... Ops>
auto make_einsum(Ops&&... ops) {
  if constexpr (sizeof...(Ops) == 0) {
    report<einsum_needs_at_least_one_operand<Out>>();
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
    } else if constexpr (!check_static_agreement_all<dims_of_t<Ops>...>()) {
      return invalid_expression{};
    } else if constexpr (other_type != npos) {
      report<value_type_mismatch<T0, value_type_of_t<std::tuple_element_t<other_type, std::tuple<Ops...>>>>>();
      return invalid_expression{};
    } else {
      constexpr auto pos = positions_in<Out, U>();
      using R = select_t<U, pos>;
      return einsum_expr<R, Ops...>(std::forward<Ops>(ops)...);
    }
  }
}

// ---- the string spelling ----

template <fixed_string S>
inline constexpr parsed_einsum parsed_v = parse_einsum(S.view());

// The label `I` of term `T` (T == n_inputs: the output) as a chars<> pack.
template <fixed_string S, std::size_t T, std::size_t I>
struct label_getter {
  constexpr std::string_view operator()() const {
    return T == parsed_v<S>.n_inputs ? parsed_v<S>.output.labels[I] : parsed_v<S>.inputs[T].labels[I];
  }
};
template <fixed_string S, std::size_t T, std::size_t I>
using label_chars_t = to_chars_t<label_getter<S, T, I>>;

template <fixed_string S, std::size_t T, class Seq>
struct term_labels;
template <fixed_string S, std::size_t T, std::size_t... I>
struct term_labels<S, T, std::index_sequence<I...>> {
  using type = labels<label_chars_t<S, T, I>...>;
};

/// Reports a syntax error of the string S, if any.
template <fixed_string S>
constexpr bool check_einsum_syntax() {
  constexpr parsed_einsum p = parsed_v<S>;
  using E = einsum_parse_error;
  using Pos = position_c<p.error_pos>;
  if constexpr (p.error == E::none) {
    return true;
  } else {
    if constexpr (p.error == E::no_arrow)
      report<einsum_string_has_no_arrow<Pos>>();
    else if constexpr (p.error == E::more_than_one_arrow)
      report<einsum_string_has_more_than_one_arrow<Pos, count_c<2>>>();
    else if constexpr (p.error == E::empty_input_term)
      report<einsum_string_has_an_empty_input_term<Pos, count_c<p.error_term>>>();
    else if constexpr (p.error == E::invalid_character)
      report<einsum_string_has_an_invalid_character<Pos, count_c<p.error_term>, character<S.data[p.error_pos]>>>();
    else if constexpr (p.error == E::unbalanced_parentheses)
      report<einsum_string_has_unbalanced_parentheses<Pos, count_c<p.error_term>>>();
    else if constexpr (p.error == E::empty_group)
      report<einsum_string_has_an_empty_group<Pos, count_c<p.error_term>>>();
    else if constexpr (p.error == E::too_many_labels)
      report<einsum_string_has_too_many_labels<Pos>>();
    else if constexpr (p.error == E::label_twice_in_a_term) {
      struct get {
        constexpr std::string_view operator()() const { return parsed_v<S>.error_label; }
      };
      report<einsum_term_names_a_label_twice<to_chars_t<get>, count_c<p.error_term>>>();
    }
    return false;
  }
}

// How term J of S lists operand J's dims L.
template <fixed_string S, std::size_t J, class L>
struct einsum_term_match {
  static constexpr const einsum_term& t = parsed_v<S>.inputs[J];
  // The first label that is not a dim of the operand.
  static constexpr std::size_t foreign = [] {
    for (std::size_t i = 0; i < t.n_labels; ++i)
      if (find_name(L::names, t.labels[i]) == npos) return i;
    return npos;
  }();
  // The first dim of the operand that the term does not list.
  static constexpr std::size_t unlisted = [] {
    for (std::size_t i = 0; i < L::size; ++i) {
      bool found = false;
      for (std::size_t k = 0; k < t.n_labels; ++k) found = found || t.labels[k] == L::names[i];
      if (!found) return i;
    }
    return npos;
  }();
  static constexpr bool in_order = [] {
    for (std::size_t i = 0; i < L::size; ++i)
      if (t.labels[i] != L::names[i]) return false;
    return true;
  }();
};

/// Reports the first way term J of S fails to list operand J's dims L in
/// order; true when it lists them exactly.
template <fixed_string S, std::size_t J, class L>
constexpr bool check_einsum_term() {
  using M = einsum_term_match<S, J, L>;
  if constexpr (M::foreign != npos) {
    report<einsum_label_is_not_a_dim_of_its_operand<label_chars_t<S, J, M::foreign>, operand<J>,
                                                    diagnostic_dims_t<L>>>();
    return false;
  } else if constexpr (M::unlisted != npos) {
    report<einsum_term_does_not_list_every_dim_of_its_operand<diagnostic_name_t<at_t<L, M::unlisted>>, operand<J>,
                                                              diagnostic_dims_t<L>>>();
    return false;
  } else if constexpr (!M::in_order) {
    report<einsum_term_lists_dims_in_a_different_order_than_its_operand<
        operand<J>, typename term_labels<S, J, std::make_index_sequence<M::t.n_labels>>::type,
        diagnostic_dims_t<L>>>();
    return false;
  } else {
    return true;
  }
}

template <fixed_string S, class... Ls>
constexpr bool check_einsum_terms() {
  return [&]<std::size_t... J>(std::index_sequence<J...>) {
    bool ok = true;
    ((ok = ok && check_einsum_term<S, J, Ls>()), ...);
    return ok;
  }(std::index_sequence_for<Ls...>{});
}

/// The output dims of S as a dim_list, each taken from the operands.
template <fixed_string S, class U, class Seq = std::make_index_sequence<parsed_v<S>.output.n_labels>>
struct einsum_output;
template <fixed_string S, class U, std::size_t... I>
struct einsum_output<S, U, std::index_sequence<I...>> {
  static constexpr std::array<std::size_t, sizeof...(I)> pos{find_name(U::names, parsed_v<S>.output.labels[I])...};
  static constexpr std::size_t missing = [] {
    for (std::size_t i = 0; i < sizeof...(I); ++i)
      if (pos[i] == npos) return i;
    return npos;
  }();
};

template <fixed_string S, class... Ops>
auto einsum_string(Ops&&... ops) {
  constexpr parsed_einsum p = parsed_v<S>;
  if constexpr (!check_einsum_syntax<S>()) {
    return invalid_expression{};
  } else if constexpr ((is_invalid_v<Ops> || ...)) {
    return invalid_expression{};
  } else if constexpr (p.n_inputs != sizeof...(Ops)) {
    report<einsum_term_count_does_not_match_operand_count<count_c<p.n_inputs>, count_c<sizeof...(Ops)>>>();
    return invalid_expression{};
  } else if constexpr (!check_einsum_terms<S, dims_of_t<Ops>...>()) {
    return invalid_expression{};
  } else {
    using U = typename union_all<dims_of_t<Ops>...>::type;
    using O = einsum_output<S, U>;
    if constexpr (O::missing != npos) {
      report<einsum_output_label_is_not_in_any_operand<label_chars_t<S, p.n_inputs, O::missing>>>();
      return invalid_expression{};
    } else {
      return make_einsum<select_t<U, O::pos>>(std::forward<Ops>(ops)...);
    }
  }
}

}  // namespace detail

/// einsum, string spelling: `einsum<"a b, b c -> a c">(x, y)`. Each input
/// term lists its operand's dims in order; the output term lists the result
/// dims; dims not in the output are summed.
template <fixed_string S, named_expression... Ops>
auto einsum(Ops&&... ops) {
  return detail::einsum_string<S>(std::forward<Ops>(ops)...);
}

/// einsum, named spelling: `einsum<a, c>(x, y)` keeps dims a and c, in that
/// order, and sums every other dim of the operands.
template <dimension... Out, named_expression... Ops>
auto einsum(Ops&&... ops) {
  return detail::make_einsum<dim_list<Out...>>(std::forward<Ops>(ops)...);
}

}  // namespace dimsum
