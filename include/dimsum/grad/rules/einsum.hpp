#pragma once
/// \file
/// einsum and rearrange on vars (both spellings, grouped axes, any number
/// of operands). The gradient with respect to operand j is itself an
/// einsum: of the output's gradient with the other operands, onto operand
/// j's dims (DESIGN.md §10); dims summed out of operand j alone are
/// broadcast back. Grouped axes are handled on the flat labels: a group
/// `(nheads d_head)` of a row-major tensor is the same memory as its split
/// dims, so the rule contracts flat views and the result lands in operand
/// j's gradient unchanged.
///
///     auto q = dimsum::einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w_q);

#include <array>
#include <cstddef>
#include <memory>
#include <tuple>
#include <utility>

#include <dimsum/grad/lazy_attention.hpp>
#include <dimsum/grad/lazy_var.hpp>
#include <dimsum/grad/rules/attention.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/ops/einsum.hpp>

namespace dimsum::grad::detail {

/// Positions in operand J's flat dims of the labels that the output or
/// another operand also has (the others are summed out of J alone).
template <std::size_t J, class FlatOut, class... Flats>
constexpr auto kept_positions() {
  using FJ = std::tuple_element_t<J, std::tuple<Flats...>>;
  constexpr auto shared = [](std::string_view n) {
    if (dimsum::detail::find_name(FlatOut::names, n) != dimsum::detail::npos) return true;
    std::size_t k = 0;
    bool found = false;
    ((found = found || (k++ != J && dimsum::detail::find_name(Flats::names, n) != dimsum::detail::npos)), ...);
    return found;
  };
  constexpr std::size_t count = [&] {
    std::size_t c = 0;
    for (auto n : FJ::names) c += shared(n) ? 1 : 0;
    return c;
  }();
  std::array<std::size_t, count> out{};
  std::size_t c = 0;
  for (std::size_t i = 0; i < FJ::size; ++i)
    if (shared(FJ::names[i])) out[c++] = i;
  return out;
}

/// Sends the gradient g (flat output dims FlatOut, extents gext) to operand
/// J: an einsum of g with the other operands' flat views onto J's flat dims.
template <std::size_t J, class FlatOut, class... Flats, class T, class Nodes, class Exts>
void einsum_grad_to(const T* g, const std::array<std::size_t, FlatOut::size>& gext, const Nodes& nodes,
                    const Exts& exts) {
  auto& nj = *std::get<J>(nodes);
  if (!nj.requires_grad) return;
  using FJ = std::tuple_element_t<J, std::tuple<Flats...>>;
  using Keep = dimsum::detail::select_t<FJ, kept_positions<J, FlatOut, Flats...>()>;
  constexpr std::size_t n = sizeof...(Flats);
  const view_for_t<const T, FlatOut> gv(g, gext, dimsum::detail::row_major_strides(gext));
  auto views = [&]<std::size_t... K>(std::index_sequence<K...>) {
    return std::make_tuple(view_for_t<const T, Flats>(std::get<K>(nodes)->value().data(), std::get<K>(exts),
                                                      dimsum::detail::row_major_strides(std::get<K>(exts)))...);
  }(std::make_index_sequence<n>{});
  auto contraction = [&]<std::size_t... K>(std::index_sequence<K...>) {
    return dimsum::detail::make_einsum<Keep>(gv, std::get<(K < J ? K : K + 1)>(views)...);
  }(std::make_index_sequence<n - 1>{});
  using TJ = tensor_for_t<T, FJ>;
  if constexpr (is_bf16_v<T>) {
    // bf16: the contraction's float32 sums (the bf16 GEMM, float32
    // accumulation) go into operand J's float32 gradient sum unrounded.
    using W = tensor_for_t<float, FJ>;
    if constexpr (Keep::size == FJ::size) {
      // written into the float32 sum in place: by the GEMM (beta = 0 for
      // the first contribution, 1 after), else from a buffer
      const auto& ext = std::get<J>(exts);
      using Node = std::remove_cvref_t<decltype(nj)>;
      if (!nj.has_wide) {
        nj.wide = uninitialized_tensor<typename Node::wide_tensor_type>(nj.value().extents());
        contraction.eval_sums_to(strided<float, FJ::size>{nj.wide.data(), ext, dimsum::detail::row_major_strides(ext)});
        nj.has_wide = true;
      } else if constexpr (decltype(contraction)::uses_gemm && !decltype(contraction)::uses_fused_attention) {
        contraction.accumulate_sums_to(
            strided<float, FJ::size>{nj.wide.data(), ext, dimsum::detail::row_major_strides(ext)});
      } else {
        const W sums = dimsum::detail::typed_einsum_expr<float, decltype(contraction)>(std::move(contraction));
        nj.accumulate_wide_raw(sums.data());
      }
    } else {
      const tensor_for_t<float, Keep> reduced =
          dimsum::detail::typed_einsum_expr<float, decltype(contraction)>(std::move(contraction));
      const W full = W::from_extents(std::get<J>(exts)) + reduced;
      nj.accumulate_wide_raw(full.data());
    }
  } else if constexpr (Keep::size == FJ::size) {
    // Straight into operand J's gradient, which has the flat dims' layout:
    // added by the GEMM kernel (beta = 1) when there is one, else written.
    const auto& ext = std::get<J>(exts);
    auto& grad = nj.grad;
    using Node = std::remove_cvref_t<decltype(nj)>;
    if (!nj.has_grad) {
      grad = uninitialized_tensor<typename Node::tensor_type>(nj.value().extents());
      contraction.eval_to(strided<T, FJ::size>{grad.data(), ext, dimsum::detail::row_major_strides(ext)});
      nj.has_grad = true;
    } else if constexpr (decltype(contraction)::uses_gemm) {
      contraction.accumulate_to(strided<T, FJ::size>{grad.data(), ext, dimsum::detail::row_major_strides(ext)});
    } else {
      const TJ full = std::move(contraction);
      nj.accumulate_raw(full.data());
    }
  } else {
    const tensor_for_t<T, Keep> reduced = std::move(contraction);
    const TJ full = TJ::from_extents(std::get<J>(exts)) + reduced;
    nj.accumulate_raw(full.data());
  }
}

/// Records a contraction whose value is computed; its operands are the
/// vars `ops` with flat dims Flats (their groups split) and flat extents
/// `exts`; the output's flat dims are FlatOut with extents `out_ext`.
template <class FlatOut, class... Flats, class Value, class... Vs>
auto record_einsum(Value&& value, const std::tuple<Vs...>& ops,
                   const std::tuple<std::array<std::size_t, Flats::size>...>& exts,
                   const std::array<std::size_t, FlatOut::size>& out_ext) {
  auto nodes = std::apply([](const auto&... v) { return std::make_tuple(v.node()...); }, ops);
  tape* t = std::apply([](const auto&... v) { return common_tape({v.owner()...}); }, ops);
  const bool rg = std::apply([](const auto&... v) { return (v.requires_grad() || ...); }, ops);
  return record(t, std::forward<Value>(value), rg, [nodes, exts, out_ext](const auto& g, const auto&) {
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      (einsum_grad_to<J, FlatOut, Flats...>(g.data(), out_ext, nodes, exts), ...);
    }(std::index_sequence_for<Flats...>{});
  });
}

