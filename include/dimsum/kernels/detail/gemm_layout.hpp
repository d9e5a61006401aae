#pragma once
/// \file
/// Index arithmetic over dim groups: simplifying a group, and turning a run of
/// flat indices into element offsets with an odometer. Shared by the packing
/// routines and the C stores of the GEMM kernel.

#include <array>
#include <cstddef>

#include "dimsum/kernels/contraction_args.hpp"

namespace dimsum::kernels::detail {

using group_strides = std::array<std::ptrdiff_t, max_group_rank>;

/// Which operands carry a role, as a bit mask.
enum operand_mask : unsigned { operand_a = 1u, operand_b = 2u, operand_c = 4u };

/// The same index space as `g` with as few dims as possible: dims of extent 1
/// are dropped, and a dim is merged into the one before it when that is
/// contiguous for every operand in `operands` (stride[outer] ==
/// stride[inner] * extent[inner]). A row-major matrix's K group, say, becomes
/// one dim of stride 1, which unlocks the unit-stride fast paths. Strides of
/// operands not in `operands` are zeroed. Requires every extent > 0.
inline dim_group canonical_group(const dim_group& g, unsigned operands) noexcept {
  const bool use_a = (operands & operand_a) != 0;
  const bool use_b = (operands & operand_b) != 0;
  const bool use_c = (operands & operand_c) != 0;
  dim_group out;
  for (std::size_t d = 0; d < g.rank; ++d) {
    const std::size_t e = g.extents[d];
    if (e == 1) continue;
    const std::ptrdiff_t sa = use_a ? g.stride_a[d] : 0;
    const std::ptrdiff_t sb = use_b ? g.stride_b[d] : 0;
    const std::ptrdiff_t sc = use_c ? g.stride_c[d] : 0;
    if (out.rank > 0) {
      const std::size_t p = out.rank - 1;
      const auto ie = static_cast<std::ptrdiff_t>(e);
      if (out.stride_a[p] == sa * ie && out.stride_b[p] == sb * ie && out.stride_c[p] == sc * ie) {
        out.extents[p] *= e;
        out.stride_a[p] = sa;
        out.stride_b[p] = sb;
        out.stride_c[p] = sc;
        continue;
      }
    }
    out.extents[out.rank] = e;
    out.stride_a[out.rank] = sa;
    out.stride_b[out.rank] = sb;
    out.stride_c[out.rank] = sc;
    ++out.rank;
  }
  return out;
}

/// True when consecutive flat indices of a canonical group are consecutive
/// elements for the operand with strides `s` (or the group has one index).
inline bool unit_stride(const dim_group& g, const group_strides& s) noexcept {
  return g.rank == 0 || (g.rank == 1 && s[0] == 1);
}

/// Element offset of flat index `flat` of group `g` for strides `s`.
inline std::ptrdiff_t offset_of(const dim_group& g, const group_strides& s,
                                std::size_t flat) noexcept {
  std::ptrdiff_t off = 0;
  for (std::size_t d = g.rank; d-- > 0;) {
    off += static_cast<std::ptrdiff_t>(flat % g.extents[d]) * s[d];
    flat /= g.extents[d];
  }
  return off;
}

/// `out[i]` = element offset of flat index `first + i` for i < count: one
/// division per dim to place the odometer, then additions only.
/// True when the n offsets are consecutive elements (off[i] == off[0] + i):
/// a run of a multi-dim group can be contiguous even when the whole group is
/// not (16 columns inside one head of a (heads, d_head) group).
inline bool consecutive(const std::ptrdiff_t* off, std::size_t n) noexcept {
  for (std::size_t i = 1; i < n; ++i)
    if (off[i] != off[0] + static_cast<std::ptrdiff_t>(i)) return false;
  return true;
}

inline void fill_offsets(const dim_group& g, const group_strides& s, std::size_t first,
                         std::size_t count, std::ptrdiff_t* out) noexcept {
  if (g.rank == 0) {
    for (std::size_t i = 0; i < count; ++i) out[i] = 0;
    return;
  }
  const std::size_t last = g.rank - 1;
  if (g.rank == 1) {
    for (std::size_t i = 0; i < count; ++i)
      out[i] = static_cast<std::ptrdiff_t>(first + i) * s[0];
    return;
  }
  std::array<std::size_t, max_group_rank> idx{};
  std::ptrdiff_t off = 0;
  std::size_t rest = first;
  for (std::size_t d = g.rank; d-- > 0;) {
    idx[d] = rest % g.extents[d];
    rest /= g.extents[d];
    off += static_cast<std::ptrdiff_t>(idx[d]) * s[d];
  }
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = off;
    std::size_t d = last;
    ++idx[d];
    off += s[d];
    while (idx[d] == g.extents[d] && d > 0) {
      off -= static_cast<std::ptrdiff_t>(g.extents[d]) * s[d];
      idx[d] = 0;
      --d;
      ++idx[d];
      off += s[d];
    }
  }
}

}  // namespace dimsum::kernels::detail
