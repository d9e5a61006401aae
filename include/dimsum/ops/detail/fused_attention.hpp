#pragma once
/// \file
/// Recognises attention in the expression types and runs it on the fused
/// kernel (kernels/attention.hpp). The pattern, read from the outside in:
///
///     einsum( softmax<K>( chain( einsum(Q, Kt) ) ), V )      (either operand order)
///
/// where `chain` is any sequence (possibly empty) of
///   - a scale:  `x * s`, `s * x`, `x / s` with a scalar s;
///   - `causal_mask<Qd, K>(x, value)`;
///   - `masked_fill(x, mask, value)` with any boolean mask (broadcast by name).
/// The score einsum must contract exactly one dim (d) and keep one query dim
/// Qd and the key dim K besides its batch dims; the outer einsum must sum
/// exactly K and keep every other dim of the pattern, and V must have K,
/// some of the batch dims and exactly one value dim. Anything else, or any
/// part the user evaluated into a tensor, takes the unfused path (same
/// results). `uses_fused_attention_v<E>` says which.

#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <dimsum/kernels/attention.hpp>
#include <dimsum/ops/elementwise.hpp>
#include <dimsum/plan/contraction_plan.hpp>

namespace dimsum {

template <dimension D, class E>
class softmax_expr;
template <dimension Q, dimension K, class E>
class causal_mask_expr;
template <class Out, class... Ops>
class einsum_expr;

namespace detail::fused {

template <class X>
using bare = std::remove_cvref_t<X>;

enum class kind { none, base, scale_right, scale_left, divide, masked_fill, causal };

/// What sits between the softmax and the score einsum.
template <class E>
struct chain {
  static constexpr kind k = kind::none;
  static constexpr bool ok = false;
  static constexpr std::size_t stages = 0;
  using base = void;
  static constexpr bool causal_ok(std::string_view, std::string_view) { return false; }
};

template <class S, class A, class B>
struct chain<einsum_expr<S, A, B>> {
  static constexpr kind k = kind::base;
  static constexpr bool ok = true;
  static constexpr std::size_t stages = 0;
  using base = einsum_expr<S, A, B>;
  static constexpr bool causal_ok(std::string_view, std::string_view) { return true; }
};

template <kind K, class X>
struct wrap {
  using inner = chain<bare<X>>;
  static constexpr kind k = K;
  static constexpr bool ok = inner::ok;
  static constexpr std::size_t stages = inner::stages + 1;
  using base = typename inner::base;
  static constexpr bool causal_ok(std::string_view q, std::string_view key) { return inner::causal_ok(q, key); }
};

template <class T>
inline constexpr bool is_scalar_expr = false;
template <class T>
inline constexpr bool is_scalar_expr<scalar_expr<T>> = true;

template <class Op, class... Args>
struct elementwise_chain : chain<void> {};
template <class X, class T>
struct elementwise_chain<ops::multiplies, X, scalar_expr<T>> : wrap<kind::scale_right, X> {};
template <class X, class T>
  requires(!is_scalar_expr<X>)
struct elementwise_chain<ops::multiplies, scalar_expr<T>, X> : wrap<kind::scale_left, X> {};
template <class X, class T>
struct elementwise_chain<ops::divides, X, scalar_expr<T>> : wrap<kind::divide, X> {};
template <class X, class M, class T>
struct elementwise_chain<ops::masked_fill, X, M, scalar_expr<T>> : wrap<kind::masked_fill, X> {};

template <class Op, class... Args>
struct chain<elementwise_expr<Op, Args...>> : elementwise_chain<Op, bare<Args>...> {};

template <dimension Q, dimension K, class X>
struct chain<causal_mask_expr<Q, K, X>> : wrap<kind::causal, X> {
  static constexpr bool causal_ok(std::string_view q, std::string_view key) {
    return Q::name.view() == q && K::name.view() == key && wrap<kind::causal, X>::causal_ok(q, key);
  }
};

template <class E>
struct softmax_parts {
  static constexpr bool ok = false;
};
template <dimension D, class X>
struct softmax_parts<softmax_expr<D, X>> {
  static constexpr bool ok = true;
  using dim = D;
  using scores = bare<X>;
};

/// The labels of the fused kernel, found from the two plans.
struct shape_facts {
  bool ok = false;
  std::size_t key_operand = 0;  // which operand of the score einsum has K
  std::string_view q, k, d, dv;
};

template <class Base, class KD>
constexpr shape_facts score_facts() {
  using plan_t = typename Base::plan_type;
  shape_facts f;
  const std::string_view key = KD::name.view();
  std::size_t kl = npos;
  for (std::size_t l = 0; l < plan_t::n_labels; ++l)
    if (plan_t::labels[l] == key) kl = l;
  if (kl == npos) return f;
  const plan::role key_role = plan_t::roles[kl];
  if (key_role != plan::role::m && key_role != plan::role::n) return f;
  const plan::role query_role = key_role == plan::role::n ? plan::role::m : plan::role::n;
  f.key_operand = key_role == plan::role::n ? 1 : 0;
  std::size_t nq = 0, nd = 0;
  for (std::size_t l = 0; l < plan_t::n_labels; ++l) {
    const plan::role r = plan_t::roles[l];
    if (r == query_role) {
      ++nq;
      f.q = plan_t::labels[l];
    } else if (r == plan::role::k) {
      ++nd;
      f.d = plan_t::labels[l];
    } else if (r == plan::role::reduce_a || r == plan::role::reduce_b) {
      return f;
    }
  }
  if (nq != 1 || nd != 1 || plan_t::count(plan::role::batch) > kernels::max_group_rank) return f;
  f.k = key;
  f.ok = true;
  return f;
}

/// Everything the runner needs to know about an outer einsum E, or ok ==
/// false when E is not fused attention.
template <class E>
struct match {
  static constexpr bool value = false;
};

template <class Out, class A, class B>
struct match<einsum_expr<Out, A, B>> {
  static constexpr std::size_t p_index = softmax_parts<bare<A>>::ok ? 0 : softmax_parts<bare<B>>::ok ? 1 : 2;
  static constexpr std::size_t v_index = 1 - (p_index == 1 ? 1 : 0);