template <class... X>
constexpr std::size_t leading_operands() {
  std::size_t n = 0;
  for (bool is_op : {(var_like<X> || named_expression<X>)...}) {
    if (!is_op) break;
    ++n;
  }
  return n;
}

/// The string spelling on vars: the forward is dimsum's einsum of the
/// values; the flat dims and extents come from the same parser, `...`
/// expansion and group resolution the forward used (size-1 axes, which
/// hold one element, drop out of the flat dims).
template <fixed_string S, bool Rearrange, class... Args>
auto einsum_string_var(Args&&... args) {
  namespace dd = dimsum::detail;
  constexpr std::size_t n_ops = leading_operands<Args...>();
  auto all = std::forward_as_tuple(std::forward<Args>(args)...);
  using All = std::tuple<Args&&...>;
  return [&]<std::size_t... J, std::size_t... X>(std::index_sequence<J...>, std::index_sequence<X...>) {
    auto ops = std::make_tuple(lift(std::get<J>(std::move(all)))...);
    using Ops = decltype(ops);
    auto fwd = dd::einsum_string_args<S, Rearrange>(std::get<J>(ops).value()..., std::get<n_ops + X>(all)...);
    if constexpr (is_invalid_v<decltype(fwd)>) {
      return invalid_expression{};
    } else {
      using T = value_type_of_t<decltype(fwd)>;
      tensor_for_t<T, dims_of_t<decltype(fwd)>> value = std::move(fwd);
      using XL = dim_list<std::remove_cvref_t<std::tuple_element_t<n_ops + X, All>>...>;
      // The string the forward ran: `...` expanded for these operands.
      static constexpr auto SE = dd::pattern_string_v<S, false, typename std::tuple_element_t<J, Ops>::dims...>;
      using P = dd::pattern_flat_dims<SE, XL, typename std::tuple_element_t<J, Ops>::dims...>;
      using Flats = typename P::flats;
      using FlatOut = typename P::template out<false>;
      const auto values = std::forward_as_tuple(std::get<J>(ops).value()...);
      const std::tuple<std::remove_cvref_t<std::tuple_element_t<n_ops + X, All>>...> extras{
          std::get<n_ops + X>(all)...};
      const std::tuple<std::array<std::size_t, std::tuple_element_t<J, Flats>::size>...> exts{
          dd::flat_extents<SE, J, std::tuple_element_t<J, Flats>>(values, extras)...};
      const auto out_ext = dd::flat_output_extents<FlatOut, std::tuple_element_t<J, Flats>...>(exts, extras);
      return record_einsum<FlatOut, std::tuple_element_t<J, Flats>...>(std::move(value), ops, exts, out_ext);
    }
  }(std::make_index_sequence<n_ops>{}, std::make_index_sequence<sizeof...(Args) - n_ops>{});
}

