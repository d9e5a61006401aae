#pragma once
/// \file
/// `fused_attention(q, k, v, f)`: attention on vars as one tape node that
/// runs the fused kernel forward and the FlashAttention-2 backward
/// (kernels/attention_backward.hpp), so neither pass materialises the
/// scores. f builds the attention expression from q's, k's and v's values
/// with the spellings of the tensor API; it must be the pattern of
/// plan/fusion_patterns.hpp (`uses_fused_attention_v`) with q, k, v as the
/// einsums' operands as they are. The node saves the output and one
/// log-sum-exp per query row; backward calls f again (the masks it holds
/// are re-materialised; a mask tensor f captures must outlive backward).
///
///     auto z = dimsum::grad::fused_attention(q, k, v, [&](const auto& q, const auto& k, const auto& v) {
///       return dimsum::einsum<"b i h d_head, b j h d_head -> b h i j">(q, k) ... ;
///     });

#include <cstddef>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include <dimsum/grad/tape.hpp>
#include <dimsum/kernels/attention_backward.hpp>
#include <dimsum/ops/detail/fused_attention.hpp>
#include <dimsum/ops/einsum.hpp>

namespace dimsum::grad {

/// The fused attention f(q, k, v) on vars, recorded as one node (see the
/// file comment). Its dims are those of f's outer einsum; the gradients of
/// q, k and v have their own dims. Example:
/// `auto z = grad::fused_attention(q, k, v, [](const auto& q, const auto& k, const auto& v) { return attend(q, k, v); });`
template <detail::var_like Q, detail::var_like K, detail::var_like V, class F>
  requires uses_fused_attention_v<decltype(std::declval<F&>()(std::declval<const typename Q::tensor_type&>(),
                                                              std::declval<const typename K::tensor_type&>(),
                                                              std::declval<const typename V::tensor_type&>()))>
auto fused_attention(const Q& q, const K& k, const V& v, F f) {
  using E = decltype(f(q.value(), k.value(), v.value()));
  using T = value_type_of_t<E>;
  using Out = tensor_for_t<T, dims_of_t<E>>;
  constexpr std::size_t R = Out::rank;
  static_assert(std::is_same_v<T, typename Q::value_type> && std::is_same_v<T, typename K::value_type> &&
                    std::is_same_v<T, typename V::value_type>,
                "dimsum: fused_attention needs q, k and v of one value type");
  const E e = f(q.value(), k.value(), v.value());
  Out out = Out::from_extents(e.extents());
  auto lse = std::make_shared<std::vector<T>>();
  auto check_leaves = [&](const kernels::attention_args<T>& a) {
    if (a.q != q.value().data() || a.k != k.value().data() || a.v != v.value().data())
      throw tape_error("grad::fused_attention: f must use q, k and v themselves as the einsums' operands");
  };
  dimsum::detail::fused::with_args(e, strided<T, R>{out.data(), out.extents(), out.strides()},
                                   [&](const kernels::attention_args<T>& a) {
                                     check_leaves(a);
                                     // the forward saves each row's log-sum-exp as it goes
                                     lse->assign(a.batch_size() * a.nq, -std::numeric_limits<T>::infinity());
                                     kernels::attention_args<T> with_lse = a;
                                     with_lse.lse = lse->data();
                                     kernels::attention(with_lse);
                                   });
  return detail::record(
      detail::common_tape({q.owner(), k.owner(), v.owner()}), std::move(out),
      q.requires_grad() || k.requires_grad() || v.requires_grad(), [q, k, v, f, lse](const auto& g, const auto& o) {
        const E e2 = f(q.value(), k.value(), v.value());
        dimsum::detail::fused::with_args(
            e2, strided<T, R>{const_cast<T*>(o.data()), o.extents(), o.strides()},
            [&](const kernels::attention_args<T>& a) {
              auto dq = Q::tensor_type::from_extents(q.value().extents());
              auto dk = K::tensor_type::from_extents(k.value().extents());
              auto dv = V::tensor_type::from_extents(v.value().extents());
              kernels::attention_backward(
                  kernels::attention_grad_args<T>{&a, lse->data(), g.data(), dq.data(), dk.data(), dv.data()});
              if (q.requires_grad()) q.node()->accumulate_raw(dq.data());
              if (k.requires_grad()) k.node()->accumulate_raw(dk.data());
              if (v.requires_grad()) v.node()->accumulate_raw(dv.data());
            });
      });
}

}  // namespace dimsum::grad
