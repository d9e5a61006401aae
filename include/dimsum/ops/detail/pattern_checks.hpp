#pragma once
/// \file
/// Compile-time errors of the einops-style patterns (rearrange, repeat,
/// reduce, size-1 axes, lists as operands) beyond the einsum string's own
/// (core/diagnostics.hpp). Each checker is named after the mistake and
/// carries the dims involved; docs/errors.md lists them with their fixes.

#include <dimsum/core/diagnostics.hpp>

namespace dimsum {

/// Checker: a `1`, `()` or `h()` of an input term stands for a dim whose
/// static extent is not 1.
template <class Dim, class Extent, class Operand>
struct pattern_size_1_axis_stands_for_a_dim_of_another_extent {
  static_assert(detail::always_false<Dim, Extent, Operand>,
                "dimsum: a '1' or '()' in a pattern stands for a dim of extent 1, but the operand's dim at its "
                "position has another static extent; name the dim there instead");
};

/// Checker: repeat adds a dim the tensor already has (or names one twice).
template <class Dim, class Dims>
struct repeat_adds_a_dim_the_tensor_already_has {
  static_assert(detail::always_false<Dim, Dims>,
                "dimsum: repeat adds a dim that the tensor already has (a dim appears once per tensor)");
};

/// Checker: a repeat pattern leaves out a dim of its operand.
template <class Label>
struct repeat_drops_a_dim {
  static_assert(detail::always_false<Label>,
                "dimsum: repeat must keep every dim of its operand; use reduce<\"...\", \"sum\"> to reduce one");
};

/// Checker: a repeat pattern's output has a new dim whose extent is not given.
template <class Label>
struct repeat_new_dim_has_no_extent {
  static_assert(detail::always_false<Label>,
                "dimsum: repeat adds a dim whose extent is not given; pass it after the tensor, e.g. "
                "repeat<\"h w -> b h w\">(x, b{4})");
};

/// Checker: a dim passed after the operands has a static extent other than
/// the static extent of the operand's dim of that name.
template <class Dim, class GivenExtent, class OperandExtent, class Operand>
struct pattern_length_differs_from_the_operands_dim {
  static_assert(detail::always_false<Dim, GivenExtent, OperandExtent, Operand>,
                "dimsum: a dim passed after the operands has another static extent than the operand's dim of that "
                "name; pass the operand's extent, or leave the dim out (the operand gives it)");
};

/// Checker: the static extents of a group's labels cannot split the static
/// extent of the dim the group stands for (their product, or the product
/// of all but one inferred label, does not divide it).
template <class Dim, class Extent, class Labels, class KnownProduct, class Operand>
struct pattern_group_does_not_divide_its_dim {
  static_assert(detail::always_false<Dim, Extent, Labels, KnownProduct, Operand>,
                "dimsum: a group's labels cannot split the static extent of the dim it stands for (the product of "
                "their static extents does not divide it), as 4 query heads over 3 kv_heads");
};

/// Checker: a list of tensors as a pattern's operand needs its first term
/// to start with a new label, the name of the list's dim.
template <class ElementDims>
struct pattern_list_needs_a_new_leading_label {
  static_assert(detail::always_false<ElementDims>,
                "dimsum: a list of tensors as the operand needs the first term to start with a new label that names "
                "the list's dim, e.g. rearrange<\"n h w -> h (n w)\">(list) for tensors of dims (h, w)");
};

}  // namespace dimsum
