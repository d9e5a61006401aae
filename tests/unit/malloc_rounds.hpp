#pragma once
// Rounds of large tensor allocations for unit.malloc_settings and
// unit.malloc_settings_opt_out, counted in minor page faults.
#include <dimsum/dimsum.hpp>

#include <sys/resource.h>

#include <cstdlib>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define DIMSUM_TEST_SANITIZED_MALLOC 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DIMSUM_TEST_SANITIZED_MALLOC 1
#endif
// Whether this build's malloc is glibc's (with mallopt taking effect).
#if defined(__GLIBC__) && !defined(DIMSUM_TEST_SANITIZED_MALLOC)
#define DIMSUM_TEST_MALLOC_TUNABLE 1
#else
#define DIMSUM_TEST_MALLOC_TUNABLE 0
#endif

namespace malloc_test {

DIMSUM_DIM(row);
DIMSUM_DIM(col);

/// A first tensor evaluated from an expression (what makes the setting,
/// unless DIMSUM_KEEP_MALLOC_SETTINGS): one element, 1.
inline float first_tensor_from_an_expression() {
  const dimsum::tensor<float, row> first = dimsum::tensor<float, row>(row{1}) + 1.0f;
  return first(row{0});
}

inline long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

/// Minor page faults in n rounds (after two untimed ones) of four 4 MiB
/// zero-filled tensors alive at once.
inline long faults_of_rounds(int n) {
  auto round = [] {
    using big = dimsum::tensor<float, row, col>;
    big a(row{1024}, col{1024}), b(row{1024}, col{1024}), c(row{1024}, col{1024}), d(row{1024}, col{1024});
    return a(row{1023}, col{1023}) + b(row{0}, col{0}) + c(row{5}, col{7}) + d(row{9}, col{3});
  };
  float sum = round() + round();
  const long before = minor_faults();
  for (int r = 0; r < n; ++r) sum += round();
  const long faults = minor_faults() - before;
  return sum == 0.0f ? faults : -1;
}

}  // namespace malloc_test
