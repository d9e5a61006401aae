#pragma once
/// \file
/// `lookup<Vocab>(table, ids)` on tensors: a lazy gather, the rows of a
/// table (dims Vocab and one more, Emb) at integer ids that are a tensor or
/// a lazy integer expression, read element by element when the result is
/// evaluated (as torch's `F.embedding(ids, table)`, or `nn.Embedding` of
/// ids, without building the gathered tensor). With T5's bucketed
/// distances as ids it is T5's relative-position bias, and added to the
/// attention scores it runs inside the fused attention kernel:
///
///     auto buckets = t5_relative_bucket(relative_positions<int>(q_posn{p}, k_posn{p}), true, 32, 128);
///     auto z = einsum<"h i j, j c -> h i c">(softmax<k_posn>(scores + lookup<bucket>(table, buckets)), v);
///
/// On vars (grad/rules/embedding.hpp) the table may be a learned parameter.

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/errors.hpp>
#include <dimsum/tensor/expression.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// Checker: lookup's table must have the dim Vocab and exactly one more.
template <class Vocab, class Table>
struct lookup_table_needs_the_vocab_dim_and_one_more {
  static_assert(detail::always_false<Vocab, Table>,
                "dimsum: lookup<Vocab>(table, ids) needs a table with two dims, Vocab and the embedding dim");
};
/// Checker: lookup's ids must be integers.
template <class IdType, class Ids>
struct lookup_ids_must_be_integers {
  static_assert(detail::always_false<IdType, Ids>, "dimsum: lookup<Vocab>(table, ids) needs integer ids");
};
/// Checker: the ids already have the table's other dim.
template <class Emb, class Ids>
struct lookup_ids_already_have_the_table_dim {
  static_assert(detail::always_false<Emb, Ids>,
                "dimsum: lookup<Vocab>(table, ids): the ids already have the table's other dim (the result would have it twice)");
};

namespace detail {

/// The message of an id outside [0, vocab).
template <class Vocab>
[[noreturn]] inline void throw_lookup_out_of_range(std::int64_t id, std::size_t vocab) {
  throw shape_error("lookup: id " + std::to_string(id) + " is out of range for dim '" + std::string(Vocab::name.view()) +
                    "' of extent " + std::to_string(vocab));
}

/// Whether X is a dimsum::tensor (dense storage).
template <class X>
inline constexpr bool is_stored_tensor = false;
template <class X, dimension... Ds>
inline constexpr bool is_stored_tensor<tensor<X, Ds...>> = true;

}  // namespace detail

/// The lazy gather of `lookup<Vocab>(table, ids)` on tensors: dims ids'
/// dims, then Emb (the table's other dim); the element at (ids index, e)
/// is `table[ids[ids index], e]`, read when evaluated (no gathered tensor
/// is stored). An id outside [0, extent of Vocab) throws `shape_error`
/// (ids in a tensor are checked when the expression is built, ids of a
/// lazy expression when they are read). The table follows closure
/// semantics (an lvalue is referenced, an rvalue moved in), as do the ids.
template <class Vocab, class Emb, class Table, class Ids>
class lookup_expr : public expression_tag {
  using table_type = std::remove_cvref_t<Table>;
  using ids_type = std::remove_cvref_t<Ids>;
  using id_dims = dims_of_t<ids_type>;

 public:
  using value_type = std::remove_cv_t<value_type_of_t<table_type>>;
  using dims = typename detail::concat<id_dims, dim_list<Emb>>::type;
  static constexpr std::size_t rank = dims::size;
  using vocab_dim = Vocab;
  using emb_dim = Emb;

  template <class TA, class IA>
  lookup_expr(TA&& table, IA&& ids) : table_(std::forward<TA>(table)), ids_(std::forward<IA>(ids)) {
    const auto ie = ids_.extents();
    for (std::size_t d = 0; d < id_dims::size; ++d) extents_[d] = ie[d];
    extents_[rank - 1] = table_.template extent<Emb>();
    check_ids();
  }

