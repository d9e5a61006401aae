#pragma once
/// \file
/// The run-time thread count of dimsum's kernels, and `kernels::parallel_for`,
/// which runs a kernel's independent work items on dimsum's own thread pool
/// (kernels/detail/thread_pool.hpp).

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>

#include "dimsum/kernels/detail/thread_pool.hpp"

namespace dimsum {

namespace detail {
/// 0 means "not set": follow the default (OMP_NUM_THREADS, else the cores).
inline std::atomic<int> kernel_thread_request{0};

/// The thread count an OMP_NUM_THREADS value asks for: its first number
/// ("4" or "4,2" give 4), or 0 when it names none.
inline int thread_count_from_env(const char* env) noexcept {
  if (env == nullptr) return 0;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  return end != env && v > 0 ? static_cast<int>(std::min<long>(v, 1024)) : 0;
}

/// OMP_NUM_THREADS's count when set, else the number of hardware threads;
/// read once.
inline int default_kernel_threads() noexcept {
  static const int n = [] {
    const int env = thread_count_from_env(std::getenv("OMP_NUM_THREADS"));
    return env > 0 ? env : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }();
  return n;
}
}  // namespace detail

/// Sets how many threads dimsum's kernels use from the next call on; `n <= 0`
/// restores the default: OMP_NUM_THREADS when it is set (as PyTorch and
/// OpenBLAS read it), else the number of hardware threads. dimsum's own
/// setting: it changes no OpenMP or BLAS setting of the program.
inline void set_num_threads(int n) noexcept {
  detail::kernel_thread_request.store(n > 0 ? n : 0, std::memory_order_relaxed);
}

/// The number of threads the next kernel call may use (at least 1).
inline int num_threads() noexcept {
  const int n = detail::kernel_thread_request.load(std::memory_order_relaxed);
  return n > 0 ? n : detail::default_kernel_threads();
}

namespace kernels {

namespace detail {
/// Below this many flops (about 2 us of one core's work) a call stays on
/// one thread: waking a second one costs more than it saves. Measured at
/// shape A (b12 p20 d10, GEMMs of ~0.3 MFLOP): 2 threads take the forward
/// from 0.075 to 0.057 ms; a threshold of 1 MFLOP kept it on one.
inline constexpr double parallel_min_flops = double(1 << 17);
}  // namespace detail

namespace detail {
/// Below this many flops (about 0.15 ms of one core's work) a call stays on
/// one thread while the pool has recently stalled (other processes hold the
/// cores; `thread_pool::recently_stalled`): one descheduled worker costs
/// such a call a time slice of the OS, many times its own length. Larger
/// calls keep every thread: items are handed out one at a time, so a stall
/// costs them at most one item, and the other threads still help.
inline constexpr double busy_serial_max_flops = double(1 << 25);
}  // namespace detail

/// The threads worth using for a call of `flops` floating-point operations:
/// 1 below `detail::parallel_min_flops`, and below
/// `detail::busy_serial_max_flops` while other work holds the cores; else
/// `num_threads()`.
inline std::size_t threads_for_flops(double flops) noexcept {
  const std::size_t n = static_cast<std::size_t>(std::max(1, num_threads()));
  if (n == 1 || flops < detail::parallel_min_flops) return 1;
  if (flops < detail::busy_serial_max_flops && detail::thread_pool::instance().recently_stalled()) return 1;
  return n;
}

/// Calls `f(i)` once for every i in [0, n), on the calling thread and up to
/// `threads - 1` pool workers (default: `num_threads()`); returns when all
/// calls have returned. Items are taken one at a time from a shared counter,
/// so a worker the OS has descheduled delays only the item it is running.
/// Serial when `threads <= 1`, `n < 2`, inside another parallel_for, or
/// while another thread's parallel_for holds the pool. The first exception
/// from `f` is rethrown after the started items finish; the rest are skipped.
template <class F>
void parallel_for(std::size_t n, F&& f, std::size_t threads = static_cast<std::size_t>(num_threads())) {
  using fn = std::remove_reference_t<F>;
  const std::size_t helpers = std::min(threads, n) > 1 ? std::min(threads, n) - 1 : 0;
  if (helpers == 0) {
    for (std::size_t i = 0; i < n; ++i) f(i);
    return;
  }
  detail::thread_pool::instance().run(
      n, [](void* ctx, std::size_t i) { (*static_cast<fn*>(ctx))(i); },
      const_cast<void*>(static_cast<const void*>(std::addressof(f))), helpers);
}

}  // namespace kernels
}  // namespace dimsum
