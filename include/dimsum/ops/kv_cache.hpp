#pragma once
/// \file
/// `kv_cache<T, Pos, Ds...>`: the keys and values of the positions decoded
/// so far, for incremental decoding. Storage for `capacity` positions along
/// `Pos` is allocated once; `append` copies new positions in, `keys()` and
/// `values()` are views of the filled prefix (no copy), so attending a new
/// query reads each cached key once.

#include <array>
#include <cstddef>
#include <string>
#include <utility>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/errors.hpp>
#include <dimsum/ops/slice.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// Checker: kv_cache's dims do not include its position dim.
template <class Dim, class Dims>
struct kv_cache_position_dim_is_not_one_of_its_dims {
  static_assert(detail::always_false<Dim, Dims>,
                "dimsum: kv_cache<T, Pos, Dims...> needs Pos among Dims (the dim along which positions are appended)");
};
/// Checker: appending keys or values whose dims are not the cache's.
template <class CacheDims, class Dims>
struct kv_cache_append_with_other_dims {
  static_assert(detail::always_false<CacheDims, Dims>,
                "dimsum: kv_cache.append needs keys and values with the cache's dims (in any order)");
};
/// Checker: appending keys or values of another value type.
template <class CacheType, class Type>
struct kv_cache_append_with_another_value_type {
  static_assert(detail::always_false<CacheType, Type>,
                "dimsum: kv_cache.append needs keys and values of the cache's value type; convert with dimsum::cast<T>");
};

namespace detail {
// The position-dim check as a type: deriving from the checker when Pos is
// not among L, so naming its sizeof reports once.
template <dimension Pos, class L>
struct kv_cache_dims_checked {};
template <dimension Pos, class L>
  requires(!contains_v<L, Pos>)
struct kv_cache_dims_checked<Pos, L>
    : kv_cache_position_dim_is_not_one_of_its_dims<diagnostic_name_t<Pos>, diagnostic_dims_t<L>> {};
}  // namespace detail

/// Keys and values of dims `Ds...` (the same for both; they include `Pos`)
/// for up to `capacity` positions along `Pos`, filled in order by
/// `append`. Construct it with the extents by name, `Pos{capacity}` among
/// them: `kv_cache<float, k_posn, batch, k_posn, nheads, d_head>
/// cache(batch{1}, k_posn{512});`. `keys()`/`values()` view positions
/// [0, size()) of the storage; a view stays valid until the cache is
/// destroyed or moved (appending writes past it, never reallocates).
template <class T, dimension Pos, dimension... Ds>
class kv_cache {
 public:
  using value_type = T;
  using dims = dim_list<Ds...>;
  using position_dim = Pos;
  static constexpr std::size_t rank = sizeof...(Ds);

  /// Storage for keys and values with the given extents (by name, as a
  /// tensor takes them); Pos's extent is the capacity.
  template <dimension... Args>
  explicit kv_cache(const Args&... extents) : keys_(extents...), values_(extents...) {}

  /// Positions appended so far.
  std::size_t size() const noexcept { return size_; }
  /// Positions the cache can hold.
  std::size_t capacity() const noexcept { return keys_.template extent<Pos>(); }
  /// Forgets every position (the storage stays).
  void clear() noexcept { size_ = 0; }

