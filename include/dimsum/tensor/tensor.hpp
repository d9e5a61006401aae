#pragma once
/// \file
/// `tensor<T, Dims...>`: an owning, row-major tensor with named dims, stored
/// in an `xt::xtensor`. See examples/attention.cpp.

#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>

#include <xtensor/xtensor.hpp>

#include <dimsum/core/malloc_settings.hpp>
#include <dimsum/tensor/expression.hpp>
#include <dimsum/tensor/named_access.hpp>
#include <dimsum/tensor/tensor_view.hpp>

namespace dimsum {

/// An owning tensor whose dims `Ds...` are part of its type.
///
/// Shape rules: dim names are unique (compile error otherwise); dynamic
/// extents are given by name in any order, `tensor<float, batch, posn,
/// d_model> x(posn{20}, batch{12})`; static extents come from the dims.
/// Assigning an expression requires the same set of dim names, in any order:
/// the data is placed by name.
template <class T, dimension... Ds>
class tensor : public expression_tag {
 public:
  using value_type = T;
  using dims = dim_list<Ds...>;
  static constexpr std::size_t rank = sizeof...(Ds);
  using storage_type = xt::xtensor<T, rank>;

  /// A tensor with the static extents of its dims and 0 for dynamic ones.
  tensor() : tensor(from_extents_tag{}, default_extents()) {}

  /// A zero-filled tensor; each dynamic dim's extent is given by name, in any
  /// order (`posn{20}, batch{12}`); a static dim may be given if it agrees.
  template <detail::dim_or_number... Args>
    requires(sizeof...(Args) > 0)
  explicit tensor(const Args&... extents) : tensor(from_extents_tag{}, checked_extents(extents...)) {}

  /// Evaluates a named expression with the same dims (in any order).
  template <named_expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, tensor>)
  tensor(E&& e) {  // NOLINT: implicit on purpose, `tensor<...> q = expr;`
    if constexpr (source_ok<E>()) {
      auto ext = detail::permute<dims_of_t<E>, dims>(e.extents());
      detail::check_static_extents<dims>(ext, "assignment");
      detail::checked_size<T, dims>(ext);
      detail::keep_freed_memory_for_reuse();
      storage_ = storage_type(to_shape(ext));
      e.eval_to(view_in_order_of<dims_of_t<E>>());
    } else {
      report_source<E>();
    }
  }

  /// Evaluates a named expression (same dims in any order) into a fresh
  /// buffer, then takes it; an expression may read this tensor.
  template <named_expression E>
    requires(!std::is_same_v<std::remove_cvref_t<E>, tensor>)
  tensor& operator=(E&& e) {
    if constexpr (source_ok<E>())
      *this = tensor(std::forward<E>(e));
    else
      report_source<E>();
    return *this;
  }

  tensor(const tensor&) = default;
  tensor(tensor&&) noexcept = default;
  tensor& operator=(const tensor&) = default;
  tensor& operator=(tensor&&) noexcept = default;

  /// Dynamic extents by name, as for the constructor.
  template <detail::dim_or_number... Args>
  static tensor zeros(const Args&... extents) {
    return tensor(extents...);
  }
  template <detail::dim_or_number... Args>
  static tensor ones(const Args&... extents) {
    return full(T(1), extents...);
  }
  template <detail::dim_or_number... Args>
  static tensor full(T value, const Args&... extents) {
    tensor t(from_extents_tag{}, checked_extents(extents...));
    t.fill(value);
    return t;
  }
  /// Samples from N(0, 1) with a seeded std::mt19937_64 (reproducible with
  /// the same standard library).
  template <detail::dim_or_number... Args>
  static tensor random_normal(std::uint64_t seed, const Args&... extents) {
    tensor t(from_extents_tag{}, checked_extents(extents...));
    std::mt19937_64 gen(seed);
    std::normal_distribution<double> dist(0.0, 1.0);
    for (auto& v : t.storage_) v = static_cast<T>(dist(gen));
    return t;
  }
  /// Samples from U[0, 1) with a seeded std::mt19937_64, like torch.rand.
  template <detail::dim_or_number... Args>
  static tensor random_uniform(std::uint64_t seed, const Args&... extents) {
    tensor t(from_extents_tag{}, checked_extents(extents...));
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> dist(0.0, 1.0);
    for (auto& v : t.storage_) v = static_cast<T>(dist(gen));
    return t;
  }
  /// A zero-filled tensor from extents in dims order (checked against the
  /// static extents).
  static tensor from_extents(const std::array<std::size_t, rank>& ext) {
    detail::check_static_extents<dims>(ext, "tensor");
    return tensor(from_extents_tag{}, ext);
  }

