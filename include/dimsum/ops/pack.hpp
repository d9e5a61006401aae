#pragma once
/// \file
/// `pack` and `unpack`, as einops defines them: tensors of different ranks
/// packed into one dim by a pattern such as "b * c", and split back.
///
///     auto [packed, shapes] = pack<"b * c", tokens>(image, text, cls);   // (b, h, w, c), (b, t, c), (b, c)
///     // packed: (b, tokens, c), tokens = h*w + t + 1
///     auto [image2, text2, cls2] = unpack<"b * c">(packed, shapes);       // the same dims and values back
///
/// The pattern is labels around one `*`. Each tensor must have every
/// labelled dim (found by name, wherever it sits); `*` stands for its
/// other dims, in its order, flattened row-major into a segment of the
/// packed dim (a tensor with no other dims takes one slot). The result has
/// the pattern's dims in the pattern's order, `*` replaced by the packed
/// dim, and the value type common to the tensors. `packed_shapes` records
/// each tensor's dims (in its type) and extents, so that `unpack` restores
/// every tensor exactly. Extents of the labelled dims must agree
/// (`shape_error` naming the dim otherwise).

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/einsum_string.hpp>
#include <dimsum/ops/elementwise.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// Checker: a pack pattern is not labels around exactly one `*`.
template <class Pos>
struct pack_pattern_is_not_labels_around_one_star {
  static_assert(detail::always_false<Pos>,
                "dimsum: a pack pattern is labels around exactly one '*', e.g. \"b * c\" (the position shows where "
                "it goes wrong)");
};
/// Checker: a tensor given to pack (or a tensor unpack splits) lacks a
/// dim that the pattern names.
template <class Label, class Operand, class Dims>
struct pack_operand_lacks_a_dim_of_the_pattern {
  static_assert(detail::always_false<Label, Operand, Dims>,
                "dimsum: a tensor given to pack or unpack lacks a dim that the pattern names");
};
/// Checker: the packed dim is already a dim of a tensor given to pack, or
/// named by the pattern.
template <class Dim, class Operand, class Dims>
struct pack_dim_is_already_a_dim_of_an_operand {
  static_assert(detail::always_false<Dim, Operand, Dims>,
                "dimsum: pack needs a new dim for '*', not one that a tensor or the pattern already has");
};
/// Checker: unpack's tensor has not exactly one dim besides the pattern's
/// (the packed dim, which '*' stands for).
template <class Dims>
struct unpack_tensor_needs_one_dim_besides_the_pattern {
  static_assert(detail::always_false<Dims>,
                "dimsum: unpack's tensor needs exactly one dim besides those the pattern names: the packed dim");
};

/// What pack records: each packed tensor's dims (the lists Ls, in the type)
/// and extents, for unpack. `extents<I>()` are tensor I's, in its dims' order.
template <class... Ls>
struct packed_shapes {
  std::tuple<std::array<std::size_t, Ls::size>...> all;

  template <std::size_t I>
  const auto& extents() const {
    return std::get<I>(all);
  }
  static constexpr std::size_t size = sizeof...(Ls);
};

