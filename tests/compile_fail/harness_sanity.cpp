// Sanity: a deliberate static_assert that the harness must see.
// EXPECT: dimsum: harness sanity
#include "common.hpp"

#ifdef DIMSUM_SHOULD_FAIL
static_assert(dimsum::detail::always_false<batch>, "dimsum: harness sanity");
#endif

int main() {}
