// Replaces the global operator new of the test executable that includes
// this header (include it from one source file only) to watch heap
// allocations: `heap_watch::allocations` counts them, and while
// `heap_watch::watching` is set `heap_watch::largest` keeps the largest
// size asked for. Off under AddressSanitizer or ThreadSanitizer, which must
// own operator new: then DIMSUM_TEST_COUNT_ALLOCATIONS is 0 and nothing is
// counted.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DIMSUM_TEST_COUNT_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DIMSUM_TEST_COUNT_ALLOCATIONS 0
#endif
#endif
#ifndef DIMSUM_TEST_COUNT_ALLOCATIONS
#define DIMSUM_TEST_COUNT_ALLOCATIONS 1
#endif

namespace heap_watch {
inline std::atomic<long> allocations{0};
inline std::atomic<bool> watching{false};
inline std::atomic<std::size_t> largest{0};
inline void note(std::size_t n) {
  ++allocations;
  if (!watching.load(std::memory_order_relaxed)) return;
  std::size_t seen = largest.load(std::memory_order_relaxed);
  while (n > seen && !largest.compare_exchange_weak(seen, n)) {
  }
}
}  // namespace heap_watch

#if DIMSUM_TEST_COUNT_ALLOCATIONS
// g++ cannot see that these replacements pair malloc with free consistently.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  heap_watch::note(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t al) {
  heap_watch::note(n);
  const std::size_t a = static_cast<std::size_t>(al);
  if (void* p = std::aligned_alloc(a, (std::max<std::size_t>(n, 1) + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // DIMSUM_TEST_COUNT_ALLOCATIONS