namespace detail {

inline constexpr std::size_t pack_max_labels = 16;

/// A pack pattern: labels around one `*`.
struct pack_pattern {
  std::size_t error_pos = npos;  // npos when the pattern is well formed
  std::size_t n = 0;             // labels
  std::array<std::string_view, pack_max_labels> labels{};
  std::size_t star = 0;  // how many labels come before `*`
};
constexpr pack_pattern parse_pack_pattern(std::string_view s) {
  pack_pattern p{};
  bool seen_star = false;
  std::size_t i = 0;
  while (i < s.size()) {
    if (is_space(s[i])) {
      ++i;
    } else if (s[i] == '*') {
      if (seen_star) return p.error_pos = i, p;
      seen_star = true;
      p.star = p.n;
      ++i;
    } else if (is_label_start(s[i])) {
      std::size_t j = i;
      while (j < s.size() && is_label_char(s[j])) ++j;
      const std::string_view l = s.substr(i, j - i);
      for (std::size_t k = 0; k < p.n; ++k)
        if (p.labels[k] == l) return p.error_pos = i, p;
      if (p.n == pack_max_labels) return p.error_pos = i, p;
      p.labels[p.n++] = l;
      i = j;
    } else {
      return p.error_pos = i, p;
    }
  }
  if (!seen_star) p.error_pos = s.size();
  return p;
}
template <fixed_string S>
inline constexpr pack_pattern pack_pattern_v = parse_pack_pattern(S.view());

template <fixed_string S>
constexpr bool names_a_pack_label(std::string_view n) {
  for (std::size_t k = 0; k < pack_pattern_v<S>.n; ++k)
    if (pack_pattern_v<S>.labels[k] == n) return true;
  return false;
}

/// The first label of S that L lacks, or npos.
template <fixed_string S, class L>
constexpr std::size_t first_missing_pack_label() {
  for (std::size_t k = 0; k < pack_pattern_v<S>.n; ++k)
    if (find_name(L::names, pack_pattern_v<S>.labels[k]) == npos) return k;
  return npos;
}

/// The positions in L of the dims `*` stands for (those S does not name).
template <fixed_string S, class L>
constexpr auto star_positions() {
  constexpr std::size_t n = [] {
    std::size_t c = 0;
    for (auto name : L::names) c += names_a_pack_label<S>(name) ? 0 : 1;
    return c;
  }();
  std::array<std::size_t, n> a{};
  std::size_t c = 0;
  for (std::size_t i = 0; i < L::size; ++i)
    if (!names_a_pack_label<S>(L::names[i])) a[c++] = i;
  return a;
}

template <fixed_string S, std::size_t K>
struct pack_label_getter {
  constexpr std::string_view operator()() const { return pack_pattern_v<S>.labels[K]; }
};

/// The packed tensor's dims: the pattern's labels (their dims from L),
/// with `*` replaced by P.
template <fixed_string S, class L, dimension P, class Seq = std::make_index_sequence<pack_pattern_v<S>.n + 1>>
struct packed_dims;
template <fixed_string S, class L, dimension P, std::size_t... K>
struct packed_dims<S, L, P, std::index_sequence<K...>> {
  template <std::size_t I>
  static auto pick() {
    constexpr std::size_t star = pack_pattern_v<S>.star;
    if constexpr (I == star)
      return std::type_identity<P>{};
    else
      return std::type_identity<at_t<L, find_name(L::names, pack_pattern_v<S>.labels[I < star ? I : I - 1])>>{};
  }
  using type = dim_list<typename decltype(pick<K>())::type...>;
};

/// The strided block of a packed tensor (dims Packed, position `star` of
/// the packed dim, data p, extents pe, strides ps) that tensor I of dims L
/// occupies from `offset` along the packed dim, in L's order: the labelled
/// dims by name, L's other dims row-major inside the segment.
template <class L, class Packed, std::size_t Star, class T>
strided<T, L::size> segment_of(T* p, const std::array<std::size_t, Packed::size>& pe,
                               const std::array<std::ptrdiff_t, Packed::size>& ps,
                               const std::array<std::size_t, L::size>& ext, std::size_t offset) {
  // An empty packed tensor may have no buffer: no offset is added to it.
  strided<T, L::size> s{p ? p + static_cast<std::ptrdiff_t>(offset) * ps[Star] : p, ext, {}};
  std::ptrdiff_t acc = ps[Star];
  for (std::size_t i = L::size; i-- > 0;) {
    const std::size_t k = find_name(Packed::names, L::names[i]);
    if (k != npos && k != Star) {
      s.strides[i] = ps[k];
      if (pe[k] != ext[i])
        throw shape_error("pack: dim '" + std::string(L::names[i]) + "' has extent " + std::to_string(ext[i]) +
                          " in one tensor but " + std::to_string(pe[k]) + " in the packed tensor");
    } else {
      s.strides[i] = acc;
      acc *= static_cast<std::ptrdiff_t>(ext[i] == 0 ? 1 : ext[i]);
    }
  }
  return s;
}

/// The number of packed slots tensor of dims L takes: the product of the
/// extents of its dims that `*` stands for (1 when there are none).
template <fixed_string S, class L>
std::size_t star_size(const std::array<std::size_t, L::size>& ext) {
  std::size_t n = 1;
  for (std::size_t i : star_positions<S, L>()) n *= ext[i];
  return n;
}

// What pack and unpack return after reporting a mistake: as many invalid
// expressions as a correct call binds (`auto [packed, shapes] = pack...`,
// `auto [x, y] = unpack...`), so the binding adds no second error.
using invalid_pack_result = std::pair<invalid_expression, invalid_expression>;
template <std::size_t N>
using invalid_unpack_result = decltype(std::tuple_cat(std::array<invalid_expression, N>{}));

}  // namespace detail

