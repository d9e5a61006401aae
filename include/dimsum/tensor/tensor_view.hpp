#pragma once
/// \file
/// `tensor_view<T, Dims...>`: a non-owning, strided view with named dims.
/// Renaming a tensor (`rename<posn, k_posn>(x)`) and slicing give views;
/// assigning to a view writes into the memory it views (`x[:, 3:] = y`).

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include <dimsum/tensor/expression.hpp>
#include <dimsum/tensor/named_access.hpp>

namespace dimsum {

namespace detail {
/// The address range [lo, hi) that a strided block of T may touch; empty
/// (lo == hi) when an extent is 0.
template <class T, std::size_t R>
std::pair<std::uintptr_t, std::uintptr_t> address_range(const T* data, const std::array<std::size_t, R>& ext,
                                                         const std::array<std::ptrdiff_t, R>& st) {
  const auto base = reinterpret_cast<std::uintptr_t>(data);
  std::ptrdiff_t lo = 0, hi = 0;
  for (std::size_t i = 0; i < R; ++i) {
    if (ext[i] == 0) return {base, base};
    const std::ptrdiff_t span = static_cast<std::ptrdiff_t>(ext[i] - 1) * st[i];
    (span < 0 ? lo : hi) += span;
  }
  return {base + static_cast<std::uintptr_t>(lo * static_cast<std::ptrdiff_t>(sizeof(T))),
          base + static_cast<std::uintptr_t>(hi * static_cast<std::ptrdiff_t>(sizeof(T))) + sizeof(T)};
}

/// Whether a leaf source (a tensor or view) may share memory with dst: their
/// address ranges intersect. Conservative (interleaved strided blocks that
/// touch no common element count as overlapping), which only costs a copy.
template <class T, std::size_t R, class E>
bool may_overlap(const strided<T, R>& dst, const E& src) {
  const auto a = address_range(dst.data, dst.extents, dst.strides);
  const auto b = address_range(src.data(), src.extents(), src.strides());
  return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
}

/// Whether an expression of type E may be written into a view of T with
/// dims L (a pure condition; report_view_source reports the failure).
template <class T, class L, class E>
constexpr bool view_source_ok() {
  if constexpr (std::is_const_v<T>)
    return false;
  else if constexpr (scalar<E>)
    return true;
  else if constexpr (is_invalid_v<E>)
    return false;
  else
    return difference_t<L, dims_of_t<E>>::size == 0 && std::is_same_v<value_type_of_t<E>, T> &&
           static_extents_agree_v<L, dims_of_t<E>>;
}
template <class T, class L, class E>
constexpr void report_view_source() {
  if constexpr (std::is_const_v<T>) {
    report<assignment_into_a_view_of_const_elements<diagnostic_dims_t<L>>>();
  } else if constexpr (is_invalid_v<E>) {
    // the expression itself already reported its mistake
  } else if constexpr (difference_t<L, dims_of_t<E>>::size != 0) {
    report<assignment_source_has_a_dim_the_view_lacks<diagnostic_name_t<at_t<difference_t<L, dims_of_t<E>>, 0>>,
                                                      diagnostic_dims_t<dims_of_t<E>>, diagnostic_dims_t<L>>>();
  } else if constexpr (!std::is_same_v<value_type_of_t<E>, T>) {
    report<value_type_mismatch<T, value_type_of_t<E>>>();
  } else {
    report_static_disagreement<L, dims_of_t<E>>();
  }
}

/// Writes e (a scalar, or a named expression whose dims are among L's)
/// into dst (L's dims order), broadcasting e by name. A lazy expression,
/// or a leaf whose memory may overlap dst, is evaluated into a temporary
/// first, so e may read the memory it writes (numpy's rule; PyTorch
/// refuses a partly overlapping copy).
template <class L, class T, class E>
void assign_to_view(const strided<T, L::size>& dst, E&& e) {
  for (std::size_t i = 0; i < L::size; ++i)
    if (dst.strides[i] == 0 && dst.extents[i] > 1)
      throw shape_error("assignment into a view: dim '" + std::string(L::names[i]) + "' of extent " +
                        std::to_string(dst.extents[i]) +
                        " has stride 0, so its elements share memory; PyTorch refuses to write into an expanded "
                        "tensor too");
  if constexpr (scalar<E>) {
    const T value = static_cast<T>(e);
    leaf_evaluator<T, L::size> ev{&value, {}};
    run_elementwise(dst, ev);
  } else {
    using S = dims_of_t<E>;
    constexpr auto pos = positions_in<S, L>();
    const auto src_ext = e.extents();
    for (std::size_t i = 0; i < S::size; ++i)
      check_extent(S::names[i], dst.extents[pos[i]], src_ext[i], "assignment into a view");
    auto copy_from = [&](const T* data, const std::array<std::ptrdiff_t, S::size>& strides) {
      leaf_evaluator<T, L::size> ev{data, strides_in_root<L, S>(strides)};
      run_elementwise(dst, ev);
    };
    if constexpr (requires { e.data(); e.strides(); }) {
      if (!may_overlap(dst, e)) return copy_from(e.data(), e.strides());
    }
    const auto st = row_major_strides<S::size>(src_ext);
    auto tmp = std::make_unique<T[]>(checked_size<T, S>(src_ext, "assignment into a view"));
    e.eval_to(strided<T, S::size>{tmp.get(), src_ext, st});
    copy_from(tmp.get(), st);
  }
}
}  // namespace detail

/// A strided view of memory owned elsewhere, with named dims. `T` may be
/// const. The viewed memory must outlive the view. Copying a view copies
/// the reference; assigning to one writes the viewed elements.
template <class T, dimension... Ds>
class tensor_view : public expression_tag {
 public:
  using value_type = std::remove_const_t<T>;
  using dims = dim_list<Ds...>;
  static constexpr std::size_t rank = sizeof...(Ds);

  tensor_view(T* data, const std::array<std::size_t, rank>& extents, const std::array<std::ptrdiff_t, rank>& strides)
      : data_(data), extents_(extents), strides_(strides) {}

  tensor_view(const tensor_view&) = default;

  /// Writes e into the viewed elements, PyTorch's `x[:, 3:] = y` and
  /// `x[..., 0] = 0`: `slice<posn>(x, 3, n) = y;`, `select<d>(x, 0) = 0.0f;`.
  /// e is a scalar (converted to T) or a named expression whose dims are
  /// among the view's, in any order; it broadcasts by name over the others.
  /// Compile time: the view's elements are not const
  /// (`assignment_into_a_view_of_const_elements`), e has no dim the view
  /// lacks (`assignment_source_has_a_dim_the_view_lacks`), the same value
  /// type (`value_type_mismatch`) and agreeing static extents. Run time: each
  /// of e's extents equals the view's (`shape_error`). e may read the viewed
  /// memory: what it reads is the value before the assignment.
  template <class E>
    requires(named_expression<E> || scalar<E>)
  tensor_view& operator=(E&& e) {
    if constexpr (detail::view_source_ok<T, dims, E>())
      detail::assign_to_view<dims>(strided<T, rank>{data_, extents_, strides_}, std::forward<E>(e));
    else
      detail::report_view_source<T, dims, E>();
    return *this;
  }
  /// Writes the elements of another view of the same type (not a rebinding).
  tensor_view& operator=(const tensor_view& other) { return operator= <const tensor_view&>(other); }

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