  /// Takes an xtensor container as this tensor's storage (no copy); its
  /// shape is checked against the static extents.
  static tensor adopt(storage_type&& s) {
    tensor t;
    std::array<std::size_t, rank> ext{};
    for (std::size_t i = 0; i < rank; ++i) ext[i] = s.shape()[i];
    detail::check_static_extents<dims>(ext, "tensor");
    t.storage_ = std::move(s);
    return t;
  }

  void fill(T value) { std::fill(storage_.begin(), storage_.end(), value); }

  std::array<std::size_t, rank> extents() const {
    std::array<std::size_t, rank> e{};
    for (std::size_t i = 0; i < rank; ++i) e[i] = storage_.shape()[i];
    return e;
  }
  std::array<std::ptrdiff_t, rank> strides() const { return detail::row_major_strides<rank>(extents()); }
  std::size_t size() const { return storage_.size(); }
  T* data() { return storage_.data(); }
  const T* data() const { return storage_.data(); }

  /// The extent of dim D (by name).
  template <dimension D>
  std::size_t extent() const {
    if constexpr (!contains_v<dims, D>)
      return detail::report<extent_of_a_dim_that_the_tensor_does_not_have<diagnostic_name_t<D>, diagnostic_dims_t<dims>>>(),
             std::size_t{0};
    else
      return storage_.shape()[index_of<dims>(D::name.view())];
  }

  /// The element at the indices given by name, in any order:
  /// `x(posn{3}, batch{0}, d_model{7})`. Bounds are checked.
  template <detail::dim_or_number... Is>
  T& operator()(const Is&... idx) {
    if constexpr (!detail::indices_ok<dims, Is...>())
      return (detail::report_indices<dims, Is...>(), *data());
    else
      return data()[detail::offset_from_indices<dims>(extents(), strides(), idx...)];
  }
  template <detail::dim_or_number... Is>
  const T& operator()(const Is&... idx) const {
    return const_cast<tensor&>(*this)(idx...);
  }

  /// The single value of a rank-0 tensor (a full reduction or contraction).
  T item() const
    requires(rank == 0)
  {
    return *data();
  }

  /// The xtensor storage: the escape hatch to everything xtensor offers.
  storage_type& storage() { return storage_; }
  const storage_type& storage() const { return storage_; }

  /// A view of this tensor (for renaming and slicing).
  tensor_view<T, Ds...> view() { return {data(), extents(), strides()}; }
  tensor_view<const T, Ds...> view() const { return {data(), extents(), strides()}; }

  template <class Root>
  auto evaluator() const {
    return detail::leaf_evaluator<T, Root::size>{data(), detail::strides_in_root<Root, dims>(strides())};
  }
  void eval_to(const strided<T, rank>& dst) const {
    auto ev = evaluator<dims>();
    detail::run_elementwise(dst, ev);
  }

 private:
  struct from_extents_tag {};
  tensor(from_extents_tag, const std::array<std::size_t, rank>& ext)
      : storage_((detail::checked_size<T, dims>(ext), to_shape(ext))) {
    std::fill(storage_.begin(), storage_.end(), T{});
  }

  static typename storage_type::shape_type to_shape(const std::array<std::size_t, rank>& ext) {
    typename storage_type::shape_type s{};
    for (std::size_t i = 0; i < rank; ++i) s[i] = ext[i];
    return s;
  }
  static std::array<std::size_t, rank> default_extents() {
    std::array<std::size_t, rank> e{};
    for (std::size_t i = 0; i < rank; ++i) e[i] = dims::static_extents[i] == dynamic ? 0 : dims::static_extents[i];
    return e;
  }

  template <detail::dim_or_number... Args>
  static std::array<std::size_t, rank> checked_extents(const Args&... args) {
    if constexpr (!(dimension<Args> && ...)) {
      detail::report_number_argument<dims, Args...>();
      return {};
    } else if constexpr (!detail::named_args_ok_v<dims, Args...>) {
      detail::report_named_args<dims, Args...>();
      return {};
    } else {
      constexpr std::size_t missing = detail::first_unnamed<dims, true, Args...>();
      if constexpr (missing != detail::npos) {
        detail::report<tensor_constructor_is_missing_the_extent_of<diagnostic_name_t<detail::at_t<dims, missing>>,
                                                                   diagnostic_dims_t<dims>>>();
        return {};
      } else {
        return detail::extents_from_args<dims>(args...);
      }
    }
  }

