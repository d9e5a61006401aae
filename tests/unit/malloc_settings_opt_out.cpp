// unit.malloc_settings with DIMSUM_KEEP_MALLOC_SETTINGS defined: dimsum
// leaves malloc as it is, and the same rounds fault their memory in again
// each time (glibc's default), which also shows that the rounds are large
// enough for unit.malloc_settings to tell the two apart.
#define DIMSUM_KEEP_MALLOC_SETTINGS
#include <dimsum/dimsum.hpp>

#include <catch2/catch.hpp>

#include "malloc_rounds.hpp"

TEST_CASE("malloc settings: DIMSUM_KEEP_MALLOC_SETTINGS leaves glibc's malloc as it is", "[tensor]") {
  CHECK(malloc_test::first_tensor_from_an_expression() == 1.0f);
#if DIMSUM_TEST_MALLOC_TUNABLE
  const long faults = malloc_test::faults_of_rounds(3);
  INFO("minor page faults in 3 rounds of 4 x 4 MiB tensors: " << faults);
  CHECK(faults > 3 * 2048);  // 4096 pages a round when nothing is kept
#else
  CHECK(malloc_test::faults_of_rounds(1) >= 0);
#endif
}
