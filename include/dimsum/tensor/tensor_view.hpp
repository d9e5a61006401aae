#pragma once
/// \file
/// `tensor_view<T, Dims...>`: a non-owning, strided view with named dims.
/// Renaming a tensor (`rename<posn, k_posn>(x)`) and slicing give views.

#include <array>
#include <cstddef>

#include <dimsum/tensor/expression.hpp>
#include <dimsum/tensor/named_access.hpp>

namespace dimsum {

/// A strided view of memory owned elsewhere, with named dims. `T` may be
/// const. The viewed memory must outlive the view.
template <class T, dimension... Ds>
class tensor_view : public expression_tag {
 public:
  using value_type = std::remove_const_t<T>;
  using dims = dim_list<Ds...>;
  static constexpr std::size_t rank = sizeof...(Ds);

  tensor_view(T* data, const std::array<std::size_t, rank>& extents, const std::array<std::ptrdiff_t, rank>& strides)
      : data_(data), extents_(extents), strides_(strides) {}

  T* data() const { return data_; }
  const std::array<std::size_t, rank>& extents() const { return extents_; }
  const std::array<std::ptrdiff_t, rank>& strides() const { return strides_; }

  /// The extent of dim D (by name).
  template <dimension D>
  std::size_t extent() const {
    if constexpr (!contains_v<dims, D>)
      return detail::report<extent_of_a_dim_that_the_tensor_does_not_have<diagnostic_name_t<D>, diagnostic_dims_t<dims>>>(),
             std::size_t{0};
    else
      return extents_[index_of<dims>(D::name.view())];
  }

  /// The element at the indices given by name, in any order.
  template <detail::dim_or_number... Is>
  T& operator()(const Is&... idx) const {
    if constexpr (!detail::indices_ok<dims, Is...>())
      return (detail::report_indices<dims, Is...>(), *data_);
    else
      return data_[detail::offset_from_indices<dims>(extents_, strides_, idx...)];
  }

  template <class Root>
  auto evaluator() const {
    return detail::leaf_evaluator<value_type, Root::size>{data_, detail::strides_in_root<Root, dims>(strides_)};
  }
  void eval_to(const strided<value_type, rank>& dst) const {
    auto ev = evaluator<dims>();
    detail::run_elementwise(dst, ev);
  }

 private:
  // A member type is instantiated with the class: a duplicate dim fails here.
  using dims_check_ = std::integral_constant<std::size_t, sizeof(detail::unique_dims_checked<dims>)>;
  T* data_;
  std::array<std::size_t, rank> extents_;
  std::array<std::ptrdiff_t, rank> strides_;
};

}  // namespace dimsum
