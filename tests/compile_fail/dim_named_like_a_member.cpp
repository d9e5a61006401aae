// A dim named like a member every dim has (here `value`).
// EXPECT: dimsum: a dim cannot be named name, value, static_extent, is_static or name_view
// EXPECT-GCC: DIMSUM_DIM\(value\)
// EXPECT-CLANG: is_dim_member_name\("value"\)
#include "common.hpp"

namespace user {
#ifdef DIMSUM_SHOULD_FAIL
DIMSUM_DIM(value);
#else
DIMSUM_DIM(val);
#endif
}  // namespace user

int main() {}
