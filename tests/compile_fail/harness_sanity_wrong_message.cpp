// Sanity: the expected message is one the compiler never prints, so this case must be reported as failing (CTest WILL_FAIL).
// EXPECT: dimsum: a message no compiler prints
#include "common.hpp"

#ifdef DIMSUM_SHOULD_FAIL
static_assert(dimsum::detail::always_false<batch>, "dimsum: harness sanity");
#endif

int main() {}
