#pragma once
/// \file
/// The run-time thread count of dimsum's kernels.

#include <atomic>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace dimsum {

namespace detail {
/// 0 means "not set": follow OpenMP's default (OMP_NUM_THREADS).
inline std::atomic<int> kernel_thread_request{0};
}  // namespace detail

/// Sets how many threads dimsum's kernels use from the next call on; `n <= 0`
/// restores the default, OpenMP's `omp_get_max_threads()` (OMP_NUM_THREADS).
/// dimsum's own setting: it leaves the program's other OpenMP regions alone.
/// Without OpenMP the kernels always run on the calling thread.
inline void set_num_threads(int n) noexcept {
  detail::kernel_thread_request.store(n > 0 ? n : 0, std::memory_order_relaxed);
}

/// The number of threads the next kernel call may use (at least 1; exactly 1
/// when dimsum is compiled without OpenMP).
inline int num_threads() noexcept {
#ifdef _OPENMP
  const int n = detail::kernel_thread_request.load(std::memory_order_relaxed);
  return n > 0 ? n : omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace dimsum
