#pragma once
/// \file
/// Compile-time shape errors. Each mistake has a checker template named after
/// it whose template arguments carry the dims involved, so the first
/// diagnostic block reads like a sentence on g++ and clang alike:
///
///     In instantiation of 'struct dimsum::einsum_label_is_not_a_dim_of_its_operand<
///         dimsum::label<fixed_string<5>{"posx"}>, dimsum::operand<0>, dimsum::dims<batch, posn, d_model>>'
///     error: static assertion failed: dimsum: einsum label is not a dim of its operand
///
/// Every message starts with "dimsum:". docs/errors.md lists them all with
/// their fixes; tests/compile_fail/ has one case per error.

#include <cstddef>
#include <dimsum/core/dim_list.hpp>
#include <type_traits>
#include <utility>

namespace dimsum {

/// Diagnostic wrappers for numbers: `operand<1>` is the second operand.
template <std::size_t I>
struct operand {};
template <std::size_t N>
struct extent_c {};
template <std::size_t N>
struct count_c {};
template <std::size_t N>
struct position_c {};
template <char C>
struct character {};
template <class... Labels>
struct labels {};

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

// --- einsum strings: syntax (the position is the 0-based character offset) ---
template <class Pos>
struct einsum_string_has_no_arrow {
  static_assert(detail::always_false<Pos>,
                "dimsum: einsum string has no '->'; write the output dims after '->', e.g. \"a b, b c -> a c\"");
};
template <class Pos>
struct einsum_string_has_more_than_one_arrow {
  static_assert(detail::always_false<Pos>, "dimsum: einsum string has more than one '->'");
};
template <class Pos, class Term>
struct einsum_string_has_an_empty_input_term {
  static_assert(detail::always_false<Pos, Term>,
                "dimsum: einsum string has an empty input term (two commas, or a comma next to '->')");
};
template <class Pos, class Term, class Char>
struct einsum_string_has_an_invalid_character {
  static_assert(detail::always_false<Pos, Term, Char>,
                "dimsum: einsum string has a character that is not part of a label, ',', '->', '(' or ')'");
};
template <class Pos, class Term>
struct einsum_string_has_unbalanced_parentheses {
  static_assert(detail::always_false<Pos, Term>, "dimsum: einsum string has an unbalanced or nested parenthesis");
};
template <class Pos, class Term>
struct einsum_string_has_a_number_other_than_1 {
  static_assert(detail::always_false<Pos, Term>,
                "dimsum: einsum string has a number other than 1 (1 is a size-1 axis); name the axis and give its "
                "extent as a dim after the operands, e.g. repeat<\"h w -> h w c\">(x, c{3})");
};
template <class Pos>
struct einsum_string_has_too_many_labels {
  static_assert(detail::always_false<Pos>,
                "dimsum: einsum string has more terms or labels than dimsum supports (16 terms of 16 labels)");
};
template <class Terms, class Operands>
struct einsum_term_count_does_not_match_operand_count {
  static_assert(detail::always_false<Terms, Operands>,
                "dimsum: einsum string has a different number of input terms than einsum has operands");
};
template <class Label, class Term>
struct einsum_term_names_a_label_twice {
  static_assert(detail::always_false<Label, Term>,
                "dimsum: einsum term names the same label twice; rename one of the dims (e.g. q_posn, k_posn)");
};

// --- einsum: terms against operands ---
template <class Label, class Operand, class Dims>
struct einsum_label_is_not_a_dim_of_its_operand {
  static_assert(detail::always_false<Label, Operand, Dims>,
                "dimsum: einsum label is not a dim of its operand; each term must list its operand's dims in order");
};
/// What a diagnostic suggests writing: `fix::rename<posn, label<"q_posn">>(operand<0>)`
/// reads as "rename<posn, q_posn>(operand 0)".
namespace fix {
template <class From, class To>
struct rename {};
}  // namespace fix
template <class Label, class Operand, class Dims, class Fix>
struct einsum_label_is_not_a_dim_of_its_operand_did_you_mean_rename {
  static_assert(detail::always_false<Label, Operand, Dims, Fix>,
                "dimsum: einsum label is not a dim of its operand, which has a dim the term leaves out; if the label "
                "names that dim under a new name, rename it first as the last argument shows (e.g. "
                "dimsum::rename<posn, q_posn>(q)), otherwise fix the label's spelling");
};
template <class Operand, class Term, class Dims>
struct einsum_term_lists_dims_in_a_different_order_than_its_operand {
  static_assert(detail::always_false<Operand, Term, Dims>,
                "dimsum: einsum term lists its operand's dims in a different order; write them in the operand's order");
};
template <class Missing, class Operand, class Dims>
struct einsum_term_does_not_list_every_dim_of_its_operand {
  static_assert(detail::always_false<Missing, Operand, Dims>,
                "dimsum: einsum term does not list every dim of its operand; each term must list all of them in order");
};
template <class Operand, class Term, class Dims>
struct einsum_term_lists_more_dims_than_its_operand_has {
  static_assert(detail::always_false<Operand, Term, Dims>, "dimsum: einsum term lists more dims than its operand has");
};
template <class Labels, class Operand>
struct einsum_group_has_more_than_one_unknown_extent {
  static_assert(detail::always_false<Labels, Operand>,
                "dimsum: einsum group has more than one label whose extent no operand gives; pass the extents as dims "
                "after the operands, e.g. einsum<\"...\">(x, nheads{8})");
};
template <class Labels>
struct einsum_output_group_needs_a_name {
  static_assert(detail::always_false<Labels>,
                "dimsum: a group in the einsum output needs the name of the merged dim, e.g. hd(nheads d_head)");
};
template <class Dim>
struct einsum_extra_dim_is_not_a_group_label {
  static_assert(detail::always_false<Dim>, "dimsum: a dim passed after the operands names no label of a group");
};
template <class T>
struct einsum_dims_must_follow_the_operands {
  static_assert(detail::always_false<T>,
                "dimsum: einsum takes its operands first, then any dims that give group extents");
};
template <class Label>
struct rearrange_drops_a_dim {
  static_assert(detail::always_false<Label>,
                "dimsum: rearrange must keep every dim; to reduce one, use reduce<\"...\", \"sum\"> (or another "
                "operation), einsum, or sum<D>");
};
template <class Label>
struct einsum_output_label_is_not_in_any_operand {
  static_assert(detail::always_false<Label>, "dimsum: einsum output names a dim that no operand has");
};
template <class Label>
struct einsum_output_names_a_dim_twice {
  static_assert(detail::always_false<Label>, "dimsum: einsum output names the same dim twice");
};
template <class First, class Other>
struct einsum_operands_have_different_value_types {
  static_assert(detail::always_false<First, Other>,
                "dimsum: einsum operands must share a value type; state the result type "
                "(einsum<float>(...), einsum<\"...\", float>(...)) or convert one with dimsum::cast<T>(x)");
};
template <class First, class Other>
struct elementwise_operands_have_different_value_types {
  static_assert(detail::always_false<First, Other>,
                "dimsum: an element-wise operation mixes bf16 with another value type; state the type it "
                "computes in by converting one side: dimsum::cast<float>(x) (or cast<dimsum::bf16>(y))");
};
template <class T>
struct einsum_needs_at_least_one_operand {
  static_assert(detail::always_false<T>, "dimsum: einsum needs at least one operand");
};
template <class Operand, class T>
struct einsum_operand_is_a_parameter {
  static_assert(detail::always_false<Operand, T>,
                "dimsum: einsum operand is a parameter, not a tensor; read its value with p.value, or watch it on a "
                "tape (tape.watch(p)) to differentiate through it");
};
namespace detail {
/// A dimsum::parameter (grad/parameter.hpp), recognised by its members so
/// that this header needs no include from a layer above.
template <class T>
concept parameter_like = requires(T& p) {
  typename T::tensor_type;
  p.value;
  p.grad;
  p.requires_grad;
};
}  // namespace detail
template <class Operand, class T>
struct einsum_operand_is_not_a_named_tensor {
  static_assert(detail::always_false<Operand, T>,
                "dimsum: einsum operand is not a dimsum tensor or expression; name it with dimsum::named<Dims...>(x)");
};
template <class Operand, class T>
  requires detail::parameter_like<std::remove_cvref_t<T>>
struct einsum_operand_is_not_a_named_tensor<Operand, T> : einsum_operand_is_a_parameter<Operand, T> {};

// --- extents ---
template <class Dim, class Left, class Right>
struct static_extent_mismatch {
  static_assert(detail::always_false<Dim, Left, Right>, "dimsum: the same dim has two different static extents");
};

// --- tensors ---
template <class Dim, class Dims>
struct tensor_has_a_duplicate_dim {
  static_assert(detail::always_false<Dim, Dims>,
                "dimsum: a tensor cannot have the same dim twice; rename one (e.g. q_posn and k_posn)");
};
template <class Dim, class Dims>
struct tensor_constructor_is_missing_the_extent_of {
  static_assert(
      detail::always_false<Dim, Dims>,
      "dimsum: constructing this tensor needs the extent of each dynamic dim, e.g. tensor<float, posn>(posn{20})");
};
template <class Arg, class Dims>
struct argument_is_not_a_dim_of_the_tensor {
  static_assert(detail::always_false<Arg, Dims>, "dimsum: argument names a dim that the tensor does not have");
};
template <class Dim, class Dims>
struct extent_of_a_dim_that_the_tensor_does_not_have {
  static_assert(detail::always_false<Dim, Dims>, "dimsum: extent<D> of a dim that the tensor does not have");
};
template <class Arg, class Position, class Dims>
struct extents_and_indices_are_given_by_name {
  static_assert(detail::always_false<Arg, Position, Dims>,
                "dimsum: extents and indices are given by name, not by position, e.g. tensor<float, batch, posn> "
                "x(batch{2}, posn{3}) and x(batch{0}, posn{1}); a plain number names no dim");
};
template <class Arg, class Dims>
struct argument_names_a_dim_twice {
  static_assert(detail::always_false<Arg, Dims>, "dimsum: argument list names the same dim twice");
};
template <class Dim, class Dims>
struct element_access_is_missing_an_index_for {
  static_assert(detail::always_false<Dim, Dims>,
                "dimsum: element access needs one index per dim, given by name, e.g. x(posn{3}, batch{0})");
};
template <class Target, class Source>
struct assignment_between_different_dims {
  static_assert(detail::always_false<Target, Source>,
                "dimsum: assigning an expression to a tensor needs the same dims (in any order)");
};
template <class Asked, class Dims>
struct reorder_needs_the_same_dims {
  static_assert(detail::always_false<Asked, Dims>,
                "dimsum: reorder needs the same dims in another order; the first argument lists the order asked for, "
                "the second the expression's dims");
};
template <class Rank, class Dims>
struct named_rank_does_not_match_dims {
  static_assert(detail::always_false<Rank, Dims>,
                "dimsum: naming an xtensor expression needs exactly one dim per axis");
};
template <class Target, class Source>
struct value_type_mismatch {
  static_assert(detail::always_false<Target, Source>,
                "dimsum: assigning needs the same value type; convert explicitly with dimsum::cast<T>(x)");
};

template <class Required, class Actual>
struct tensor_dims_are_not_the_required_dims {
  static_assert(detail::always_false<Required, Actual>,
                "dimsum: the tensor's dims are not the dims this function requires (names and order)");
};

// --- element-wise ---
template <class Left, class Right>
struct elementwise_operands_share_no_dim {
  static_assert(detail::always_false<Left, Right>,
                "dimsum: element-wise operation between tensors that share no dim; use dimsum::outer(a, b) if an outer "
                "product is meant");
};

// --- reductions, softmax, masks, rename ---
template <class Dim, class Dims>
struct reduction_dim_is_not_a_dim_of_the_tensor {
  static_assert(detail::always_false<Dim, Dims>, "dimsum: reduction over a dim that the tensor does not have");
};
template <class Dim, class Dims>
struct reduction_names_a_dim_twice {
  static_assert(detail::always_false<Dim, Dims>, "dimsum: reduction names the same dim twice");
};
template <class Dim, class Dims>
struct softmax_dim_is_not_a_dim_of_the_tensor {
  static_assert(detail::always_false<Dim, Dims>, "dimsum: softmax over a dim that the tensor does not have");
};
template <class Dim, class Dims>
struct causal_mask_dim_is_not_a_dim_of_the_tensor {
  static_assert(detail::always_false<Dim, Dims>, "dimsum: causal_mask over a dim that the tensor does not have");
};
template <class Dim>
struct causal_mask_query_and_key_are_the_same_dim {
  static_assert(detail::always_false<Dim>,
                "dimsum: causal_mask needs two different dims: the query position and the key position");
};
template <class Dim, class Mask, class Dims>
struct masked_fill_mask_has_a_dim_the_tensor_lacks {
  static_assert(
      detail::always_false<Dim, Mask, Dims>,
      "dimsum: masked_fill mask has a dim that the tensor lacks; a mask broadcasts into the tensor, never grows it");
};
template <class T>
struct masked_fill_mask_is_not_boolean {
  static_assert(detail::always_false<T>, "dimsum: masked_fill needs a mask of bool values");
};
template <class From, class Dims>
struct rename_source_is_not_a_dim_of_the_tensor {
  static_assert(detail::always_false<From, Dims>, "dimsum: rename of a dim that the tensor does not have");
};
template <class To, class Dims>
struct rename_target_is_already_a_dim_of_the_tensor {
  static_assert(detail::always_false<To, Dims>, "dimsum: rename to a name that the tensor already has");
};
template <class From, class FromExtent, class To, class ToExtent>
struct rename_target_has_another_static_extent {
  static_assert(detail::always_false<From, FromExtent, To, ToExtent>,
                "dimsum: rename to a dim whose static extent differs from the renamed dim's");
};

template <class Dim, class Dims>
struct stack_dim_is_already_a_dim_of_the_parts {
  static_assert(detail::always_false<Dim, Dims>, "dimsum: stack needs a new dim, not one the parts already have");
};
template <class Dim, class Dims>
struct concat_dim_is_not_a_dim_of_the_parts {
  static_assert(detail::always_false<Dim, Dims>, "dimsum: concat along a dim that the parts do not have");
};
// --- nn ---
template <class In, class Dims>
struct linear_input_lacks_the_in_dim {
  static_assert(detail::always_false<In, Dims>,
                "dimsum: linear layer applied to a tensor without the layer's input dim");
};
template <class In, class Out, class First, class Second>
struct linear_is_built_from_its_in_then_its_out_dim {
  static_assert(detail::always_false<In, Out, First, Second>,
                "dimsum: nn::linear<T, In, Out> is built as linear(In{in}, Out{out}); the last two arguments are "
                "what was given (plain numbers, or dims in another order)");
};
template <class Out, class Dims>
struct linear_input_already_has_the_out_dim {
  static_assert(detail::always_false<Out, Dims>,
                "dimsum: linear layer applied to a tensor that already has the layer's output dim");
};
template <class Operand, class Dim, class Dims>
struct attention_operand_lacks_a_dim {
  static_assert(detail::always_false<Operand, Dim, Dims>,
                "dimsum: attention operand lacks a dim it needs (q: query positions and the contracted dim; k: key "
                "positions and the contracted dim; v: key positions)");
};
template <class Dim>
struct attention_query_and_key_positions_share_a_name {
  static_assert(
      detail::always_false<Dim>,
      "dimsum: attention needs different dims for query and key positions; rename one, e.g. rename<posn, k_posn>(x)");
};

template <class T>
struct where_condition_is_not_boolean {
  static_assert(detail::always_false<T>,
                "dimsum: where needs a condition of bool values; compare to get one (where(x > 0.0f, a, b))");
};

// --- assignment into a view (tensor/tensor_view.hpp) ---
template <class Dims>
struct assignment_into_a_view_of_const_elements {
  static_assert(detail::always_false<Dims>,
                "dimsum: assigning into a view of const elements (a slice or select of a const tensor); take the "
                "view of a non-const tensor");
};
template <class Dim, class Source, class View>
struct assignment_source_has_a_dim_the_view_lacks {
  static_assert(detail::always_false<Dim, Source, View>,
                "dimsum: assigning into a view an expression with a dim the view lacks; the source broadcasts into "
                "the view by name, never grows it (select or reduce that dim first)");
};

// --- stack and concat of listed parts (ops/stack.hpp) ---
template <class Part, class First, class Dims>
struct stack_and_concat_need_parts_with_the_same_dims {
  static_assert(detail::always_false<Part, First, Dims>,
                "dimsum: stack and concat need parts with the same dims (in any order); the arguments are the part, "
                "the first part's dims and its dims");
};

namespace detail {
/// Positions (in A, in B) of the first shared dim of A and B whose static
/// extents differ, or {npos, npos}.
template <class A, class B>
inline constexpr std::pair<std::size_t, std::size_t> static_disagreement_v = [] {
  for (std::size_t i = 0; i < A::size; ++i) {
    std::size_t j = find_name(B::names, A::names[i]);
    if (j != npos && A::static_extents[i] != dynamic && B::static_extents[j] != dynamic &&
        A::static_extents[i] != B::static_extents[j])
      return std::pair<std::size_t, std::size_t>{i, j};
  }
  return std::pair<std::size_t, std::size_t>{npos, npos};
}();

/// Whether the dims A and B share agree on their static extents: a pure
/// condition, so that `if constexpr (!static_extents_agree_v<A, B>)` is a
/// constant expression on every compiler; report in the failing branch
/// with report_static_disagreement<A, B>().
template <class A, class B>
inline constexpr bool static_extents_agree_v = static_disagreement_v<A, B>.first == npos;

/// Reports the first shared dim of A and B whose static extents differ.
template <class A, class B>
constexpr void report_static_disagreement() {
  constexpr auto bad = static_disagreement_v<A, B>;
  if constexpr (bad.first != npos)
    report<static_extent_mismatch<diagnostic_name_t<at_t<A, bad.first>>, extent_c<A::static_extents[bad.first]>,
                                  extent_c<B::static_extents[bad.second]>>>();
}

}  // namespace detail

// --- calls of the wrong form (map, !x) ---
/// Value types in a diagnostic: `value_types<float, int>`.
template <class... Ts>
struct value_types {};
template <class Count, class ValueTypes, class... Dims>
struct map_function_cannot_take_one_value_of_each_operand {
  static_assert(detail::always_false<Count, ValueTypes, Dims...>,
                "dimsum: map(f, x...) calls f with one value of each operand: f must take that many parameters "
                "(the count), of the operands' value types");
};
template <class ValueType, class Dims>
struct logical_not_needs_bool_values {
  static_assert(detail::always_false<ValueType, Dims>,
                "dimsum: !x needs bool values (as torch's ~ refuses floats); compare instead: x == 0.0f");
};


}  // namespace dimsum