  const std::array<std::size_t, rank>& extents() const { return extents_; }
  /// The table the ids index.
  const table_type& table() const { return table_; }
  /// The ids.
  const ids_type& ids() const { return ids_; }

  /// A cursor over a root with dims Root (which holds dims): the ids'
  /// evaluator over Root, and the table read at each id. `scatter` adds
  /// gradients back into a buffer laid out as the table (the fused
  /// attention backward's table gradient).
  template <class Root, class IdEv>
  struct evaluator_type {
    static constexpr std::size_t R = Root::size;
    static constexpr std::size_t emb_pos = index_of<Root>(Emb::name.view());
    const value_type* table;
    std::ptrdiff_t id_stride, emb_stride;
    std::size_t vocab;
    IdEv ids;
    std::size_t e = 0;

    void seek(const std::size_t* idx) {
      ids.seek(idx);
      if constexpr (emb_pos != R - 1) e = idx[emb_pos];
    }
    /// The offset into the table of the element at innermost index j.
    std::ptrdiff_t offset(std::size_t j) const {
      const auto id = static_cast<std::int64_t>(ids[j]);
      if (id < 0 || static_cast<std::uint64_t>(id) >= vocab) detail::throw_lookup_out_of_range<Vocab>(id, vocab);
      const std::size_t col = emb_pos == R - 1 ? j : e;
      return static_cast<std::ptrdiff_t>(id) * id_stride + static_cast<std::ptrdiff_t>(col) * emb_stride;
    }
    value_type operator[](std::size_t j) const { return table[offset(j)]; }
    /// dtable[element read at innermost j0 + x] += g[x] for x in [0, n)
    /// (after seek): dtable laid out as the table, summed in double (an
    /// element of a bucketed bias sums up to p^2 scores' gradients).
    void scatter(std::size_t j0, std::size_t n, const value_type* g, double* dtable) const {
      if constexpr (has_runs) {
        for (std::size_t j = j0, end = j0 + n; j < end;) {  // a run of equal ids adds to one element
          const std::size_t len = ids.run(j, end);
          dtable[offset(j)] += sum(g + (j - j0), len);
          j += len;
        }
      } else {
        for (std::size_t x = 0; x < n; ++x) dtable[offset(j0 + x)] += static_cast<double>(g[x]);
      }
    }
    /// out[x] = the element at innermost j0 + x for x in [0, n) (after
    /// seek): a run of equal ids (when the ids tell their runs, as T5's
    /// buckets do) read once and filled.
    template <class Out>
    void gather(std::size_t j0, std::size_t n, Out* out) const {
      if constexpr (has_runs) {
        for (std::size_t j = j0, end = j0 + n; j < end;) {
          const std::size_t len = ids.run(j, end);
          const auto value = static_cast<Out>(table[offset(j)]);
          Out* o = out + (j - j0);
          std::size_t x = 0;
          for (; x + 16 <= len; x += 16)  // a loop of known length: vector stores, even at -O2
            for (std::size_t l = 0; l < 16; ++l) o[x + l] = value;
          for (; x < len; ++x) o[x] = value;
          j += len;
        }
      } else {
        for (std::size_t x = 0; x < n; ++x) out[x] = static_cast<Out>(table[offset(j0 + x)]);
      }
    }

   private:
    // runs of equal ids along the innermost index: only when the table's
    // column does not move with it
    static constexpr bool has_runs =
        emb_pos != R - 1 && requires(const IdEv& e, std::size_t j) { { e.run(j, j) } -> std::convertible_to<std::size_t>; };
    /// sum of g[0, n) in double, four sums interleaved (no chain of
    /// dependent additions along a long run)
    static double sum(const value_type* g, std::size_t n) {
      double s[4] = {0.0, 0.0, 0.0, 0.0};
      std::size_t x = 0;
      for (; x + 4 <= n; x += 4)
        for (std::size_t l = 0; l < 4; ++l) s[l] += static_cast<double>(g[x + l]);
      for (; x < n; ++x) s[0] += static_cast<double>(g[x]);
      return (s[0] + s[1]) + (s[2] + s[3]);
    }
  };

