#pragma once
/// \file
/// Runs an einsum that plan/fusion_patterns.hpp recognises as attention on
/// the fused kernel (kernels/attention.hpp): walks the chain of score
/// stages the pattern matched, gathers the operands' extents and strides
/// into `kernels::attention_args`, and calls the kernel. Which expressions
/// qualify is the pattern's business, not this file's.

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <dimsum/kernels/attention.hpp>
#include <dimsum/kernels/attention_bf16.hpp>
#include <dimsum/plan/fusion_patterns.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum::detail::fused {

using plan::fusion::bare;
using plan::fusion::chain;
using plan::fusion::inner_operand;
using plan::fusion::kind;
using plan::fusion::match;
using plan::fusion::shape_facts;

/// The score einsum inside the chain.
template <class E>
const auto& base_of(const E& e) {
  using C = chain<bare<E>>;
  if constexpr (C::k == kind::base)
    return e;
  else if constexpr (C::k == kind::causal || C::k == kind::window)
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

/// The batch dims' entries of the root multi-index idx (batch dims, query,
/// key) of flat batch index bi.
template <std::size_t R>
void batch_multi_index(std::size_t bi, const std::array<std::size_t, R - 2>& extents, std::size_t* idx) {
  for (std::size_t d = R - 2; d-- > 0;) {
    idx[d] = bi % extents[d];
    bi /= extents[d];
  }
}

/// The kernel's bias callback over an evaluator Ev of the bias in the
/// dims Root (batch dims, query, key): seek the row, read the keys.
template <class T, class Ev, std::size_t R>
struct bias_rows {
  Ev ev;
  std::array<std::size_t, R - 2> batch_extents{};
  static void add(const void* ctx, std::size_t bi, std::size_t i, std::size_t j0, std::size_t n, T* out) {
    const auto& self = *static_cast<const bias_rows*>(ctx);
    Ev ev = self.ev;  // evaluators keep a position: one copy per call, so threads share nothing
    std::size_t idx[R] = {};
    batch_multi_index<R>(bi, self.batch_extents, idx);
    idx[R - 2] = i;
    idx[R - 1] = j0;
    ev.seek(idx);
    if constexpr (std::is_same_v<Ev, leaf_evaluator<T, R>>) {
      // a stored bias (a learned per-position table): copied, or filled
      // when it does not vary along the keys, as whole vectors
      const std::ptrdiff_t s = ev.strides[R - 1];
      if (s == 1) return void(std::copy_n(ev.base + j0, n, out));
      if (s == 0) return void(std::fill_n(out, n, *ev.base));
    }
    if constexpr (requires { ev.gather(j0, n, out); }) return ev.gather(j0, n, out);  // a gather, run by run
    for (std::size_t x = 0; x < n; ++x) out[x] = static_cast<T>(ev[j0 + x]);
  }
  /// A gathered bias (`lookup`, whose evaluator can scatter): adds
  /// db[0, n) of the row to the table elements it read, in dtable.
  static void scatter(const void* ctx, std::size_t bi, std::size_t i, std::size_t j0, std::size_t n, const T* db,
                      double* dtable) {
    if constexpr (requires(const Ev& e) { e.scatter(j0, n, db, dtable); }) {
      const auto& self = *static_cast<const bias_rows*>(ctx);
      Ev ev = self.ev;
      std::size_t idx[R] = {};
      for (std::size_t d = R - 2; d-- > 0;) {
        idx[d] = bi % self.batch_extents[d];
        bi /= self.batch_extents[d];
      }
      idx[R - 2] = i;
      idx[R - 1] = j0;
      ev.seek(idx);
      ev.scatter(j0, n, db, dtable);
    }
  }
};

/// Whether the bias B is a gather from a table of the scores' value type
/// T (`lookup_expr`): the fused backward can give the table its gradient.
template <class B, class T>
constexpr bool gathered_bias = requires(const B& b) {
  { b.table().data() } -> std::convertible_to<const T*>;
  b.table().size();
  typename B::vocab_dim;
};

/// The kernel's mask source over an evaluator Ev of a boolean expression in
/// the dims Root (batch dims, query, key): the flags of a block, a row at a
/// time (negated when Negate: where's kept side), so the mask is never
/// materialised whole.
template <class Ev, std::size_t R, bool Negate>
struct mask_rows {
  Ev ev;
  std::array<std::size_t, R - 2> batch_extents{};
  static void fill(const void* ctx, std::size_t bi, std::size_t i0, std::size_t rows, std::size_t j0, std::size_t n,
                   bool* out) {
    const auto& self = *static_cast<const mask_rows*>(ctx);
    Ev ev = self.ev;  // evaluators keep a position: one copy per call, so threads share nothing
    std::size_t idx[R] = {};
    batch_multi_index<R>(bi, self.batch_extents, idx);
    idx[R - 1] = j0;
    for (std::size_t r = 0; r < rows; ++r, out += n) {
      idx[R - 2] = i0 + r;
      ev.seek(idx);
      for (std::size_t x = 0; x < n; ++x) out[x] = static_cast<bool>(ev[j0 + x]) != Negate;
    }
  }
};

/// Whether the bias B is `slope * relative_positions` over the pattern's
/// query and key dims (the last two of Root, as the kernel walks them).
template <class B, class T, class Root>
constexpr bool affine_over_root = [] {
  using A = plan::fusion::affine_bias<B, T>;
  if constexpr (A::ok)
    return at_t<Root, Root::size - 2>::name.view() == A::query_dim::name.view() &&
           at_t<Root, Root::size - 1>::name.view() == A::key_dim::name.view();
  else
    return false;
}();

/// x materialised with value type T: itself when it has it, else a copy
/// converted to T (a bf16 factor, slope or sink for the float arithmetic
/// of a bf16 attention).
template <class T, class X>
decltype(auto) materialize_as(const X& x) {
  if constexpr (std::is_same_v<value_type_of_t<X>, T>)
    return materialize(x);
  else
    return tensor_for_t<T, dims_of_t<X>>(cast<T>(materialize(x)));
}

/// Appends the stages of the chain around the score einsum to `args`
/// (innermost first), then calls f with what they read alive. A mask that
/// is a tensor in memory is read in place; any other boolean expression
/// becomes a mask source (`mask_rows`) that the kernels evaluate a block at
/// a time, so the mask costs no memory of the scores' size.
template <class E, class T, class Root, class Labels, class F, class Stored>
void with_stages(const E& e, kernels::attention_args<T, Stored>& args, const Labels& labels, F&& f) {
  using C = chain<bare<E>>;
  // values in the arithmetic's type T (float for bf16 operands)
  auto push = [&](kernels::score_op op, auto value) -> kernels::score_stage<T>& {
    kernels::score_stage<T>& st = args.stages[args.n_stages++];
    st.op = op;
    st.value = static_cast<T>(value);
    return st;
  };
  // mask: a boolean tensor in memory, alive while the kernel runs.
  auto push_mask = [&](const auto& mask, auto value) {
    using ML = dims_of_t<decltype(mask)>;
    kernels::score_stage<T>& st = push(kernels::score_op::mask, value);
    st.mask = mask.data();
    const auto s = strides_along<ML>(mask, labels.all);
    for (std::size_t i = 0; i < labels.batch_rank; ++i) st.mask_batch[i] = s[i];
    st.mask_row = s[labels.batch_rank];
    st.mask_col = s[labels.batch_rank + 1];
  };
  // mask (negated when Negate): read in place when it is a tensor in
  // memory, else a mask source over its evaluator, alive while g runs (an
  // expression whose evaluator cannot be copied is materialised).
  auto with_mask = [&]<bool Negate>(std::bool_constant<Negate>, const auto& mask, auto value, auto&& g) {
    using Ev = decltype(mask.template evaluator<Root>());
    if constexpr (!Negate && requires { mask.data(); mask.strides(); }) {
      push_mask(materialize(mask), value);
      g();
    } else if constexpr (!std::is_copy_constructible_v<Ev>) {
      if constexpr (Negate)
        push_mask(materialize(!mask), value);
      else
        push_mask(materialize(mask), value);
      g();
    } else {
      using ML = dims_of_t<decltype(mask)>;
      mask_rows<Ev, Root::size, Negate> rows{mask.template evaluator<Root>()};
      kernels::score_stage<T>& st = push(kernels::score_op::mask, value);
      // the notional strides of a contiguous mask over the dims it has (0
      // for the dims it lacks: `score_stage`)
      std::ptrdiff_t stride = 1;
      for (std::size_t i = labels.batch_rank; i-- > 0;) {
        rows.batch_extents[i] = args.batch_extents[i];
        if (find_name(ML::names, labels.all[i]) == npos) continue;
        st.mask_batch[i] = stride;
        stride *= static_cast<std::ptrdiff_t>(std::max<std::size_t>(args.batch_extents[i], 1));
      }
      st.mask_row = find_name(ML::names, labels.all[labels.batch_rank]) == npos ? 0 : 1;
      st.mask_col = find_name(ML::names, labels.all[labels.batch_rank + 1]) == npos ? 0 : 1;
      st.mask_fill = &mask_rows<Ev, Root::size, Negate>::fill;
      st.mask_ctx = &rows;
      g();
    }
  };
  auto inner = [&](auto&& then) {
    if constexpr (C::k == kind::causal || C::k == kind::window)
      with_stages<bare<decltype(e.operand())>, T, Root>(e.operand(), args, labels, then);
    else
      with_stages<bare<decltype(std::get<inner_operand<C::k>>(e.operands()))>, T, Root>(
          std::get<inner_operand<C::k>>(e.operands()), args, labels, then);
  };
  if constexpr (C::k == kind::base) {
    f();
  } else if constexpr (C::k == kind::scale_right || C::k == kind::scale_left || C::k == kind::divide) {
    inner([&] {
      push(C::k == kind::divide ? kernels::score_op::divide : kernels::score_op::multiply,
           std::get<1 - inner_operand<C::k>>(e.operands()).value);
      f();
    });
  } else if constexpr (C::k == kind::tanh) {
    inner([&] {
      push(kernels::score_op::tanh, T(0));
      f();
    });
  } else if constexpr (C::k == kind::map) {
    // the user's function and derivative, called through the node's functor
    using Fn = bare<decltype(e.op().f)>;
    inner([&] {
      kernels::score_stage<T>& st = push(kernels::score_op::map, T(0));
      st.ctx = &e.op().f;
      st.fn = [](const void* ctx, T s) { return static_cast<T>((*static_cast<const Fn*>(ctx))(s)); };
      st.dfn = [](const void* ctx, T s) { return static_cast<T>(static_cast<const Fn*>(ctx)->derivative(s)); };
      // a row per call: the function inlined into the loop (kernels::map_row)
      st.fn_row = [](const void* ctx, const T* in, T* out, std::size_t n) {
        const Fn& fn = *static_cast<const Fn*>(ctx);
        kernels::map_row(in, out, n, [&](T x, std::size_t) { return static_cast<T>(fn(x)); });
      };
      st.dfn_row = [](const void* ctx, const T* in, T* d, std::size_t n) {
        const Fn& fn = *static_cast<const Fn*>(ctx);
        kernels::map_row(in, d, n, [&](T x, std::size_t j) { return d[j] * static_cast<T>(fn.derivative(x)); });
      };
      f();
    });
  } else if constexpr (C::k == kind::factor_right || C::k == kind::factor_left) {
    // a factor per batch index: materialised, read at the batch index's offset
    inner([&] {
      const auto& factor = std::get<1 - inner_operand<C::k>>(e.operands());
      decltype(auto) m = materialize_as<T>(factor);
      kernels::score_stage<T>& st = push(kernels::score_op::multiply, T(1));
      st.factor = m.data();
      const auto s = strides_along<dims_of_t<decltype(factor)>>(m, labels.all);
      for (std::size_t i = 0; i < labels.batch_rank; ++i) st.factor_batch[i] = s[i];
      f();
    });
  } else if constexpr (C::k == kind::causal) {
    inner([&] {
      push(kernels::score_op::causal, e.masked_value());
      f();
    });
  } else if constexpr (C::k == kind::window) {
    inner([&] {
      kernels::score_stage<T>& st = push(kernels::score_op::causal, e.masked_value());
      st.window = e.window();
      st.offset = e.offset();
      f();
    });
  } else if constexpr (C::k == kind::masked_fill) {
    inner([&] { with_mask(std::false_type{}, std::get<1>(e.operands()), std::get<2>(e.operands()).value, f); });
  } else if constexpr (C::k == kind::where_kept_left) {  // where(cond, x, value): value where !cond
    inner([&] { with_mask(std::true_type{}, std::get<0>(e.operands()), std::get<2>(e.operands()).value, f); });
  } else if constexpr (C::k == kind::where_kept_right) {  // where(cond, value, x): value where cond
    inner([&] { with_mask(std::false_type{}, std::get<0>(e.operands()), std::get<1>(e.operands()).value, f); });
  } else {
    static_assert(C::k == kind::bias_left || C::k == kind::bias_right);
    using B = bare<decltype(std::get<1 - inner_operand<C::k>>(e.operands()))>;
    using V = value_type_of_t<bare<E>>;  // the operands' (T is the arithmetic's)
    if constexpr (affine_over_root<B, V, Root>) {
      // slope * (j - (i + offset)): the kernel computes it (affine form)
      using A = plan::fusion::affine_bias<B, V>;
      inner([&] {
        const auto& parts = std::get<1 - inner_operand<C::k>>(e.operands()).operands();
        decltype(auto) slope = materialize_as<T>(std::get<1 - A::distance_operand>(parts));
        const auto s = strides_along<dims_of_t<typename A::slope>>(slope, labels.all);
        args.bias.slope = slope.data();
        for (std::size_t i = 0; i < labels.batch_rank; ++i) args.bias.slope_batch[i] = s[i];
        args.bias.offset = std::get<A::distance_operand>(parts).offset();
        args.bias.at = args.n_stages;
        f();
      });
    } else {
      inner([&] {
        const auto& b = std::get<1 - inner_operand<C::k>>(e.operands());
        using Ev = decltype(b.template evaluator<Root>());
        bias_rows<T, Ev, Root::size> rows{b.template evaluator<Root>()};
        const auto s_ext = base_of(e).extents();
        using S = dims_of_t<decltype(base_of(e))>;
        for (std::size_t i = 0; i < labels.batch_rank; ++i) rows.batch_extents[i] = s_ext[find_name(S::names, labels.all[i])];
        args.bias.add = &bias_rows<T, Ev, Root::size>::add;
        args.bias.ctx = &rows;
        if constexpr (gathered_bias<B, T>) {
          args.bias.learned = b.table().data();
          args.bias.learned_size = b.table().size();
          args.bias.scatter = &bias_rows<T, Ev, Root::size>::scatter;
        }
        args.bias.at = args.n_stages;
        f();
      });
    }
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

/// Gathers the kernel's arguments for the outer einsum e with output dst
/// (in e's dims) and calls call(args) while the materialised operands and
/// masks are alive: `kernels::attention_args<T>`, or for bf16 operands
/// `attention_args<float, bf16>` (float stage values and statistics). The forward (`run`) and the fused backward
/// (grad/rules/attention.hpp) share it, so both read the same strides.
template <class E, class T, std::size_t R, class F>
void with_args(const E& e, const strided<T, R>& dst, F&& call) {
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

  using A = accumulator_t<T>;
  kernels::attention_args<A, T> args;
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
    const auto s_ext = base.extents();  // in S's order (a where or a bias may reorder the chain's dims)
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
  // The scores' dims as the kernel walks them (batch dims, query, key
  // last): the rows a bias evaluator reads.
  static constexpr auto order = [] {
    constexpr score_labels<S> l(M::facts.q, M::facts.k);
    std::array<std::size_t, S::size> p{};
    for (std::size_t i = 0; i < S::size; ++i) p[i] = find_name(S::names, l.all[i]);
    return p;
  }();
  using Root = select_t<S, order>;
  auto finish = [&] { with_stages<bare<decltype(scores)>, A, Root>(scores, args, labels, [&] { call(args); }); };
  if constexpr (plan::fusion::softmax_parts<bare<decltype(p)>>::has_sinks) {
    // the sink logits, one per batch index, alive while the kernel runs
    decltype(auto) sinks = materialize_as<A>(p.sinks());
    const auto s = strides_along<dims_of_t<decltype(p.sinks())>>(sinks, labels.all);
    args.sink = sinks.data();
    for (std::size_t i = 0; i < nb; ++i) args.sink_batch[i] = s[i];
    finish();
  } else {
    finish();
  }
}

/// Runs the fused kernel for the outer einsum e into dst (in e's dims).
template <class E, class T, std::size_t R>
void run(const E& e, const strided<T, R>& dst) {
  with_args(e, dst, [](const auto& args) { kernels::attention(args); });
}

}  // namespace dimsum::detail::fused