  /// Appends m new positions: k and v are named expressions with the
  /// cache's dims in any order, Pos's extent m (the same for both), every
  /// other extent the cache's. Compile time: the dims and the value type
  /// (errors kv_cache_append_with_other_dims,
  /// kv_cache_append_with_another_value_type). Run time: `shape_error`
  /// naming the dim when an extent differs or size() + m exceeds the
  /// capacity; the cache is unchanged then.
  template <named_expression K, named_expression V>
  void append(K&& k, V&& v) {
    if constexpr (!append_ok<K>() || !append_ok<V>()) {
      if constexpr (!append_ok<K>())
        report_append<K>();
      else
        report_append<V>();
    } else {
      const auto ke = detail::permute<dims_of_t<K>, dims>(k.extents());
      const auto ve = detail::permute<dims_of_t<V>, dims>(v.extents());
      const std::size_t m = check_extents(ke, "keys");
      if (check_extents(ve, "values") != m)
        throw shape_error("kv_cache.append: keys and values append different numbers of positions along '" +
                          std::string(Pos::name.view()) + "' (" + std::to_string(m) + " and " +
                          std::to_string(ve[pos]) + ")");
      if (m > capacity() - size_)
        throw shape_error("kv_cache.append: " + std::to_string(m) + " new positions along '" +
                          std::string(Pos::name.view()) + "' exceed the capacity " + std::to_string(capacity()) +
                          " (" + std::to_string(size_) + " held)");
      // An empty chunk (some extent 0) writes nothing; its storage may have
      // no address to offset from.
      if (!has_zero_extent(ke)) {
        k.eval_to(destination<dims_of_t<K>>(keys_, ke));
        v.eval_to(destination<dims_of_t<V>>(values_, ve));
      }
      size_ += m;
    }
  }

  /// The cached keys: a view of positions [0, size()) along Pos.
  auto keys() const { return slice<Pos>(keys_, std::size_t{0}, size_); }
  /// The cached values: a view of positions [0, size()) along Pos.
  auto values() const { return slice<Pos>(values_, std::size_t{0}, size_); }

 private:
  // A member type is instantiated with the class: a cache without Pos
  // among its dims fails here, once.
  using dims_check_ = std::integral_constant<std::size_t, sizeof(detail::kv_cache_dims_checked<Pos, dims>)>;
  static constexpr std::size_t pos = contains_v<dims, Pos> ? index_of<dims>(Pos::name.view()) : 0;

  template <class E>
  static constexpr bool append_ok() {
    if constexpr (is_invalid_v<E> || !same_name_set_v<dims, dims_of_t<E>>)
      return false;
    else
      return std::is_same_v<value_type_of_t<E>, T>;
  }
  template <class E>
  static constexpr void report_append() {
    if constexpr (is_invalid_v<E>) {
      // already reported
    } else if constexpr (!same_name_set_v<dims, dims_of_t<E>>) {
      detail::report<kv_cache_append_with_other_dims<diagnostic_dims_t<dims>, diagnostic_dims_t<dims_of_t<E>>>>();
    } else {
      detail::report<kv_cache_append_with_another_value_type<T, value_type_of_t<E>>>();
    }
  }

  // The number of new positions in extents e (in the cache's order), after
  // checking every other extent against the cache's.
  std::size_t check_extents(const std::array<std::size_t, rank>& e, const char* what) const {
    const auto have = keys_.extents();
    constexpr std::array<std::string_view, rank> names{Ds::name.view()...};
    for (std::size_t i = 0; i < rank; ++i)
      if (i != pos && e[i] != have[i])
        throw shape_error(std::string("kv_cache.append: the new ") + what + " have extent " + std::to_string(e[i]) +
                          " along '" + std::string(names[i]) + "' but the cache has " + std::to_string(have[i]));
    return e[pos];
  }

  static bool has_zero_extent(const std::array<std::size_t, rank>& e) noexcept {
    for (std::size_t x : e)
      if (x == 0) return true;
    return false;
  }

  // Positions [size_, size_ + m) of store, in the dims order of Src.
  template <class Src>
  strided<T, rank> destination(tensor<T, Ds...>& store, const std::array<std::size_t, rank>& e) const {
    const auto st = store.strides();
    T* first = store.data() + static_cast<std::ptrdiff_t>(size_) * st[pos];
    return {first, detail::permute<dims, Src>(e), detail::permute<dims, Src>(st)};
  }

  tensor<T, Ds...> keys_, values_;
  std::size_t size_ = 0;
};

}  // namespace dimsum