  template <class Root>
  auto evaluator() const {
    using IdEv = decltype(ids_.template evaluator<Root>());
    const auto s = table_.strides();
    constexpr std::size_t vp = index_of<dims_of_t<table_type>>(Vocab::name.view());
    return evaluator_type<Root, IdEv>{table_.data(), s[vp], s[1 - vp], table_.template extent<Vocab>(),
                                      ids_.template evaluator<Root>()};
  }
  void eval_to(const strided<value_type, rank>& dst) const {
    auto ev = evaluator<dims>();
    detail::run_elementwise(dst, ev);
  }

 private:
  // ids in a tensor: checked once, here (dense storage, one pass)
  void check_ids() const {
    if constexpr (detail::is_stored_tensor<ids_type>) {
      const std::size_t vocab = table_.template extent<Vocab>();
      const auto* p = ids_.data();
      for (std::size_t n = 0; n < ids_.size(); ++n) {
        const auto id = static_cast<std::int64_t>(p[n]);
        if (id < 0 || static_cast<std::uint64_t>(id) >= vocab) detail::throw_lookup_out_of_range<Vocab>(id, vocab);
      }
    }
  }

  detail::closure_t<Table> table_;
  detail::closure_t<Ids> ids_;
  std::array<std::size_t, rank> extents_{};
};

/// The rows of `table` (dims Vocab and one more, Emb, in either order; a
/// tensor) at each id of `ids` (an integer tensor or lazy integer
/// expression): a lazy expression (`lookup_expr`) with dims ids' dims...,
/// Emb, read element by element when evaluated, so a bias gathered over
/// (q_posn, k_posn) needs no positions x positions table. Ids outside
/// [0, extent of Vocab) throw `shape_error` (a tensor's when the gather is
/// built, a lazy expression's when read). A table without Vocab or with
/// other than two dims, non-integer ids, or ids that already have Emb are
/// compile errors. Example:
/// `tensor<float, q_posn, k_posn, nheads> b = lookup<bucket>(table, t5_relative_bucket(relative_positions<int>(q_posn{8}, k_posn{8}), true, 32, 128));`
template <dimension Vocab, named_expression Table, named_expression Ids>
auto lookup(Table&& table, Ids&& ids) {
  using L = dims_of_t<Table>;
  using I = std::remove_cv_t<value_type_of_t<Ids>>;
  if constexpr (L::size != 2 || !contains_v<L, Vocab>) {
    detail::report<lookup_table_needs_the_vocab_dim_and_one_more<diagnostic_name_t<Vocab>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (!std::is_integral_v<I> || std::is_same_v<I, bool>) {
    detail::report<lookup_ids_must_be_integers<I, diagnostic_dims_t<dims_of_t<Ids>>>>();
    return invalid_expression{};
  } else {
    using Emb = detail::at_t<L, index_of<L>(Vocab::name.view()) == 0 ? 1 : 0>;
    if constexpr (contains_v<dims_of_t<Ids>, Emb>) {
      detail::report<lookup_ids_already_have_the_table_dim<diagnostic_name_t<Emb>, diagnostic_dims_t<dims_of_t<Ids>>>>();
      return invalid_expression{};
    } else {
      if constexpr (requires(const std::remove_cvref_t<Table>& t) { t.data(); t.strides(); })
        return lookup_expr<Vocab, Emb, Table, Ids>(std::forward<Table>(table), std::forward<Ids>(ids));
      else  // a lazy table: evaluated once, owned
        return lookup_expr<Vocab, Emb, tensor_for_t<value_type_of_t<Table>, L>, Ids>(dimsum::eval(std::forward<Table>(table)),
                                                                                   std::forward<Ids>(ids));
    }
  }
}

}  // namespace dimsum