/// Packs tensors of any ranks into one tensor along the new dim P, by the
/// pattern S (labels around one `*`): see the file comment. Returns the
/// packed tensor and the `packed_shapes` that unpack needs, as a pair
/// (`auto [packed, shapes] = pack<"b * c", tokens>(x, y)`).
template <fixed_string S, dimension P, named_expression... Es>
  requires(sizeof...(Es) > 0)
auto pack(const Es&... xs) {
  constexpr detail::pack_pattern pat = detail::pack_pattern_v<S>;
  constexpr std::size_t missing_in = [] {
    std::size_t i = 0;
    for (bool ok : {(detail::first_missing_pack_label<S, dims_of_t<Es>>() == detail::npos)...}) {
      if (!ok) return i;
      ++i;
    }
    return detail::npos;
  }();
  constexpr std::size_t has_p = [] {
    std::size_t i = 0;
    for (bool has : {contains_v<dims_of_t<Es>, P>...}) {
      if (has) return i;
      ++i;
    }
    return detail::npos;
  }();
  using All = std::tuple<Es...>;
  if constexpr ((is_invalid_v<Es> || ...)) {
    return detail::invalid_pack_result{};
  } else if constexpr (pat.error_pos != detail::npos) {
    detail::report<pack_pattern_is_not_labels_around_one_star<position_c<pat.error_pos>>>();
    return detail::invalid_pack_result{};
  } else if constexpr (missing_in != detail::npos) {
    using L = dims_of_t<std::tuple_element_t<missing_in, All>>;
    constexpr std::size_t k = detail::first_missing_pack_label<S, L>();
    detail::report<pack_operand_lacks_a_dim_of_the_pattern<detail::to_label_t<detail::pack_label_getter<S, k>>,
                                                           operand<missing_in>, diagnostic_dims_t<L>>>();
    return detail::invalid_pack_result{};
  } else if constexpr (has_p != detail::npos || detail::names_a_pack_label<S>(P::name.view())) {
    using L = dims_of_t<std::tuple_element_t<has_p == detail::npos ? 0 : has_p, All>>;
    detail::report<pack_dim_is_already_a_dim_of_an_operand<diagnostic_name_t<P>, operand<has_p == detail::npos ? 0 : has_p>,
                                                           diagnostic_dims_t<L>>>();
    return detail::invalid_pack_result{};
  } else {
    using T = std::common_type_t<value_type_of_t<Es>...>;
    using L0 = dims_of_t<std::tuple_element_t<0, All>>;
    using Packed = typename detail::packed_dims<S, L0, P>::type;
    constexpr std::size_t star = pat.star;
    packed_shapes<dims_of_t<Es>...> shapes{{xs.extents()...}};
    // The packed extents: the labelled dims from the first tensor, the
    // packed dim the sum of the segments.
    std::array<std::size_t, Packed::size> ext{};
    const auto e0 = std::get<0>(shapes.all);
    for (std::size_t k = 0; k < Packed::size; ++k)
      if (k != star) ext[k] = e0[detail::find_name(L0::names, Packed::names[k])];
    std::size_t total = 0;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((total += detail::star_size<S, dims_of_t<std::tuple_element_t<I, All>>>(std::get<I>(shapes.all))), ...);
    }(std::index_sequence_for<Es...>{});
    ext[star] = total;
    auto out = tensor_for_t<T, Packed>::from_extents(ext);
    const auto st = out.strides();
    std::size_t offset = 0;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            using L = dims_of_t<std::tuple_element_t<I, All>>;
            const auto& xe = std::get<I>(shapes.all);
            const auto dst = detail::segment_of<L, Packed, star>(out.data(), ext, st, xe, offset);
            const auto& x = std::get<I>(std::forward_as_tuple(xs...));
            if (out.size() != 0) {
              if constexpr (std::is_same_v<value_type_of_t<decltype(x)>, T>)
                x.eval_to(dst);
              else
                cast<T>(x).eval_to(dst);
            }
            offset += detail::star_size<S, L>(xe);
          }(),
          ...);
    }(std::index_sequence_for<Es...>{});
    return std::pair<tensor_for_t<T, Packed>, packed_shapes<dims_of_t<Es>...>>(std::move(out), std::move(shapes));
  }
}

