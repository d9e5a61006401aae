#pragma once
/// \file
/// `stack<D>(parts)` puts tensors with the same dims side by side along a new
/// leading dim D (torch.stack(parts, dim=0)); `concat<D>(parts)` joins them
/// along their existing dim D (torch.cat). Extents are checked at run time
/// (`shape_error` naming the dim, the part and both extents).

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

namespace detail {
template <class E>
void check_parts_agree(const std::vector<E>& parts, std::size_t skip, const char* where) {
  using L = dims_of_t<E>;
  for (std::size_t j = 1; j < parts.size(); ++j)
    for (std::size_t i = 0; i < L::size; ++i)
      if (i != skip && parts[j].extents()[i] != parts[0].extents()[i])
        throw shape_error(std::string(where) + ": dim '" + std::string(L::names[i]) + "' has extent " +
                          std::to_string(parts[0].extents()[i]) + " in part 0 but " +
                          std::to_string(parts[j].extents()[i]) + " in part " + std::to_string(j));
}
}  // namespace detail

namespace detail {
template <dimension D, class T, dimension... Ds>
tensor<T, D, Ds...> stack_impl(const std::vector<tensor<T, Ds...>>& parts) {
  if (parts.empty()) throw shape_error("stack: no tensors to stack along '" + std::string(D::name.view()) + "'");
  detail::check_parts_agree(parts, detail::npos, "stack");
  std::array<std::size_t, sizeof...(Ds) + 1> ext{};
  ext[0] = parts.size();
  for (std::size_t i = 0; i < sizeof...(Ds); ++i) ext[i + 1] = parts[0].extents()[i];
  auto out = tensor<T, D, Ds...>::from_extents(ext);
  const std::size_t n = parts[0].size();
  for (std::size_t j = 0; j < parts.size(); ++j) std::copy_n(parts[j].data(), n, out.data() + j * n);
  return out;
}
}  // namespace detail

namespace detail {
template <dimension D, class T, dimension... Ds>
tensor<T, Ds...> concat_impl(const std::vector<tensor<T, Ds...>>& parts) {
  using L = dim_list<Ds...>;
  constexpr std::size_t p = index_of<L>(D::name.view());
  if (parts.empty()) throw shape_error("concat: no tensors to join along '" + std::string(D::name.view()) + "'");
  detail::check_parts_agree(parts, p, "concat");
  auto ext = parts[0].extents();
  ext[p] = 0;
  for (std::size_t j = 0; j < parts.size(); ++j) {
    const std::size_t n = parts[j].extents()[p];
    if (n > static_cast<std::size_t>(-1) - ext[p])
      throw shape_error("concat: dim '" + std::string(D::name.view()) + "' of extent " + std::to_string(n) +
                        " in part " + std::to_string(j) + " makes the total extent overflow std::size_t (the parts before it sum to " +
                        std::to_string(ext[p]) + ")");
    ext[p] += n;
  }
  auto out = tensor<T, Ds...>::from_extents(ext);
  if (out.size() == 0) return out;  // nothing to copy (and maybe no memory to offset into)
  // Copy each part into its range of D: through views, so any D position works.
  std::size_t offset = 0;
  auto ov = out.view();
  for (const auto& t : parts) {
    const std::size_t n = t.extents()[p];
    auto ext_part = ov.extents();
    ext_part[p] = n;
    auto dst = strided<T, sizeof...(Ds)>{ov.data() + static_cast<std::ptrdiff_t>(offset) * ov.strides()[p], ext_part,
                                         ov.strides()};
    t.eval_to(dst);
    offset += n;
  }
  return out;
}
}  // namespace detail

/// Stacks same-shaped tensors along a new leading dim D; the result's dims
/// are D followed by the parts' dims. An empty list is an error.
template <dimension D, class T, dimension... Ds>
auto stack(const std::vector<tensor<T, Ds...>>& parts) {
  if constexpr (contains_v<dim_list<Ds...>, D>) {
    detail::report<stack_dim_is_already_a_dim_of_the_parts<diagnostic_name_t<D>, dims<diagnostic_name_t<Ds>...>>>();
    return invalid_expression{};
  } else {
    return detail::stack_impl<D>(parts);
  }
}
/// `stack<D>(a, b)`, the parts as separate arguments: the compile error
/// `stack_takes_one_vector_of_tensors` (write `stack<D>(std::vector{a, b})`).
template <dimension D, named_expression E, named_expression... Es>
invalid_expression stack(const E&, const Es&...) {
  detail::report<stack_takes_one_vector_of_tensors<diagnostic_name_t<D>, count_c<1 + sizeof...(Es)>,
                                                   diagnostic_dims_t<dims_of_t<E>>>>();
  return {};
}


/// Joins tensors with the same dims along their dim D; every other extent
/// must agree.
template <dimension D, class T, dimension... Ds>
auto concat(const std::vector<tensor<T, Ds...>>& parts) {
  if constexpr (!contains_v<dim_list<Ds...>, D>) {
    detail::report<concat_dim_is_not_a_dim_of_the_parts<diagnostic_name_t<D>, dims<diagnostic_name_t<Ds>...>>>();
    return invalid_expression{};
  } else {
    return detail::concat_impl<D>(parts);
  }
}


}  // namespace dimsum
