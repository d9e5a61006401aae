#pragma once
/// \file
/// Compile-time shape errors. Each mistake has a checker template named after
/// it whose template arguments carry the dims involved, so the first
/// diagnostic block reads like a sentence on g++ and clang alike:
///
///     In instantiation of 'struct dimsum::einsum_label_is_not_a_dim_of_its_operand<
///         dimsum::chars<'p','o','s','x'>, dimsum::operand<1>, dimsum::dims<batch, posn, d_model>>'
///     error: static assertion failed: dimsum: einsum label is not a dim of its operand
///
/// Every message starts with "dimsum:". docs/errors.md lists them all with
/// their fixes; tests/compile_fail/ has one case per error.

#include <cstddef>

#include <dimsum/core/dim_list.hpp>

namespace dimsum {

/// Diagnostic wrappers for numbers: `operand<1>` is the second operand.
template <std::size_t I> struct operand {};
template <std::size_t N> struct extent_c {};
template <std::size_t N> struct count_c {};
template <std::size_t N> struct position_c {};
template <char C> struct character {};
template <class... Labels> struct labels {};

namespace detail {
template <class...>
inline constexpr bool always_false = false;
// Instantiating a checker (never complete for a valid program) raises its
// static_assert; callers then return an `invalid_expression` so that one
// mistake gives one error.
template <class Checker>
constexpr void report() {
  [[maybe_unused]] constexpr auto n = sizeof(Checker);
}
}  // namespace detail

#define DIMSUM_DEFINE_CHECKER_(name, params, args, message) \
  template <params>                                        \
  struct name {                                            \
    static_assert(::dimsum::detail::always_false<args>, "dimsum: " message); \
  }
#define DIMSUM_P_(...) __VA_ARGS__

// --- einsum strings: syntax (the position is the 0-based character offset) ---
DIMSUM_DEFINE_CHECKER_(einsum_string_has_no_arrow, class S, S,
                       "einsum string has no '->'; write the output dims after '->', e.g. \"a b, b c -> a c\"");
DIMSUM_DEFINE_CHECKER_(einsum_string_has_more_than_one_arrow, DIMSUM_P_(class S, class Pos), DIMSUM_P_(S, Pos),
                       "einsum string has more than one '->'");
DIMSUM_DEFINE_CHECKER_(einsum_string_has_an_empty_input_term, DIMSUM_P_(class S, class Term), DIMSUM_P_(S, Term),
                       "einsum string has an empty input term (two commas, or a comma next to '->')");
DIMSUM_DEFINE_CHECKER_(einsum_string_has_an_invalid_character, DIMSUM_P_(class S, class Pos, class Char),
                       DIMSUM_P_(S, Pos, Char),
                       "einsum string has a character that is not part of a label, ',', '->', '(' or ')'");
DIMSUM_DEFINE_CHECKER_(einsum_string_has_unbalanced_parentheses, DIMSUM_P_(class S, class Pos), DIMSUM_P_(S, Pos),
                       "einsum string has an unbalanced or nested parenthesis");
DIMSUM_DEFINE_CHECKER_(einsum_string_has_an_empty_group, DIMSUM_P_(class S, class Pos), DIMSUM_P_(S, Pos),
                       "einsum string has an empty group '()'");
DIMSUM_DEFINE_CHECKER_(einsum_string_has_too_many_labels, class S, S,
                       "einsum string has more terms or labels than dimsum supports (16 terms of 16 labels)");
DIMSUM_DEFINE_CHECKER_(einsum_term_count_does_not_match_operand_count, DIMSUM_P_(class Terms, class Operands),
                       DIMSUM_P_(Terms, Operands),
                       "einsum string has a different number of input terms than einsum has operands");
DIMSUM_DEFINE_CHECKER_(einsum_term_names_a_label_twice, DIMSUM_P_(class Label, class Term), DIMSUM_P_(Label, Term),
                       "einsum term names the same label twice; rename one of the dims (e.g. q_posn, k_posn)");

// --- einsum: terms against operands ---
DIMSUM_DEFINE_CHECKER_(einsum_label_is_not_a_dim_of_its_operand, DIMSUM_P_(class Label, class Operand, class Dims),
                       DIMSUM_P_(Label, Operand, Dims),
                       "einsum label is not a dim of its operand; each term must list its operand's dims in order");
DIMSUM_DEFINE_CHECKER_(einsum_term_lists_dims_in_a_different_order_than_its_operand,
                       DIMSUM_P_(class Operand, class Term, class Dims), DIMSUM_P_(Operand, Term, Dims),
                       "einsum term lists its operand's dims in a different order; write them in the operand's order");
DIMSUM_DEFINE_CHECKER_(einsum_term_does_not_list_every_dim_of_its_operand,
                       DIMSUM_P_(class Missing, class Operand, class Dims), DIMSUM_P_(Missing, Operand, Dims),
                       "einsum term does not list every dim of its operand; each term must list all of them in order");
DIMSUM_DEFINE_CHECKER_(einsum_term_lists_more_dims_than_its_operand_has,
                       DIMSUM_P_(class Operand, class Term, class Dims), DIMSUM_P_(Operand, Term, Dims),
                       "einsum term lists more dims than its operand has");
DIMSUM_DEFINE_CHECKER_(einsum_group_has_more_than_one_unknown_extent, DIMSUM_P_(class Labels, class Operand),
                       DIMSUM_P_(Labels, Operand),
                       "einsum group has more than one label whose extent no operand gives; "
                       "pass the extents as dims after the operands, e.g. einsum<\"...\">(x, nheads{8})");
DIMSUM_DEFINE_CHECKER_(einsum_output_group_needs_a_name, DIMSUM_P_(class Labels), DIMSUM_P_(Labels),
                       "a group in the einsum output needs the name of the merged dim, e.g. hd(nheads d_head)");
DIMSUM_DEFINE_CHECKER_(einsum_extra_dim_is_not_a_group_label, DIMSUM_P_(class Dim), DIMSUM_P_(Dim),
                       "a dim passed after the operands names no label of a group");
DIMSUM_DEFINE_CHECKER_(einsum_dims_must_follow_the_operands, DIMSUM_P_(class T), DIMSUM_P_(T),
                       "einsum takes its operands first, then any dims that give group extents");
DIMSUM_DEFINE_CHECKER_(rearrange_drops_a_dim, DIMSUM_P_(class Label), DIMSUM_P_(Label),
                       "rearrange must keep every dim; use einsum or sum to reduce one");
DIMSUM_DEFINE_CHECKER_(einsum_output_label_is_not_in_any_operand, DIMSUM_P_(class Label), DIMSUM_P_(Label),
                       "einsum output names a dim that no operand has");
DIMSUM_DEFINE_CHECKER_(einsum_output_names_a_dim_twice, DIMSUM_P_(class Label), DIMSUM_P_(Label),
                       "einsum output names the same dim twice");
DIMSUM_DEFINE_CHECKER_(einsum_needs_at_least_one_operand, class T, T, "einsum needs at least one operand");
DIMSUM_DEFINE_CHECKER_(einsum_operand_is_not_a_named_tensor, DIMSUM_P_(class Operand, class T), DIMSUM_P_(Operand, T),
                       "einsum operand is not a dimsum tensor or expression; name it with dimsum::named<Dims...>(x)");

// --- extents ---
DIMSUM_DEFINE_CHECKER_(static_extent_mismatch, DIMSUM_P_(class Dim, class Left, class Right),
                       DIMSUM_P_(Dim, Left, Right),
                       "the same dim has two different static extents");

// --- tensors ---
DIMSUM_DEFINE_CHECKER_(tensor_has_a_duplicate_dim, DIMSUM_P_(class Dim, class Dims), DIMSUM_P_(Dim, Dims),
                       "a tensor cannot have the same dim twice; rename one (e.g. q_posn and k_posn)");
DIMSUM_DEFINE_CHECKER_(tensor_constructor_is_missing_the_extent_of, DIMSUM_P_(class Dim, class Dims),
                       DIMSUM_P_(Dim, Dims),
                       "constructing this tensor needs the extent of each dynamic dim, e.g. tensor<float, posn>(posn{20})");
DIMSUM_DEFINE_CHECKER_(argument_is_not_a_dim_of_the_tensor, DIMSUM_P_(class Arg, class Dims), DIMSUM_P_(Arg, Dims),
                       "argument names a dim that the tensor does not have");
DIMSUM_DEFINE_CHECKER_(argument_names_a_dim_twice, DIMSUM_P_(class Arg, class Dims), DIMSUM_P_(Arg, Dims),
                       "argument list names the same dim twice");
DIMSUM_DEFINE_CHECKER_(element_access_is_missing_an_index_for, DIMSUM_P_(class Dim, class Dims), DIMSUM_P_(Dim, Dims),
                       "element access needs one index per dim, given by name, e.g. x(posn{3}, batch{0})");
DIMSUM_DEFINE_CHECKER_(assignment_between_different_dims, DIMSUM_P_(class Target, class Source),
                       DIMSUM_P_(Target, Source),
                       "assigning an expression to a tensor needs the same dims (in any order)");
DIMSUM_DEFINE_CHECKER_(named_rank_does_not_match_dims, DIMSUM_P_(class Rank, class Dims), DIMSUM_P_(Rank, Dims),
                       "naming an xtensor expression needs exactly one dim per axis");
DIMSUM_DEFINE_CHECKER_(value_type_mismatch, DIMSUM_P_(class Target, class Source), DIMSUM_P_(Target, Source),
                       "assigning needs the same value type; convert explicitly with dimsum::cast<T>(x)");

DIMSUM_DEFINE_CHECKER_(tensor_dims_are_not_the_required_dims, DIMSUM_P_(class Required, class Actual),
                       DIMSUM_P_(Required, Actual),
                       "the tensor's dims are not the dims this function requires (names and order)");

// --- element-wise ---
DIMSUM_DEFINE_CHECKER_(elementwise_operands_share_no_dim, DIMSUM_P_(class Left, class Right), DIMSUM_P_(Left, Right),
                       "element-wise operation between tensors that share no dim; "
                       "use dimsum::outer(a, b) if an outer product is meant");

// --- reductions, softmax, masks, rename ---
DIMSUM_DEFINE_CHECKER_(reduction_dim_is_not_a_dim_of_the_tensor, DIMSUM_P_(class Dim, class Dims),
                       DIMSUM_P_(Dim, Dims), "reduction over a dim that the tensor does not have");
DIMSUM_DEFINE_CHECKER_(softmax_dim_is_not_a_dim_of_the_tensor, DIMSUM_P_(class Dim, class Dims), DIMSUM_P_(Dim, Dims),
                       "softmax over a dim that the tensor does not have");
DIMSUM_DEFINE_CHECKER_(causal_mask_dim_is_not_a_dim_of_the_tensor, DIMSUM_P_(class Dim, class Dims),
                       DIMSUM_P_(Dim, Dims), "causal_mask over a dim that the tensor does not have");
DIMSUM_DEFINE_CHECKER_(causal_mask_query_and_key_are_the_same_dim, class Dim, Dim,
                       "causal_mask needs two different dims: the query position and the key position");
DIMSUM_DEFINE_CHECKER_(masked_fill_mask_has_a_dim_the_tensor_lacks, DIMSUM_P_(class Dim, class Mask, class Dims),
                       DIMSUM_P_(Dim, Mask, Dims),
                       "masked_fill mask has a dim that the tensor lacks; a mask broadcasts into the tensor, never grows it");
DIMSUM_DEFINE_CHECKER_(masked_fill_mask_is_not_boolean, class T, T, "masked_fill needs a mask of bool values");
DIMSUM_DEFINE_CHECKER_(rename_source_is_not_a_dim_of_the_tensor, DIMSUM_P_(class From, class Dims),
                       DIMSUM_P_(From, Dims), "rename of a dim that the tensor does not have");
DIMSUM_DEFINE_CHECKER_(rename_target_is_already_a_dim_of_the_tensor, DIMSUM_P_(class To, class Dims),
                       DIMSUM_P_(To, Dims), "rename to a name that the tensor already has");

// --- nn ---
DIMSUM_DEFINE_CHECKER_(attention_query_and_key_positions_share_a_name, class Dim, Dim,
                       "attention needs different dims for query and key positions; "
                       "rename one, e.g. rename<posn, k_posn>(x)");

#undef DIMSUM_P_
#undef DIMSUM_DEFINE_CHECKER_

}  // namespace dimsum
