// examples/decode.hpp's top_k_sampler refuses logits that are not a
// distribution, as torch.multinomial does (a NaN also broke partial_sort's
// ordering, undefined behaviour), and keeps -inf logits out of the pick.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "../../examples/decode.hpp"

TEST_CASE("top_k_sampler refuses NaN and +inf logits and an all -inf row") {
  decode::top_k_sampler pick(1.0f, 3, 7);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> nan_row{1.0f, std::nanf(""), 2.0f}, inf_row{inf, 0.0f}, masked_row{-inf, -inf};
  CHECK_THROWS_AS(pick(nan_row), std::invalid_argument);
  CHECK_THROWS_AS(pick(inf_row), std::invalid_argument);
  CHECK_THROWS_AS(pick(masked_row), std::invalid_argument);
}

TEST_CASE("top_k_sampler never picks a -inf logit, and k = 1 is the argmax") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> row{-inf, 0.5f, -inf, 0.25f};
  decode::top_k_sampler any(1.0f, 0, 11);
  for (int i = 0; i < 200; ++i) {
    const std::size_t t = any(row);
    CHECK((t == 1 || t == 3));
  }
  decode::top_k_sampler greedy(1.0f, 1, 11);
  CHECK(greedy(row) == 1);
}