/// The named spelling on vars (see `einsum<Out...>` below).
template <class OutList, class A, class... Rest>
auto einsum_named_var(A&& a, Rest&&... rest) {
  auto ops = std::make_tuple(lift(std::forward<A>(a)), lift(std::forward<Rest>(rest))...);
  auto fwd = std::apply([](const auto&... v) { return dimsum::detail::make_einsum<OutList>(v.value()...); }, ops);
  if constexpr (is_invalid_v<decltype(fwd)>) {
    return invalid_expression{};
  } else {
    using T = value_type_of_t<decltype(fwd)>;
    using R = dims_of_t<decltype(fwd)>;
    tensor_for_t<T, R> value = std::move(fwd);
    const auto out_ext = value.extents();
    const auto exts = std::apply([](const auto&... v) { return std::make_tuple(v.extents()...); }, ops);
    return std::apply(
        [&](const auto&... v) {
          return record_einsum<R, typename std::remove_cvref_t<decltype(v)>::dims...>(std::move(value), ops, exts,
                                                                                       out_ext);
        },
        ops);
  }
}

/// The two spellings of einsum, as the tensor expression (`tensor`) and as
/// the recorded operation on vars (`recorded`).
template <fixed_string S>
struct string_einsum {
  template <class... X>
  static auto tensor(X&&... x) {
    return dimsum::detail::einsum_string_args<S, false>(std::forward<X>(x)...);
  }
  template <class... X>
  static auto recorded(X&&... x) {
    return einsum_string_var<S, false>(std::forward<X>(x)...);
  }
};
template <class OutList>
struct named_einsum {
  template <class... X>
  static auto tensor(X&&... x) {
    return dimsum::detail::make_einsum<OutList>(std::forward<X>(x)...);
  }
  template <class... X>
  static auto recorded(X&&... x) {
    return einsum_named_var<OutList>(std::forward<X>(x)...);
  }
};

/// Whether two vars make the score einsum of a possible attention chain:
/// both recorded (not lazy), of one value type, float, double or bf16.
template <class A, class B>
inline constexpr bool score_operands = [] {
  if constexpr (recorded_var<A> && recorded_var<B>) {
    using T = typename std::remove_cvref_t<A>::value_type;
    return std::is_same_v<T, typename std::remove_cvref_t<B>::value_type> &&
           (std::is_same_v<T, float> || std::is_same_v<T, double> || is_bf16_v<T>);
  } else {
    return false;
  }
}();

/// The leaves of a lazy chain past the score operands: the vars its
/// learned parts read (factors, affine bias slopes).
template <class Leaves>
auto learned_leaves(const Leaves& leaves) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::make_tuple(std::get<I + 2>(leaves)...);
  }(std::make_index_sequence<std::tuple_size_v<Leaves> - 2>{});
}

/// Whether the lazy chain P is of bf16 vars and has learned parts (a
/// factor, slope, sink or table var): the fused kernel's learned sums are
/// float and per batch index, which a bf16 var's gradient does not take
/// yet, so such a chain is recorded unfused.
template <class P>
inline constexpr bool learned_bf16_chain =
    is_bf16_v<value_type_of_t<P>> && (std::tuple_size_v<std::remove_cvref_t<decltype(std::declval<const P&>().leaves())>> > 2);