  // Whether an expression of type E can be assigned to this tensor. A pure
  // condition: the report is made by report_source in the failing branch
  // (clang would count a condition that fails a static_assert as a second
  // error, then go on into the branch it could not decide).
  template <class E>
  static constexpr bool source_ok() {
    if constexpr (is_invalid_v<E> || !same_name_set_v<dims, dims_of_t<E>>)
      return false;
    else
      return std::is_same_v<value_type_of_t<E>, T> && detail::static_extents_agree_v<dims, dims_of_t<E>>;
  }
  template <class E>
  static constexpr void report_source() {
    if constexpr (is_invalid_v<E>) {
      // the expression itself already reported its mistake
    } else if constexpr (!same_name_set_v<dims, dims_of_t<E>>) {
      detail::report<assignment_between_different_dims<diagnostic_dims_t<dims>, diagnostic_dims_t<dims_of_t<E>>>>();
    } else if constexpr (!std::is_same_v<value_type_of_t<E>, T>) {
      detail::report<value_type_mismatch<T, value_type_of_t<E>>>();
    } else {
      detail::report_static_disagreement<dims, dims_of_t<E>>();
    }
  }

  // This tensor's memory described in the dims order of Src.
  template <class Src>
  strided<T, rank> view_in_order_of() {
    return {data(), detail::permute<dims, Src>(extents()), detail::permute<dims, Src>(strides())};
  }

  // A member type is instantiated with the class: a duplicate dim fails here.
  using dims_check_ = std::integral_constant<std::size_t, sizeof(detail::unique_dims_checked<dims>)>;
  storage_type storage_;
};

/// Materialises any named expression into a tensor with the same dims.
template <named_expression E>
auto eval(E&& e) {
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else {
    return [&]<class... Ds>(dim_list<Ds...>*) {
      return tensor<value_type_of_t<E>, Ds...>(std::forward<E>(e));
    }(static_cast<dims_of_t<E>*>(nullptr));
  }
}

namespace detail {
template <class T, class L>
struct tensor_for;
template <class T, class... Ds>
struct tensor_for<T, dim_list<Ds...>> {
  using type = tensor<T, Ds...>;
};
template <class T, class... Ds>
struct view_for;
template <class T, class... Ds>
struct view_for<T, dim_list<Ds...>> {
  using type = tensor_view<T, Ds...>;
};
}  // namespace detail

/// The tensor type with value type T and the dims of list L.
template <class T, class L>
using tensor_for_t = typename detail::tensor_for<T, L>::type;
/// The view type with value type T (possibly const) and the dims of list L.
template <class T, class L>
using view_for_t = typename detail::view_for<T, L>::type;

namespace detail {
/// A leaf's data as a (possibly const) view; anything else evaluated into a
/// tensor. Kernels read what this returns through data() and strides().
template <class E>
decltype(auto) materialize(const E& e) {
  using X = std::remove_cvref_t<E>;
  if constexpr (requires { e.data(); e.strides(); })
    return view_for_t<const value_type_of_t<X>, dims_of_t<X>>(e.data(), e.extents(), e.strides());
  else
    return tensor_for_t<value_type_of_t<X>, dims_of_t<X>>(e);
}

/// A tensor of the given extents whose elements are not initialised (for
/// a buffer that is written in full before it is read).
template <class Tensor>
Tensor uninitialized_tensor(const std::array<std::size_t, Tensor::rank>& ext) {
  typename Tensor::storage_type::shape_type shape{};
  for (std::size_t i = 0; i < Tensor::rank; ++i) shape[i] = ext[i];
  return Tensor::adopt(typename Tensor::storage_type(shape));
}

/// The evaluator of a non-element-wise expression: materialise, then read.
template <class Root, class E>
auto materializing_evaluator(const E& e) {
  return owning_evaluator<tensor_for_t<value_type_of_t<E>, dims_of_t<E>>, Root>(
      tensor_for_t<value_type_of_t<E>, dims_of_t<E>>(e));
}
}  // namespace detail

}  // namespace dimsum
