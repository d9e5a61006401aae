// Tests of core/malloc_settings.hpp: the first tensor evaluated from an
// expression makes glibc's malloc keep freed memory for the next pass, so a
// loop that allocates the same activations every pass stops faulting them
// in again.
// The expected behaviour is counted with the kernel's minor page faults
// (getrusage), independent of the code under test: each round holds four
// 4 MiB tensors at once (16 MiB, above the trim threshold glibc's dynamic
// rule gives after freeing 4 MiB blocks) and frees them. Without the setting
// every round gives its memory back and faults about 4096 pages in again
// (unit.malloc_settings_opt_out checks that, with the same rounds); with it,
// a round after the first faults almost none.
#include <dimsum/dimsum.hpp>

#include <sys/resource.h>

#include <catch2/catch.hpp>

#include "malloc_rounds.hpp"

TEST_CASE("malloc settings: after the first tensor, rounds of large tensors reuse freed memory", "[tensor]") {
  CHECK(malloc_test::first_tensor_from_an_expression() == 1.0f);
#if DIMSUM_TEST_MALLOC_TUNABLE
  const long faults = malloc_test::faults_of_rounds(3);
  INFO("minor page faults in 3 rounds of 4 x 4 MiB tensors: " << faults);
  CHECK(faults < 512);
#else
  // Sanitizers replace malloc (mallopt does nothing there); the rounds
  // still allocate, zero and free correctly.
  CHECK(malloc_test::faults_of_rounds(1) >= 0);
#endif
}
