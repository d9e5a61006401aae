#pragma once
/// \file
/// Rotary position embeddings by name: `rope<posn, d_head>(q, rope_pairs::half_split)`
/// rotates each pair of features of `d_head` by an angle proportional to the
/// position along `posn` (Su et al., RoFormer), in either of the two pairings
/// research code uses.

#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <dimsum/core/bf16.hpp>
#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/errors.hpp>
#include <dimsum/kernels/detail/odometer.hpp>
#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// Which features of the head dim a rotary embedding rotates together.
/// `interleaved`: features (2i, 2i+1), as RoFormer, GPT-J and Meta's LLaMA
/// reference code (the complex-number form). `half_split`: features
/// (i, i + d/2), as GPT-NeoX and Hugging Face's LLaMA (`rotate_half`).
/// Pair i turns by the angle `position * base^(-2i/d)` in both.
enum class rope_pairs { interleaved, half_split };

/// Checker: rope names a dim the tensor does not have.
template <class Dim, class Dims>
struct rope_dim_is_not_a_dim_of_the_tensor {
  static_assert(detail::always_false<Dim, Dims>, "dimsum: rope over a dim that the tensor does not have");
};
/// Checker: rope's position dim and feature dim are the same dim.
template <class Dim>
struct rope_position_and_feature_dim_are_the_same {
  static_assert(detail::always_false<Dim>, "dimsum: rope needs a position dim and a different feature dim");
};
/// Checker: rope's feature dim has an odd static extent (features rotate in pairs).
template <class Dim, class Extent>
struct rope_feature_dim_has_an_odd_extent {
  static_assert(detail::always_false<Dim, Extent>,
                "dimsum: rope rotates features in pairs, so its feature dim needs an even extent");
};

namespace detail {
/// Rotates, in place, the pairs of axis `feat` of the row-major array
/// `data` (extents `ext`), at position `offset + index along axis pos`,
/// by +angle (or -angle when `inverse`: the transpose, which the gradient
/// applies). Angles are computed in double; a bf16 array is rotated in
/// float32 (its cosines, sines and products), each result rounded once.
template <class T, std::size_t R>
void rope_rotate(T* data, const std::array<std::size_t, R>& ext, std::size_t pos, std::size_t feat, rope_pairs pairs,
                 double base, std::size_t offset, bool inverse) {
  const std::size_t d = ext[feat], half = d / 2, npos = ext[pos];
  for (std::size_t e : ext)
    if (e == 0) return;
  using A = accumulator_t<T>;  // float for bf16
  std::vector<A> cos_t(npos * half), sin_t(npos * half);
  for (std::size_t p = 0; p < npos; ++p)
    for (std::size_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p + offset) *
                           std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      cos_t[p * half + i] = static_cast<A>(std::cos(angle));
      sin_t[p * half + i] = static_cast<A>(inverse ? -std::sin(angle) : std::sin(angle));
    }
  std::array<std::ptrdiff_t, R> stride{};
  std::ptrdiff_t s = 1;
  for (std::size_t a = R; a-- > 0;) {
    stride[a] = s;
    s *= static_cast<std::ptrdiff_t>(ext[a]);
  }
  const std::ptrdiff_t fs = stride[feat];
  const std::ptrdiff_t first_step = pairs == rope_pairs::interleaved ? 2 * fs : fs;
  const std::ptrdiff_t partner = pairs == rope_pairs::interleaved ? fs : static_cast<std::ptrdiff_t>(half) * fs;
  // Walk every index with the feature axis held at 0.
  std::array<std::size_t, R> idx{}, walk = ext;
  walk[feat] = 1;
  do {
    std::ptrdiff_t off = 0;
    for (std::size_t a = 0; a < R; ++a) off += static_cast<std::ptrdiff_t>(idx[a]) * stride[a];
    const A* c = cos_t.data() + idx[pos] * half;
    const A* sn = sin_t.data() + idx[pos] * half;
    T* row = data + off;
    for (std::size_t i = 0; i < half; ++i) {
      T* x0 = row + static_cast<std::ptrdiff_t>(i) * first_step;
      T* x1 = x0 + partner;
      const A a = static_cast<A>(*x0), b = static_cast<A>(*x1);
      *x0 = static_cast<T>(a * c[i] - b * sn[i]);
      *x1 = static_cast<T>(a * sn[i] + b * c[i]);
    }
  } while (kernels::detail::next_index(idx.data(), walk.data(), 0, R));
}

/// The compile-time checks of rope<Pos, Feat> on dims L: on a mistake,
/// one report and an invalid_expression; else whatever `ok()` returns.
template <dimension Pos, dimension Feat, class L, class Ok>
auto rope_checked(Ok&& ok) {
  if constexpr (!contains_v<L, Pos>) {
    report<rope_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<Pos>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (!contains_v<L, Feat>) {
    report<rope_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<Feat>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (Pos::name.view() == Feat::name.view()) {
    report<rope_position_and_feature_dim_are_the_same<diagnostic_name_t<Pos>>>();
    return invalid_expression{};
  } else if constexpr (constexpr std::size_t n = L::static_extents[index_of<L>(Feat::name.view())];
                       n != dynamic && n % 2 != 0) {
    report<rope_feature_dim_has_an_odd_extent<diagnostic_name_t<Feat>, extent_c<n>>>();
    return invalid_expression{};
  } else {
    return ok();
  }
}

/// x (materialised, same dims) rotated as rope<Pos, Feat> says.
template <dimension Pos, dimension Feat, class T, class L>
void rope_apply(tensor_for_t<T, L>& x, rope_pairs pairs, double base, std::size_t offset, bool inverse) {
  constexpr std::size_t pos = index_of<L>(Pos::name.view()), feat = index_of<L>(Feat::name.view());
  const auto ext = x.extents();
  if (ext[feat] % 2 != 0)
    throw shape_error("rope: feature dim '" + std::string(Feat::name.view()) + "' has odd extent " +
                      std::to_string(ext[feat]) + "; rope rotates features in pairs");
  if (!(base > 0.0)) throw error("rope: base must be positive, got " + std::to_string(base));
  rope_rotate(x.data(), ext, pos, feat, pairs, base, offset, inverse);
}
}  // namespace detail

/// Rotary position embedding of x over position dim Pos and feature dim
/// Feat: pair i of Feat (chosen by `pairs`) at position p turns by the
/// angle `(p + offset) * base^(-2i/d)`, d = Feat's extent. The result has
/// x's dims and extents (a new tensor; x is read once). `offset` is the
/// position of Pos's index 0, for new tokens appended to a key/value cache.
/// Compile time: Pos and Feat are two different dims of x, Feat's static
/// extent (if static) even; run time: Feat's extent even (`shape_error`),
/// base > 0 (`dimsum::error`).
/// Example: `auto q_rot = rope<posn, d_head>(q, rope_pairs::half_split);`
/// for q with dims (batch, posn, nheads, d_head).
template <dimension Pos, dimension Feat, named_expression E>
auto rope(E&& x, rope_pairs pairs, double base = 10000.0, std::size_t offset = 0) {
  using L = dims_of_t<E>;
  using T = std::remove_cv_t<value_type_of_t<E>>;
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else {
    return detail::rope_checked<Pos, Feat, L>([&] {
      tensor_for_t<T, L> out = std::forward<E>(x);
      detail::rope_apply<Pos, Feat, T, L>(out, pairs, base, offset, false);
      return out;
    });
  }
}

}  // namespace dimsum
