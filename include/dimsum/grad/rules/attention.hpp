#pragma once
/// \file
/// `fused_attention(q, k, v, f)`: attention on vars as one tape node that
/// runs the fused kernel forward and the FlashAttention-2 backward
/// (kernels/attention_backward.hpp), so neither pass materialises the
/// scores. The same lines written on vars without it record that node
/// too (grad/lazy_var.hpp); this is the explicit form, which also checks
/// at compile time that f's result on tensors is the pattern of
/// plan/fusion_patterns.hpp (`uses_fused_attention_v`). f is called once,
/// with the vars: the lazy chain it builds owns the masks and biases it
/// reads (copies) and the vars' nodes, so a local of f or a tensor f
/// captures by reference may be gone before backward. Only an f that
/// cannot be called with vars is kept and called again in backward with
/// the values (a mask or bias it captures must then outlive backward). The
/// node saves the output and one log-sum-exp per query row (with its
/// rounding error, so that a row masked with a large finite fill keeps its
/// weights). Every stage the pattern fuses is differentiated: scales,
/// causal and window masks (with offsets), boolean masks, and one additive
/// bias; the vars a learned part reads (a factor, ALiBi slopes, sinks, a
/// table a gathered bias reads) get their gradients, a bias written with
/// tensors is a constant.
///
///     auto z = dimsum::grad::fused_attention(q, k, v, [&](const auto& q, const auto& k, const auto& v) {
///       return dimsum::einsum<"b i h d_head, b j h d_head -> b h i j">(q, k) ... ;
///     });

#include <algorithm>
#include <cstddef>
#include <limits>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <dimsum/grad/lazy_var.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/kernels/attention_backward.hpp>
#include <dimsum/kernels/attention_backward_bf16.hpp>
#include <dimsum/ops/detail/fused_attention.hpp>
#include <dimsum/core/diagnostics.hpp>
#include <dimsum/ops/einsum.hpp>

namespace dimsum {

// --- compile-time errors of grad::fused_attention (docs/errors.md) ---
template <class Q, class K, class V>
struct fused_attention_needs_vars {
  static_assert(detail::always_false<Q, K, V>,
                "dimsum: grad::fused_attention(q, k, v, f) needs grad::vars q, k and v (tape.watch, or operations on "
                "vars), not tensors or expressions");
};
template <class Q, class K, class V>
struct fused_attention_operands_have_different_value_types {
  static_assert(detail::always_false<Q, K, V>,
                "dimsum: grad::fused_attention(q, k, v, f) needs q, k and v of one value type (float or double)");
};
template <class Result, class Q, class K, class V>
struct fused_attention_f_does_not_return_the_attention_pattern {
  static_assert(detail::always_false<Result, Q, K, V>,
                "dimsum: grad::fused_attention(q, k, v, f): f must return einsum(softmax<K>(scales, masks and a lazy "
                "bias of einsum(q, k)), v), the fused attention pattern (plan/fusion_patterns.hpp), with q, k and v as "
                "the einsums' operands");
};

}  // namespace dimsum