/// Splits a tensor packed by `pack<S, P>` back into tensors with the dims
/// and extents `shapes` records: a std::tuple of tensors (`auto [x, y] =
/// unpack<"b * c">(packed, shapes)`). The packed dim's extent must equal
/// the sum of the segments (`shape_error` otherwise).
template <fixed_string S, named_expression E, class... Ls>
auto unpack(const E& packed, const packed_shapes<Ls...>& shapes) {
  constexpr detail::pack_pattern pat = detail::pack_pattern_v<S>;
  using Packed = dims_of_t<E>;
  using T = value_type_of_t<E>;
  constexpr auto others = detail::star_positions<S, Packed>();
  constexpr std::size_t missing = detail::first_missing_pack_label<S, Packed>();
  constexpr std::size_t missing_in = [] {
    std::size_t i = 0;
    for (bool ok : {(detail::first_missing_pack_label<S, Ls>() == detail::npos)...}) {
      if (!ok) return i;
      ++i;
    }
    return detail::npos;
  }();
  if constexpr (is_invalid_v<E>) {
    return detail::invalid_unpack_result<sizeof...(Ls)>{};
  } else if constexpr (pat.error_pos != detail::npos) {
    detail::report<pack_pattern_is_not_labels_around_one_star<position_c<pat.error_pos>>>();
    return detail::invalid_unpack_result<sizeof...(Ls)>{};
  } else if constexpr (missing != detail::npos) {
    detail::report<pack_operand_lacks_a_dim_of_the_pattern<detail::to_label_t<detail::pack_label_getter<S, missing>>,
                                                           operand<0>, diagnostic_dims_t<Packed>>>();
    return detail::invalid_unpack_result<sizeof...(Ls)>{};
  } else if constexpr (others.size() != 1) {
    detail::report<unpack_tensor_needs_one_dim_besides_the_pattern<diagnostic_dims_t<Packed>>>();
    return detail::invalid_unpack_result<sizeof...(Ls)>{};
  } else if constexpr (missing_in != detail::npos) {
    using L = std::tuple_element_t<missing_in, std::tuple<Ls...>>;
    constexpr std::size_t k = detail::first_missing_pack_label<S, L>();
    detail::report<pack_operand_lacks_a_dim_of_the_pattern<detail::to_label_t<detail::pack_label_getter<S, k>>,
                                                           operand<missing_in>, diagnostic_dims_t<L>>>();
    return detail::invalid_unpack_result<sizeof...(Ls)>{};
  } else {
    constexpr std::size_t star = others[0];
    const auto pe = packed.extents();
    const auto src = detail::materialize(packed);
    std::size_t total = 0;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((total += detail::star_size<S, Ls>(std::get<I>(shapes.all))), ...);
    }(std::index_sequence_for<Ls...>{});
    if (total != pe[star])
      throw shape_error("unpack: the packed dim '" + std::string(Packed::names[star]) + "' has extent " +
                        std::to_string(pe[star]) + " but the recorded shapes fill " + std::to_string(total));
    std::size_t offset = 0;
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      auto one = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
        using L = std::tuple_element_t<J, std::tuple<Ls...>>;
        const auto& xe = std::get<J>(shapes.all);
        const auto seg = detail::segment_of<L, Packed, star>(src.data(), pe, src.strides(), xe, offset);
        offset += detail::star_size<S, L>(xe);
        auto t = tensor_for_t<T, L>::from_extents(xe);
        if (t.size() != 0) t = view_for_t<const T, L>(seg.data, seg.extents, seg.strides);
        return t;
      };
      // Braced initialisation runs the segments in order.
      return std::tuple<tensor_for_t<T, Ls>...>{one(std::integral_constant<std::size_t, I>{})...};
    }(std::index_sequence_for<Ls...>{});
  }
}

/// unpack of the result of a pack that did not compile: that mistake's
/// error alone.
template <fixed_string S, class E>
invalid_expression unpack(const E&, invalid_expression) {
  return {};
}

}  // namespace dimsum
