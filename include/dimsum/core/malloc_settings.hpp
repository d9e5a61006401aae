#pragma once
/// \file
/// The one process-wide setting dimsum makes: glibc's malloc keeps the
/// memory a step frees for the next step (docs/design.md, "Memory a
/// training step reuses"). `-DDIMSUM_KEEP_MALLOC_SETTINGS` leaves malloc as
/// it is.

#include <cstdlib>

#if defined(__GLIBC__) && !defined(DIMSUM_KEEP_MALLOC_SETTINGS)
#include <malloc.h>
#endif

namespace dimsum::detail {

/// Makes glibc's malloc keep the memory a forward pass or a training step
/// frees for the next one, once per process (the first tensor that
/// allocates, or the first tape, does it). A loop allocates the same
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
  static const bool done = [] {
    // Setting either turns glibc's dynamic thresholds off, so both are set.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)done;
#endif
}

}  // namespace dimsum::detail