namespace dimsum::grad {

namespace detail {

template <class X>
struct diagnostic_of {
  using type = X;
};
template <class X>
  requires named_expression<X>
struct diagnostic_of<X> {
  using type = diagnostic_dims_t<dims_of_t<X>>;
};
/// What a diagnostic shows of an argument: its dims, or its type when it
/// has none.
template <class X>
using diagnostic_of_t = typename diagnostic_of<std::remove_cvref_t<X>>::type;

/// The gradient of the learned var x from the fused backward's sums per
/// batch index (`kernels::attention_grad_args::dfactor`, `dslope`): each
/// factor stage, affine slope or sink logits the kernel read from x's
/// value adds its sums at the batch indices' offsets (a dim x lacks has
/// stride 0 there, so its batch indices add into one element). dx has x's extents, laid
/// out as x's value (both dense), so the kernel's strides address it.
template <class X, class T>
void send_learned_gradient(const X& x, const kernels::attention_args<T>& a, const kernels::attention_grad_args<T>& g) {
  // (bf16 attentions record their learned parts unfused: grad/rules/einsum.hpp)
  if (!x.requires_grad()) return;
  const T* data = x.value().data();
  auto dx = X::tensor_type::from_extents(x.value().extents());
  std::fill_n(dx.data(), dx.size(), T(0));
  bool read = false;
  const std::size_t nb = a.batch_size();
  for (std::size_t s = 0; s < a.n_stages; ++s)
    if (g.dfactor[s] && a.stages[s].factor == data) {
      read = true;
      for (std::size_t bi = 0; bi < nb; ++bi) dx.data()[a.batch_offset(a.stages[s].factor_batch, bi)] += g.dfactor[s][bi];
    }
  if (g.dslope && a.bias.slope == data) {
    read = true;
    for (std::size_t bi = 0; bi < nb; ++bi) dx.data()[a.batch_offset(a.bias.slope_batch, bi)] += g.dslope[bi];
  }
  if (g.dsink && a.sink == data) {
    read = true;
    for (std::size_t bi = 0; bi < nb; ++bi) dx.data()[a.batch_offset(a.sink_batch, bi)] += g.dsink[bi];
  }
  if (read) x.node()->accumulate(std::move(dx));
}

/// The gradient of a table a generic bias gathers from (`lookup`), as the
/// fused backward's `dbias` callback fills it: one copy of the table's
/// gradient per batch index (`per_batch`, batch-major), each written only
/// by the thread that runs its batch index, summed by `send`. Memory:
/// batch indices times the table's size, none in the positions.
template <class T, class S = T>
struct table_gradient {
  const kernels::attention_args<T, S>* a = nullptr;
  std::vector<double> per_batch;  // double: an element sums up to p^2 terms