/// The fused attention node of the pattern `full` (an outer einsum whose
/// softmax operand is the lazy chain p, the other operand the var v): one
/// tape node, the chain's score operands q and k as the kernel reads them,
/// the vars of its learned parts as the node's other inputs.
template <class P, class V, class Full>
auto record_fused_attention(const P& p, const V& v, Full&& full) {
  using F = std::remove_cvref_t<Full>;
  constexpr std::size_t ko = plan::fusion::match<F>::facts.key_operand;
  const auto& q = std::get<1 - ko>(p.leaves());
  const auto& k = std::get<ko>(p.leaves());
  // The node calls f in both passes: it returns the pattern, which reads
  // the vars' values (their nodes are the node's) and the masks and
  // biases the chain owns (kept alive by the copy of p).
  auto z = fused_attention_node(
      q, k, v, [e = F(std::forward<Full>(full)), p](const auto&, const auto&, const auto&) -> const F& { return e; },
      learned_leaves(p.leaves()));
  return fused_var<decltype(z), F>(std::move(z));
}

/// The recorded var among a lazy chain and a var.
template <class A, class B>
const auto& var_of(const A& a, const B& b) {
  if constexpr (lazy_var_like<A>)
    return b;
  else
    return a;
}

/// einsum of two operands on vars: two recorded vars start a lazy
/// attention chain; a lazy chain with a var completes it as one fused node
/// when the whole is the attention pattern; anything else is recorded as
/// the contraction (a lazy operand materialised).
template <class Form, class A, class B>
auto einsum_pair(A&& a, B&& b) {
  using VA = std::remove_cvref_t<A>;
  using VB = std::remove_cvref_t<B>;
  if constexpr (score_operands<A, B>) {
    using E = decltype(Form::tensor(a.value(), b.value()));
    if constexpr (!is_invalid_v<E> && plan::fusion::chain<std::remove_cvref_t<E>>::k == plan::fusion::kind::base)
      return make_lazy(Form::tensor(a.value(), b.value()), std::make_tuple(VA(a), VB(b)),
                       [a = VA(a), b = VB(b)] { return Form::recorded(a, b); });
    else
      return Form::recorded(std::forward<A>(a), std::forward<B>(b));
  } else if constexpr ((lazy_var_like<A> && recorded_var<B>) || (recorded_var<A> && lazy_var_like<B>)) {
    auto full = [&] {
      if constexpr (lazy_var_like<A>)
        return Form::tensor(expression_copy(a), b.value());
      else
        return Form::tensor(a.value(), expression_copy(b));
    }();
    if constexpr (is_invalid_v<decltype(full)>)
      return invalid_expression{};
    else if constexpr (uses_fused_attention_v<decltype(full)> && !learned_bf16_chain<std::remove_cvref_t<decltype(chain_of(a, b))>>)
      return record_fused_attention(chain_of(a, b), var_of(a, b), std::move(full));
    else
      return Form::recorded(std::forward<A>(a), std::forward<B>(b));
  } else {
    return Form::recorded(std::forward<A>(a), std::forward<B>(b));
  }
}

}  // namespace dimsum::grad::detail

namespace dimsum {

/// einsum, string spelling, on vars (any operand a `grad::var`; tensors
/// among the operands are constants): records the contraction on the tape.
/// Same string rules and errors as on tensors.
template <fixed_string S, class A, class... Rest>
  requires(grad::detail::any_var_v<A, Rest...>)
auto einsum(A&& a, Rest&&... rest) {
  if constexpr (sizeof...(Rest) == 1)
    return grad::detail::einsum_pair<grad::detail::string_einsum<S>>(std::forward<A>(a), std::forward<Rest>(rest)...);
  else
    return grad::detail::einsum_string_var<S, false>(std::forward<A>(a), std::forward<Rest>(rest)...);
}

/// rearrange on a var: records the permutation / regrouping; its gradient
/// is the inverse rearrangement.
template <fixed_string S, class A, class... Rest>
  requires(grad::detail::any_var_v<A, Rest...>)
auto rearrange(A&& a, Rest&&... rest) {
  return grad::detail::einsum_string_var<S, true>(std::forward<A>(a), std::forward<Rest>(rest)...);
}

/// einsum, named spelling, on vars: `einsum<a, c>(x, y)` keeps a and c and
/// sums every other dim; records the contraction on the tape.
template <dimension... Out, class A, class... Rest>
  requires(grad::detail::any_var_v<A, Rest...>)
auto einsum(A&& a, Rest&&... rest) {
  if constexpr (sizeof...(Rest) == 1)
    return grad::detail::einsum_pair<grad::detail::named_einsum<dim_list<Out...>>>(std::forward<A>(a),
                                                                                 std::forward<Rest>(rest)...);
  else
    return grad::detail::einsum_named_var<dim_list<Out...>>(std::forward<A>(a), std::forward<Rest>(rest)...);
}

}  // namespace dimsum