  static constexpr shape_facts facts = [] {
    if constexpr (p_index == 2) {
      return shape_facts{};
    } else {
      using P = bare<std::tuple_element_t<p_index, std::tuple<A, B>>>;
      using V = bare<std::tuple_element_t<v_index, std::tuple<A, B>>>;
      using KD = typename softmax_parts<P>::dim;
      using C = chain<typename softmax_parts<P>::scores>;
      using T = value_type_of_t<P>;
      if constexpr (!C::ok) {
        return shape_facts{};
      } else if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
        return shape_facts{};
      } else if constexpr (!std::is_same_v<value_type_of_t<typename C::base>, T> ||
                           !std::is_same_v<value_type_of_t<V>, T> || C::stages > kernels::max_score_stages) {
        return shape_facts{};
      } else {
        shape_facts f = score_facts<typename C::base, KD>();
        if (!f.ok || !C::causal_ok(f.q, f.k)) return shape_facts{};
        // The outer einsum sums K alone and keeps every other pattern dim.
        using outer_plan = plan::contraction_plan<Out, dims_of_t<A>, dims_of_t<B>>;
        using S = dims_of_t<P>;
        using VD = dims_of_t<V>;
        for (std::size_t l = 0; l < outer_plan::n_labels; ++l) {
          const bool summed = l >= outer_plan::n_out;
          if (summed != (outer_plan::labels[l] == f.k)) return shape_facts{};
        }
        if (find_name(VD::names, f.k) == npos || find_name(VD::names, f.q) != npos) return shape_facts{};
        std::size_t n_value = 0;
        for (std::size_t i = 0; i < VD::size; ++i)
          if (find_name(S::names, VD::names[i]) == npos) {
            ++n_value;
            f.dv = VD::names[i];
          }
        if (n_value != 1) return shape_facts{};
        return f;
      }
    }
  }();
  static constexpr bool value = facts.ok;
};

/// Which operand of an element-wise chain node the chain continues in (the
/// other one of a scale is the scalar).
template <kind K>
inline constexpr std::size_t inner_operand = K == kind::scale_left ? 1 : 0;

/// The score einsum inside the chain.
template <class E>
const auto& base_of(const E& e) {
  using C = chain<bare<E>>;
  if constexpr (C::k == kind::base)
    return e;
  else if constexpr (C::k == kind::causal)
    return base_of(e.operand());
  else
    return base_of(std::get<inner_operand<C::k>>(e.operands()));
}

/// The strides of `m` (laid out in dims L) along the labels in `names`, 0
/// for a label L lacks.
template <class L, class M, std::size_t N>
std::array<std::ptrdiff_t, N> strides_along(const M& m, const std::array<std::string_view, N>& names) {
  const auto s = m.strides();
  std::array<std::ptrdiff_t, N> out{};
  for (std::size_t i = 0; i < N; ++i) {
    const std::size_t p = find_name(L::names, names[i]);
    out[i] = p == npos ? 0 : s[p];
  }
  return out;
}

/// Appends the stages of the chain around the score einsum to `args`
/// (innermost first), materialising masks, then calls f with them alive.
template <class E, class T, class Labels, class F>
void with_stages(const E& e, kernels::attention_args<T>& args, const Labels& labels, F&& f) {
  using C = chain<bare<E>>;
  auto push = [&](kernels::score_op op, T value) -> kernels::score_stage<T>& {
    kernels::score_stage<T>& st = args.stages[args.n_stages++];
    st.op = op;
    st.value = value;
    return st;
  };
  if constexpr (C::k == kind::base) {
    f();
  } else if constexpr (C::k == kind::scale_right || C::k == kind::scale_left || C::k == kind::divide) {
    constexpr std::size_t inner = inner_operand<C::k>;
    with_stages(std::get<inner>(e.operands()), args, labels, [&] {
      push(C::k == kind::divide ? kernels::score_op::divide : kernels::score_op::multiply,
           std::get<1 - inner>(e.operands()).value);
      f();
    });
  } else if constexpr (C::k == kind::causal) {
    with_stages(e.operand(), args, labels, [&] {
      push(kernels::score_op::causal, e.masked_value());
      f();
    });
  } else {
    static_assert(C::k == kind::masked_fill);
    with_stages(std::get<0>(e.operands()), args, labels, [&] {
      const auto& mask_expr = std::get<1>(e.operands());
      using ML = dims_of_t<decltype(mask_expr)>;
      const auto mask = materialize(mask_expr);
      kernels::score_stage<T>& st = push(kernels::score_op::mask, std::get<2>(e.operands()).value);
      st.mask = mask.data();
      const auto s = strides_along<ML>(mask, labels.all);
      for (std::size_t i = 0; i < labels.batch_rank; ++i) st.mask_batch[i] = s[i];
      st.mask_row = s[labels.batch_rank];
      st.mask_col = s[labels.batch_rank + 1];
      f();
    });
  }
}

/// The batch labels of the scores (every score dim but q and k), then q, k.
template <class S, std::size_t N = S::size>
struct score_labels {
  std::array<std::string_view, N> all{};
  std::size_t batch_rank = 0;
  constexpr score_labels(std::string_view q, std::string_view k) {
    for (std::size_t i = 0; i < N; ++i)
      if (S::names[i] != q && S::names[i] != k) all[batch_rank++] = S::names[i];
    all[batch_rank] = q;
    all[batch_rank + 1] = k;
  }
};

/// Runs the fused kernel for the outer einsum e into dst (in e's dims).
template <class E, class T, std::size_t R>
void run(const E& e, const strided<T, R>& dst) {
  using M = match<bare<E>>;
  constexpr shape_facts f = M::facts;
  const auto& p = std::get<M::p_index>(e.operands());
  const auto& v = std::get<M::v_index>(e.operands());
  const auto& scores = p.operand();
  const auto& base = base_of(scores);
  using Base = bare<decltype(base)>;
  using S = typename Base::dims;
  constexpr score_labels<S> labels(f.q, f.k);
  constexpr std::size_t nb = labels.batch_rank;

  const auto& q_op = std::get<1 - f.key_operand>(base.operands());
  const auto& k_op = std::get<f.key_operand>(base.operands());
  using QL = dims_of_t<decltype(q_op)>;
  using KL = dims_of_t<decltype(k_op)>;
  using VL = dims_of_t<decltype(v)>;
  using OL = typename bare<E>::dims;
  const auto mq = materialize(q_op);
  const auto mk = materialize(k_op);
  const auto mv = materialize(v);

  kernels::attention_args<T> args;
  args.q = mq.data();
  args.k = mk.data();
  args.v = mv.data();
  args.out = dst.data;
  const auto q_ext = q_op.extents();
  const auto v_ext = v.extents();
  args.nq = q_ext[find_name(QL::names, f.q)];
  args.dk = q_ext[find_name(QL::names, f.d)];
  args.nk = v_ext[find_name(VL::names, f.k)];
  args.dv = v_ext[find_name(VL::names, f.dv)];
  {
    constexpr std::array<std::string_view, 2> qd{f.q, f.d};
    const auto s = strides_along<QL>(mq, qd);
    args.q_row = s[0];
    args.q_col = s[1];
  }
  {
    constexpr std::array<std::string_view, 2> kd{f.k, f.d};
    const auto s = strides_along<KL>(mk, kd);
    args.k_row = s[0];
    args.k_col = s[1];
  }
  {
    constexpr std::array<std::string_view, 2> kv{f.k, f.dv};
    const auto s = strides_along<VL>(mv, kv);
    args.v_row = s[0];
    args.v_col = s[1];
  }
  {
    const auto qa = strides_along<QL>(mq, labels.all);
    const auto ka = strides_along<KL>(mk, labels.all);
    const auto va = strides_along<VL>(mv, labels.all);
    const auto s_ext = scores.extents();
    args.batch_rank = nb;
    for (std::size_t i = 0; i < nb; ++i) {
      args.batch_extents[i] = s_ext[find_name(S::names, labels.all[i])];
      args.q_batch[i] = qa[i];
      args.k_batch[i] = ka[i];
      args.v_batch[i] = va[i];
      args.out_batch[i] = dst.strides[find_name(OL::names, labels.all[i])];
    }
    args.out_row = dst.strides[find_name(OL::names, f.q)];
    args.out_col = dst.strides[find_name(OL::names, f.dv)];
  }
  with_stages(scores, args, labels, [&] { kernels::attention(args); });
}

}  // namespace detail::fused

/// True when evaluating the einsum expression E runs the fused attention
/// kernel (the scores are never materialised); false when it runs the
/// unfused path. Usable in `static_assert`.
template <class E>
inline constexpr bool uses_fused_attention_v = detail::fused::match<std::remove_cvref_t<E>>::value;

}  // namespace dimsum
