// The einsum string parser, run at run time (the same constexpr code the
// compiler runs on einsum<"...">).
#include <catch2/catch.hpp>

#include <dimsum/core/einsum_string.hpp>

using dimsum::detail::einsum_parse_error;
using dimsum::detail::parse_einsum;

TEST_CASE("einsum_string: terms and labels", "[einsum_string]") {
  auto p = parse_einsum("batch posn d_model, nheads d_model d_head -> batch posn nheads d_head");
  REQUIRE(p.error == einsum_parse_error::none);
  REQUIRE(p.n_inputs == 2);
  REQUIRE(p.inputs[0].n_labels == 3);
  CHECK(p.inputs[0].labels[0] == "batch");
  CHECK(p.inputs[0].labels[2] == "d_model");
  CHECK(p.inputs[1].labels[2] == "d_head");
  REQUIRE(p.output.n_labels == 4);
  CHECK(p.output.labels[3] == "d_head");
}

TEST_CASE("einsum_string: an empty output is a full contraction", "[einsum_string]") {
  auto p = parse_einsum("a b, a b ->");
  REQUIRE(p.error == einsum_parse_error::none);
  CHECK(p.output.n_labels == 0);
}

TEST_CASE("einsum_string: groups, named and unnamed", "[einsum_string]") {
  auto p = parse_einsum("b p (h d) -> b p features(h d)");
  REQUIRE(p.error == einsum_parse_error::none);
  REQUIRE(p.inputs[0].n_items == 3);
  CHECK(p.inputs[0].items[2].is_group);
  CHECK(p.inputs[0].items[2].count == 2);
  CHECK(p.inputs[0].n_labels == 4);
  CHECK(p.output.items[2].name == "features");
  CHECK(p.output.items[2].is_group);
}

TEST_CASE("einsum_string: syntax errors and where they are", "[einsum_string]") {
  CHECK(parse_einsum("a b, b c").error == einsum_parse_error::no_arrow);
  // '=>' for '->': the stray '=' is the error, at its own position and term.
  auto fat = parse_einsum("a b, b c => a c");
  CHECK(fat.error == einsum_parse_error::invalid_character);
  CHECK(fat.error_pos == 9);
  CHECK(fat.error_term == 1);
  auto two = parse_einsum("a -> b -> c");
  CHECK(two.error == einsum_parse_error::more_than_one_arrow);
  CHECK(two.error_pos == 7);
  auto empty = parse_einsum("a b,, b c -> a c");
  CHECK(empty.error == einsum_parse_error::empty_input_term);
  CHECK(empty.error_term == 1);
  CHECK(parse_einsum(", a -> a").error == einsum_parse_error::empty_input_term);
  CHECK(parse_einsum("a, -> a").error == einsum_parse_error::empty_input_term);
  auto bad = parse_einsum("a * b -> a");
  CHECK(bad.error == einsum_parse_error::invalid_character);
  CHECK(bad.error_pos == 2);
  CHECK(parse_einsum("a b -> a, b").error == einsum_parse_error::invalid_character);
  CHECK(parse_einsum("a (b c -> a").error == einsum_parse_error::unbalanced_parentheses);
  CHECK(parse_einsum("a b) -> a").error == einsum_parse_error::unbalanced_parentheses);
  CHECK(parse_einsum("a ((b) c) -> a").error == einsum_parse_error::unbalanced_parentheses);
  auto twice = parse_einsum("a b a -> a");
  CHECK(twice.error == einsum_parse_error::label_twice_in_a_term);
  CHECK(twice.error_label == "a");
  CHECK(parse_einsum("a -> b b").error == einsum_parse_error::label_twice_in_a_term);
  CHECK(parse_einsum("1a -> a").error == einsum_parse_error::invalid_character);
  // Numbers other than 1: name the axis (einops' anonymous axes of length > 1).
  auto three = parse_einsum("h w -> h w 3");
  CHECK(three.error == einsum_parse_error::number_other_than_1);
  CHECK(three.error_pos == 11);
  CHECK(three.error_term == 1);
  CHECK(parse_einsum("h (w 2) -> h w").error == einsum_parse_error::number_other_than_1);
  CHECK(parse_einsum("h 01 -> h").error == einsum_parse_error::number_other_than_1);
}

TEST_CASE("einsum_string: size-1 axes are groups of no labels", "[einsum_string]") {
  // `1` and `()` (and `(1)`) are anonymous size-1 axes; `h()` is a named one;
  // a 1 inside a group with labels is ignored, as einops does.
  auto p = parse_einsum("b 1 h () w (1) -> b one() hw(h 1 w)");
  REQUIRE(p.error == einsum_parse_error::none);
  REQUIRE(p.inputs[0].n_items == 6);
  CHECK(p.inputs[0].n_labels == 3);
  for (std::size_t i : {1u, 3u, 5u}) {
    CHECK(p.inputs[0].items[i].is_group);
    CHECK(p.inputs[0].items[i].count == 0);
    CHECK(dimsum::detail::is_unit_item(p.inputs[0].items[i]));
  }
  CHECK(p.inputs[0].items[2].name == "h");
  CHECK(p.inputs[0].items[2].first == 1);
  REQUIRE(p.output.n_items == 3);
  CHECK(p.output.items[1].name == "one");
  CHECK(p.output.items[1].count == 0);
  CHECK(!dimsum::detail::is_unit_item(p.output.items[1]));
  CHECK(p.output.items[2].count == 2);
  CHECK(p.output.labels[p.output.items[2].first + 1] == "w");
  // A term of size-1 axes only is not empty.
  CHECK(parse_einsum("1 1 -> ").error == einsum_parse_error::none);
}

TEST_CASE("einsum_string: too many labels is an error, not an overflow", "[einsum_string]") {
  CHECK(parse_einsum("a b c d e f g h i j k l m n o p q -> a").error == einsum_parse_error::too_many_labels);
  CHECK(parse_einsum("a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a -> a").error == einsum_parse_error::too_many_labels);
}
