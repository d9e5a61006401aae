#pragma once
/// \file
/// `stack<D>(parts)` puts named expressions with the same dims side by side
/// along a new leading dim D (torch.stack(parts, dim=0)); `concat<D>(parts)`
/// joins them along their existing dim D (torch.cat). The parts are a
/// `std::vector` of one type, or listed as arguments (`concat<posn>(a, b)`),
/// and may be tensors, views or lazy expressions, each evaluated straight
/// into its place in the result. Dims are matched by name: a part may list
/// them in another order. Extents are checked at run time (`shape_error`
/// naming the dim, the part and both extents).

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

namespace detail {
/// The extents of the parts, in L's dims order, checked to agree on every
/// dim but the one at `skip` (npos: every dim).
template <class L>
void check_parts_agree(const std::vector<std::array<std::size_t, L::size>>& ext, std::size_t skip, const char* where) {
  for (std::size_t j = 1; j < ext.size(); ++j)
    for (std::size_t i = 0; i < L::size; ++i)
      if (i != skip && ext[j][i] != ext[0][i])
        throw shape_error(std::string(where) + ": dim '" + std::string(L::names[i]) + "' has extent " +
                          std::to_string(ext[0][i]) + " in part 0 but " + std::to_string(ext[j][i]) + " in part " +
                          std::to_string(j));
}

/// Writes part e into the block of `data` with extents `ext` and strides
/// `st` given in L's dims order (e's own order may differ).
template <class L, class T, class E>
void write_part(T* data, const std::array<std::size_t, L::size>& ext, const std::array<std::ptrdiff_t, L::size>& st,
                const E& e) {
  using S = dims_of_t<E>;
  e.eval_to(strided<T, S::size>{data, permute<L, S>(ext), permute<L, S>(st)});
}

/// stack: `each(f)` calls f on every part in order; `ext` holds their
/// extents in L's order.
template <dimension D, class T, class L, class Each>
auto stack_parts(const std::vector<std::array<std::size_t, L::size>>& ext, Each&& each) {
  using R = union_t<dim_list<D>, L>;
  if (ext.empty()) throw shape_error("stack: no tensors to stack along '" + std::string(D::name.view()) + "'");
  check_parts_agree<L>(ext, npos, "stack");
  std::array<std::size_t, R::size> out_ext{};
  out_ext[0] = ext.size();
  for (std::size_t i = 0; i < L::size; ++i) out_ext[i + 1] = ext[0][i];
  auto out = tensor_for_t<T, R>::from_extents(out_ext);
  if (out.size() == 0) return out;  // nothing to write (and maybe no memory to offset into)
  std::array<std::ptrdiff_t, L::size> st{};
  for (std::size_t i = 0; i < L::size; ++i) st[i] = out.strides()[i + 1];
  std::size_t j = 0;
  each([&](const auto& part) {
    write_part<L>(out.data() + static_cast<std::ptrdiff_t>(j++) * out.strides()[0], ext[0], st, part);
  });
  return out;
}

/// concat along D, the dim at position p of L; as stack_parts.
template <dimension D, class T, class L, class Each>
auto concat_parts(const std::vector<std::array<std::size_t, L::size>>& ext, Each&& each) {
  constexpr std::size_t p = index_of<L>(D::name.view());
  if (ext.empty()) throw shape_error("concat: no tensors to join along '" + std::string(D::name.view()) + "'");
  check_parts_agree<L>(ext, p, "concat");
  auto out_ext = ext[0];
  out_ext[p] = 0;
  for (std::size_t j = 0; j < ext.size(); ++j) {
    const std::size_t n = ext[j][p];
    if (n > static_cast<std::size_t>(-1) - out_ext[p])
      throw shape_error("concat: dim '" + std::string(D::name.view()) + "' of extent " + std::to_string(n) +
                        " in part " + std::to_string(j) +
                        " makes the total extent overflow std::size_t (the parts before it sum to " +
                        std::to_string(out_ext[p]) + ")");
    out_ext[p] += n;
  }
  auto out = tensor_for_t<T, L>::from_extents(out_ext);
  if (out.size() == 0) return out;  // nothing to write (and maybe no memory to offset into)
  // Each part into its range of D: through strides, so any D position works.
  std::size_t offset = 0, j = 0;
  each([&](const auto& part) {
    auto part_ext = out.extents();
    part_ext[p] = ext[j++][p];
    write_part<L>(out.data() + static_cast<std::ptrdiff_t>(offset) * out.strides()[p], part_ext, out.strides(), part);
    offset += part_ext[p];
  });
  return out;
}

/// The position of the first listed part (E0 is part 0) whose dims or value
/// type differ from E0's, or npos.
template <class E0, class... Es>
constexpr std::size_t first_odd_part() {
  constexpr std::array<bool, sizeof...(Es) + 1> odd{false,
                                                    (!same_name_set_v<dims_of_t<E0>, dims_of_t<Es>> ||
                                                     !std::is_same_v<value_type_of_t<E0>, value_type_of_t<Es>>)...};
  for (std::size_t i = 1; i < odd.size(); ++i)
    if (odd[i]) return i;
  return npos;
}

/// Whether listed parts can be joined (the operation's own check on D
/// aside): none is invalid, all have E0's dims and value type. A pure
/// condition; report_listed_parts reports the failure.
template <class E0, class... Es>
constexpr bool listed_parts_ok() {
  if constexpr ((is_invalid_v<E0> || ... || is_invalid_v<Es>))
    return false;
  else
    return first_odd_part<E0, Es...>() == npos;
}
template <class E0, class... Es>
constexpr void report_listed_parts() {
  if constexpr ((is_invalid_v<E0> || ... || is_invalid_v<Es>)) {
    // a part already reported its mistake
  } else {
    constexpr std::size_t j = first_odd_part<E0, Es...>();
    using Ej = std::tuple_element_t<j - 1, std::tuple<std::remove_cvref_t<Es>...>>;
    if constexpr (!same_name_set_v<dims_of_t<E0>, dims_of_t<Ej>>)
      report<stack_and_concat_need_parts_with_the_same_dims<operand<j>, diagnostic_dims_t<dims_of_t<E0>>,
                                                            diagnostic_dims_t<dims_of_t<Ej>>>>();
    else
      report<value_type_mismatch<value_type_of_t<E0>, value_type_of_t<Ej>>>();
  }
}

template <class L, class... Es>
std::vector<std::array<std::size_t, L::size>> listed_extents(const Es&... es) {
  return {permute<dims_of_t<Es>, L>(es.extents())...};
}
template <class L, class E>
std::vector<std::array<std::size_t, L::size>> vector_extents(const std::vector<E>& parts) {
  std::vector<std::array<std::size_t, L::size>> ext;
  ext.reserve(parts.size());
  for (const auto& e : parts) ext.push_back(e.extents());
  return ext;
}

// stack (Stack: D is a new dim) or concat (D is the parts' own dim): the
// check on D, then the join.
template <bool Stack, dimension D, class L>
constexpr bool join_dim_ok() {
  return contains_v<L, D> != Stack;
}
template <bool Stack, dimension D, class L>
constexpr void report_join_dim() {
  if constexpr (Stack)
    report<stack_dim_is_already_a_dim_of_the_parts<diagnostic_name_t<D>, diagnostic_dims_t<L>>>();
  else
    report<concat_dim_is_not_a_dim_of_the_parts<diagnostic_name_t<D>, diagnostic_dims_t<L>>>();
}
template <bool Stack, dimension D, class T, class L, class Each>
auto join_parts(const std::vector<std::array<std::size_t, L::size>>& ext, Each&& each) {
  if constexpr (Stack)
    return stack_parts<D, T, L>(ext, each);
  else
    return concat_parts<D, T, L>(ext, each);
}

template <bool Stack, dimension D, class E>
auto join_vector(const std::vector<E>& parts) {
  using L = dims_of_t<E>;
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else if constexpr (!join_dim_ok<Stack, D, L>()) {
    report_join_dim<Stack, D, L>();
    return invalid_expression{};
  } else {
    return join_parts<Stack, D, value_type_of_t<E>, L>(vector_extents<L>(parts), [&](auto&& f) {
      for (const auto& e : parts) f(e);
    });
  }
}
template <bool Stack, dimension D, class E0, class... Es>
auto join_listed(const E0& e0, const Es&... es) {
  using L = dims_of_t<E0>;
  if constexpr (!is_invalid_v<E0> && !join_dim_ok<Stack, D, L>()) {
    report_join_dim<Stack, D, L>();
    return invalid_expression{};
  } else if constexpr (!listed_parts_ok<E0, Es...>()) {
    report_listed_parts<E0, Es...>();
    return invalid_expression{};
  } else {
    return join_parts<Stack, D, value_type_of_t<E0>, L>(listed_extents<L>(e0, es...),
                                                        [&](auto&& f) { (f(e0), ..., f(es)); });
  }
}
}  // namespace detail

/// Stacks named expressions with the same dims along a new leading dim D;
/// the result's dims are D followed by the parts' dims (the first part's
/// order), its value type theirs. An empty list is an error.
template <dimension D, named_expression E>
auto stack(const std::vector<E>& parts) {
  return detail::join_vector<true, D>(parts);
}
/// `stack<batch>(a, b, c)`: the parts as arguments, of any expression types
/// with the same dims (in any order: placed by name) and value type.
template <dimension D, named_expression E0, named_expression... Es>
auto stack(const E0& e0, const Es&... es) {
  return detail::join_listed<true, D>(e0, es...);
}

/// Joins named expressions with the same dims along their dim D; every
/// other extent must agree. The result has the first part's dims order.
template <dimension D, named_expression E>
auto concat(const std::vector<E>& parts) {
  return detail::join_vector<false, D>(parts);
}
/// `concat<posn>(past, x)`: the parts as arguments, as for stack.
template <dimension D, named_expression E0, named_expression... Es>
auto concat(const E0& e0, const Es&... es) {
  return detail::join_listed<false, D>(e0, es...);
}

}  // namespace dimsum
