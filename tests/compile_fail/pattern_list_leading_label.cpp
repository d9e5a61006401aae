// A list of tensors as rearrange's operand whose first label is a dim of the elements, not the list's new dim.
// EXPECT: dimsum: a list of tensors as the operand needs the first term to start with a new label
// EXPECT: pattern_list_needs_a_new_leading_label<dimsum::dims<batch, posn, d_model> ?>
#include <vector>

#include "common.hpp"

int main() {
  std::vector<x_t> list(2, x_t(batch{2}, posn{3}));
#ifdef DIMSUM_SHOULD_FAIL
  auto r = dimsum::rearrange<"batch posn d_model -> posn batch d_model">(list);
#else
  auto r = dimsum::rearrange<"k_posn batch posn d_model -> batch k_posn posn d_model">(list);
#endif
  (void)r;
}