  static void add(void* ctx, std::size_t bi, std::size_t i, std::size_t j0, std::size_t n, const T* db) {
    auto& self = *static_cast<table_gradient*>(ctx);
    const kernels::score_bias<T>& b = self.a->bias;
    b.scatter(b.ctx, bi, i, j0, n, db, self.per_batch.data() + bi * b.learned_size);
  }
  /// The sum over batch indices into x's gradient, when x is the table.
  template <class X>
  void send(const X& x) const {
    if (!x.requires_grad() || x.value().data() != a->bias.learned) return;
    const std::size_t size = a->bias.learned_size, nb = size ? per_batch.size() / size : 0;
    auto dx = X::tensor_type::from_extents(x.value().extents());
    std::fill_n(dx.data(), dx.size(), T(0));
    for (std::size_t e = 0; e < size; ++e) {
      double sum = 0.0;
      for (std::size_t bi = 0; bi < nb; ++bi) sum += per_batch[bi * size + e];
      dx.data()[e] = static_cast<T>(sum);
    }
    x.node()->accumulate(std::move(dx));
  }
};

/// Whether one of the vars in `params` that needs a gradient has the value
/// at `data`.
template <class Params, class T>
bool learns(const Params& params, const T* data) {
  return data != nullptr && std::apply([&](const auto&... x) { return ((x.requires_grad() && x.value().data() == data) || ...); }, params);
}

/// The fused attention of vars q, k, v (checked by `fused_attention`);
/// `params` are the vars the chain's learned parts read (a factor, an
/// affine bias's slopes, the softmax's sinks, as their values), which get
/// their gradients too.
template <class Q, class K, class V, class F, class Params = std::tuple<>>
auto fused_attention_node(const Q& q, const K& k, const V& v, F f, Params params = {}) {
  using E = decltype(f(q.value(), k.value(), v.value()));
  using T = value_type_of_t<E>;
  using A = accumulator_t<T>;  // the statistics' type (float for bf16: kernels/attention_bf16.hpp)
  using Args = kernels::attention_args<A, T>;
  static_assert(!is_bf16_v<T> || std::tuple_size_v<Params> == 0,
                "dimsum: the fused attention on bf16 vars takes no learned parts (they are recorded unfused)");
  using Out = tensor_for_t<T, dims_of_t<E>>;
  constexpr std::size_t R = Out::rank;
  const E e = f(q.value(), k.value(), v.value());
  // written in full by the fused forward, as `tensor(expr)` is
  Out out = dimsum::detail::uninitialized_tensor<Out>(e.extents());
  // each row's log-sum-exp as hi + lo (kernels::attention_args::lse_low):
  // rows masked with a large finite fill keep their log(l)
  auto lse = std::make_shared<std::vector<A>>();
  auto check_leaves = [&](const Args& a) {
    if (a.q != q.value().data() || a.k != k.value().data() || a.v != v.value().data())
      throw tape_error("grad::fused_attention: f must use q, k and v themselves as the einsums' operands");
  };
  dimsum::detail::fused::with_args(e, strided<T, R>{out.data(), out.extents(), out.strides()},
                                   [&](const Args& a) {
                                     check_leaves(a);
                                     // the forward saves each row's log-sum-exp as it goes
                                     const std::size_t rows = a.batch_size() * a.nq;
                                     lse->assign(2 * rows, A(0));
                                     std::fill_n(lse->data(), rows, -std::numeric_limits<A>::infinity());
                                     Args with_lse = a;
                                     with_lse.lse = lse->data();
                                     with_lse.lse_low = lse->data() + rows;
                                     kernels::attention(with_lse);
                                   });
  const bool params_grad = std::apply([](const auto&... x) { return (x.requires_grad() || ... || false); }, params);
  auto owners = std::apply([&](const auto&... x) { return common_tape({q.owner(), k.owner(), v.owner(), x.owner()...}); }, params);
  return record(
      owners, std::move(out),
      q.requires_grad() || k.requires_grad() || v.requires_grad() || params_grad,
      [q, k, v, f, lse, params](const auto& g, const auto& o) {
        const E e2 = f(q.value(), k.value(), v.value());
        dimsum::detail::fused::with_args(
            e2, strided<T, R>{const_cast<T*>(o.data()), o.extents(), o.strides()},
            [&](const Args& a) {
              // bf16 gradients are written in full (every element rounded
              // from its float32 sum: kernels/attention_backward_bf16.hpp);
              // the float kernel adds into zeros
              const auto grad_tensor = [](const auto& x) {
                using G = typename std::remove_cvref_t<decltype(x)>::tensor_type;
                if constexpr (is_bf16_v<T>)
                  return dimsum::detail::uninitialized_tensor<G>(x.value().extents());
                else
                  return G::from_extents(x.value().extents());
              };
              auto dq = grad_tensor(q);
              auto dk = grad_tensor(k);
              auto dv = grad_tensor(v);
              kernels::attention_grad_args<A, T> ga{&a, lse->data(), g.data(), dq.data(), dk.data(), dv.data(),
                                                    lse->data() + a.batch_size() * a.nq};
              // the learned parts' sums per batch index, for those a param needs
              const std::size_t nb = a.batch_size();
              std::vector<A> sums;
              std::size_t n_sums = 0;
              for (std::size_t s = 0; s < a.n_stages; ++s) n_sums += learns(params, a.stages[s].factor) ? nb : 0;
              n_sums += learns(params, a.bias.slope) ? nb : 0;
              n_sums += learns(params, a.sink) ? nb : 0;
              sums.resize(n_sums);
              A* next = sums.data();
              for (std::size_t s = 0; s < a.n_stages; ++s)
                if (learns(params, a.stages[s].factor)) ga.dfactor[s] = std::exchange(next, next + nb);
              if (learns(params, a.bias.slope)) ga.dslope = std::exchange(next, next + nb);
              if (learns(params, a.sink)) ga.dsink = std::exchange(next, next + nb);
              // a learned table the bias gathers from (`lookup`): each batch
              // index scatters its rows' bias gradients into its own copy
              // of the table's gradient (one thread per batch index, so no
              // races), summed afterwards
              table_gradient<A, T> dtable{&a, {}};
              if (learns(params, a.bias.learned)) {
                if (!a.bias.scatter) throw tape_error("grad::fused_attention: a learned bias table without a scatter");
                dtable.per_batch.assign(nb * a.bias.learned_size, 0.0);
                ga.dbias = &table_gradient<A, T>::add;
                ga.dbias_ctx = &dtable;
              }
              kernels::attention_backward(ga);
              std::apply([&](const auto&... x) { (send_learned_gradient(x, a, ga), ...); }, params);
              if (ga.dbias)
                std::apply([&](const auto&... x) { (dtable.send(x), ...); }, params);
              // moved into a node that has no gradient yet, else added
              if (q.requires_grad()) q.node()->accumulate(std::move(dq));
              if (k.requires_grad()) k.node()->accumulate(std::move(dk));
              if (v.requires_grad()) v.node()->accumulate(std::move(dv));
            });
      });
}

/// Whether f called with the vars themselves gives one fused node (the
/// lazy chain of grad/lazy_var.hpp).
template <class F, class Q, class K, class V>
constexpr bool fused_on_vars_() {
  if constexpr (std::is_invocable_v<F&, const Q&, const K&, const V&>)
    return is_fused_var_v<std::invoke_result_t<F&, const Q&, const K&, const V&>>;
  else
    return false;
}
template <class F, class Q, class K, class V>
inline constexpr bool fused_on_vars = fused_on_vars_<F, Q, K, V>();

}  // namespace detail

/// The fused attention f(q, k, v) on vars, recorded as one node (see the
/// file comment). Its dims are those of f's outer einsum; the gradients of
/// q, k and v have their own dims. q, k or v not a var, of different value
/// types, or an f whose result is not the attention pattern is a compile
/// error naming the dims (docs/errors.md). Example:
/// `auto z = grad::fused_attention(q, k, v, [](const auto& q, const auto& k, const auto& v) { return attend(q, k, v); });`
template <class Q, class K, class V, class F>
auto fused_attention(const Q& q, const K& k, const V& v, F f) {
  if constexpr (!(detail::var_like<Q> && detail::var_like<K> && detail::var_like<V>)) {
    dimsum::detail::report<
        fused_attention_needs_vars<detail::diagnostic_of_t<Q>, detail::diagnostic_of_t<K>, detail::diagnostic_of_t<V>>>();
    return invalid_expression{};
  } else if constexpr (!(std::is_same_v<typename Q::value_type, typename K::value_type> &&
                         std::is_same_v<typename Q::value_type, typename V::value_type>)) {
    dimsum::detail::report<fused_attention_operands_have_different_value_types<
        typename Q::value_type, typename K::value_type, typename V::value_type>>();
    return invalid_expression{};
  } else {
    using E = decltype(f(q.value(), k.value(), v.value()));
    if constexpr (is_invalid_v<E>) {
      return invalid_expression{};  // f's own mistake, reported where f made it
    } else if constexpr (!uses_fused_attention_v<E>) {
      dimsum::detail::report<fused_attention_f_does_not_return_the_attention_pattern<
          detail::diagnostic_of_t<E>, diagnostic_dims_t<typename Q::dims>, diagnostic_dims_t<typename K::dims>,
          diagnostic_dims_t<typename V::dims>>>();
      return invalid_expression{};
    } else if constexpr (detail::fused_on_vars<F, Q, K, V>) {
      // f runs once, on the vars; the lazy chain owns what it reads, nothing of f is kept
      auto z = f(q, k, v);
      return typename decltype(z)::var_type(std::move(z));
    } else {
      return detail::fused_attention_node(q, k, v, std::move(f));
    }
  }
}

}  // namespace dimsum::grad
