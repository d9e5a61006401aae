#pragma once
/// \file
/// The one process-wide setting dimsum makes: glibc's malloc keeps the
/// memory a step frees for the next step (docs/design.md, "Memory a
/// training step reuses"). `-DDIMSUM_KEEP_MALLOC_SETTINGS` leaves malloc as
/// it is.

#include <atomic>
#include <cstdlib>

#if defined(__GLIBC__) && !defined(DIMSUM_KEEP_MALLOC_SETTINGS)
#include <malloc.h>
#endif

namespace dimsum::detail {

#if defined(__GLIBC__) && !defined(DIMSUM_KEEP_MALLOC_SETTINGS)
/// Whether the settings were made (the check on every allocation is one
/// relaxed load; the settings themselves are made out of line, once).
inline std::atomic<bool> malloc_settings_made{false};

#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline, cold))
#endif
inline void make_malloc_settings() noexcept {
  if (malloc_settings_made.exchange(true)) return;
  // Setting either turns glibc's dynamic thresholds off, so both are set.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}
#endif

/// Makes glibc's malloc keep the memory a forward pass or a training step
/// frees for the next one, once per process (the first tensor evaluated
/// from an expression, or the first tape, does it; not the zero-filled
/// constructor, where the extra call made g++ 12 report a false
/// -Wmaybe-uninitialized in nn modules). A loop allocates the same
/// activations (and gradients) every time; by default glibc gives
/// everything above the largest recently freed block back to the system at
/// the end of a pass (its trim threshold follows that block, far below a
/// pass's peak) and the next pass faults it back in page by page: a third
/// of the training example's step time, and 15% of the seed-000 forward at
/// b8 p256 (docs/design.md, "Memory a training step reuses"). Blocks up to
/// 32 MiB now come from the heap and the heap is not trimmed below 1 GiB;
/// larger blocks are still mapped and unmapped.
/// `-DDIMSUM_KEEP_MALLOC_SETTINGS` leaves malloc as it is.
inline void keep_freed_memory_for_reuse() noexcept {
#if defined(__GLIBC__) && !defined(DIMSUM_KEEP_MALLOC_SETTINGS)
  if (!malloc_settings_made.load(std::memory_order_relaxed)) make_malloc_settings();
#endif
}

}  // namespace dimsum::detail
