#pragma once
/// \file
/// `lookup<Vocab>(table, ids)`: the rows of an embedding table (a var with
/// dims Vocab and one more, Emb) for integer ids, as torch's
/// F.embedding(ids, weight); dims of the result: the ids' dims, then Emb.
/// The gradient is scattered back and accumulated over repeated ids.
/// With ids a lazy integer expression (T5's bucketed distances), the
/// lookup of a var is lazy and fuses into attention as its bias, the fused
/// backward giving the table its gradient.
///
///     auto tok = dimsum::lookup<vocab>(tape.watch(wte), ids);   // (batch, posn, d_model)
///     auto bias = dimsum::lookup<bucket>(tape.watch(rel_table), buckets);   // lazy: (q_posn, k_posn, nheads)

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include <dimsum/grad/lazy_var.hpp>
#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/lookup.hpp>

namespace dimsum {


/// The rows of `table` (dims Vocab and Emb, in either order) for each id
/// of the integer tensor `ids`: dims ids' dims..., Emb. An id outside
/// [0, extent of Vocab) throws shape_error. The table's gradient receives,
/// for each id, the gradient of its row (summed over repeated ids).
template <dimension Vocab, grad::detail::var_like V, class I, dimension... Ds>
auto lookup(V&& table0, const tensor<I, Ds...>& ids) {
  using X = std::remove_cvref_t<V>;
  using T = typename X::value_type;
  using L = typename X::dims;
  static_assert(std::is_integral_v<I>, "dimsum: lookup ids must be integers");
  if constexpr (L::size != 2 || !contains_v<L, Vocab>) {
    detail::report<lookup_table_needs_the_vocab_dim_and_one_more<diagnostic_name_t<Vocab>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else {
    using Emb = detail::at_t<L, index_of<L>(Vocab::name.view()) == 0 ? 1 : 0>;
    const tensor<T, Vocab, Emb> table = table0.value();  // rows contiguous
    const std::size_t vocab = table.template extent<Vocab>(), width = table.template extent<Emb>();
    std::array<std::size_t, sizeof...(Ds) + 1> ext{};
    for (std::size_t i = 0; i < sizeof...(Ds); ++i) ext[i] = ids.extents()[i];
    ext[sizeof...(Ds)] = width;
    auto out = tensor<T, Ds..., Emb>::from_extents(ext);
    for (std::size_t n = 0; n < ids.size(); ++n) {
      const I id = ids.data()[n];
      if (id < 0 || static_cast<std::uint64_t>(id) >= vocab)
        throw shape_error("lookup: id " + std::to_string(id) + " (element " + std::to_string(n) +
                          " of the ids) is out of range for dim '" + std::string(Vocab::name.view()) + "' of extent " +
                          std::to_string(vocab));
      std::copy_n(table.data() + static_cast<std::size_t>(id) * width, width, out.data() + n * width);
    }
    auto v = grad::detail::lift(std::forward<V>(table0));
    return grad::detail::record(v.owner(), std::move(out), v.requires_grad(),
                                [v, ids, vocab, width](const auto& g, const auto&) {
      // Repeated ids sum in the accumulator type (float32 for a bf16 table).
      using A = accumulator_t<T>;
      auto d = tensor<A, Vocab, Emb>::from_extents({vocab, width});
      for (std::size_t n = 0; n < ids.size(); ++n) {
        A* row = d.data() + static_cast<std::size_t>(ids.data()[n]) * width;
        const T* gr = g.data() + n * width;
        for (std::size_t e = 0; e < width; ++e) row[e] += static_cast<A>(gr[e]);
      }
      v.node()->accumulate(std::move(d));
    });
  }
}

}  // namespace dimsum

namespace dimsum {

/// The rows of a learned `table` (a var with dims Vocab and Emb) at ids
/// given by a lazy integer expression over named dims (not a tensor; T5's
/// `t5_relative_bucket(relative_positions<int>(q_posn{p}, k_posn{p}), ...)`):
/// a lazy var whose value is the gather `lookup_expr` (ops/lookup.hpp),
/// read element by element, with dims ids' dims..., Emb. Added to a lazy
/// attention chain it is the chain's bias, computed row by row inside the
/// fused kernel, and the fused backward scatters each score's bias
/// gradient into the table's gradient by id, so no positions x positions
/// tensor exists in either pass. Anywhere else it is recorded as the
/// eager lookup of the evaluated ids. An id out of range throws
/// `shape_error` when read. The ids expression is copied into the lazy
/// var (an rvalue expression owns everything it reads; one that refers to
/// an lvalue tensor or expression needs it alive until backward). Example:
/// `auto z = einsum<...>(softmax<k_posn>(einsum<...>(q, k) + lookup<bucket>(tape.watch(table), buckets)), v);`
template <dimension Vocab, grad::detail::var_like V, named_expression Ids>
  requires(grad::detail::recorded_var<V> && !detail::is_stored_tensor<std::remove_cvref_t<Ids>>)
auto lookup(V&& table, Ids&& ids) {
  using X = std::remove_cvref_t<V>;
  using L = typename X::dims;
  using I = std::remove_cv_t<value_type_of_t<Ids>>;
  if constexpr (L::size != 2 || !contains_v<L, Vocab>) {
    detail::report<lookup_table_needs_the_vocab_dim_and_one_more<diagnostic_name_t<Vocab>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (!std::is_integral_v<I> || std::is_same_v<I, bool>) {
    detail::report<lookup_ids_must_be_integers<I, diagnostic_dims_t<dims_of_t<Ids>>>>();
    return invalid_expression{};
  } else {
    using D = std::remove_cvref_t<Ids>;
    const X t(table);
    // the value reads the var's tensor (kept alive by the var among the
    // leaves) and an owned copy of the ids expression
    auto e = dimsum::lookup<Vocab>(t.value(), D(ids));
    return grad::detail::make_lazy(std::move(e), std::make_tuple(t),
                                   [t, d = D(ids)] { return dimsum::lookup<Vocab>(t, dimsum::eval(d)); });
  }
}

}  // namespace dimsum
