#pragma once
/// \file
/// dimsum's worker threads: one process-wide pool whose workers spin briefly
/// after a job and then block, and whose jobs the calling thread works on
/// too. Items are handed out by one atomic counter, so a worker the OS has
/// descheduled before it joins costs the job nothing: the caller (and any
/// worker that is running) takes its share, and the caller waits only for
/// items a worker has already started.
///
/// The job's life, in one 32-bit state word (generation | open | joined):
///   caller   publish job, generation += 1, open        (release)
///   worker   joined += 1 while open                   (CAS, acquire)
///            take items; joined -= 1                  (release)
///   caller   take items; clear open; wait joined == 0 (acquire)
/// A worker reads the job only while counted in `joined`, and the caller
/// returns only when `joined` is 0 with the job closed, so the job (on the
/// caller's stack) outlives every reader.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

namespace dimsum::kernels::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Whether the calling thread is inside a pool job (a worker, or a caller
/// running its items): a parallel_for there runs serially.
inline bool& in_pool_job() noexcept {
  thread_local bool inside = false;
  return inside;
}

class thread_pool {
 public:
  /// The item function of one job: call(ctx, i).
  using item_fn = void (*)(void*, std::size_t);

  static thread_pool& instance() {
    static thread_pool pool;
    return pool;
  }

  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  ~thread_pool() {
    stopping_.store(true, std::memory_order_relaxed);
    state_.fetch_add(generation_one, std::memory_order_release);
    state_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  /// Runs call(ctx, i) for every i in [0, n) on the calling thread and up to
  /// `helpers` workers. Serial when the pool is taken (another thread's job,
  /// or a call from inside a job). The first exception an item throws is
  /// rethrown here once every started item has finished; items not yet
  /// started are skipped.
  void run(std::size_t n, item_fn call, void* ctx, std::size_t helpers) {
    if (helpers == 0 || n < 2 || in_pool_job() || !dispatch_.try_lock()) {
      for (std::size_t i = 0; i < n; ++i) call(ctx, i);
      return;
    }
    std::lock_guard<std::mutex> hold(dispatch_, std::adopt_lock);
    try {
      grow(helpers);
    } catch (...) {  // no thread could be started: run here
      for (std::size_t i = 0; i < n; ++i) call(ctx, i);
      return;
    }
    job j(call, ctx, n, helpers);
    job_.store(&j, std::memory_order_relaxed);
    const std::uint32_t s = state_.load(std::memory_order_relaxed);
    state_.store(((s & generation_mask) + generation_one) | open_bit, std::memory_order_release);
    state_.notify_all();

    in_pool_job() = true;
    const auto started = clock::now();
    work(j);
    in_pool_job() = false;

    // Close the job to latecomers, then wait for the items others started.
    std::uint32_t now = state_.fetch_and(~open_bit, std::memory_order_acq_rel) & ~open_bit;
    if ((now & joined_mask) != 0) {
      const auto own_done = clock::now();
      for (int spins = 0; (now & joined_mask) != 0; now = state_.load(std::memory_order_acquire)) {
        if (spins < spin_limit) {
          ++spins;
          cpu_relax();
        } else {
          state_.wait(now, std::memory_order_acquire);
        }
      }
      // Waiting far longer for a started item than this thread's own share
      // took: the OS took the core from a worker mid-item (another process
      // wants it). Remember when, for `recently_stalled`.
      const auto waited = clock::now() - own_done;
      if (waited > stall_slack + 4 * (own_done - started)) note_stall(clock::now().time_since_epoch().count());
    }
    job_.store(nullptr, std::memory_order_relaxed);
    if (j.error) std::rethrow_exception(j.error);
  }

  /// Whether a job had to wait for a worker that the OS had descheduled
  /// mid-item (see `run`) within the stall window: the cores are shared
  /// with other work, and a small job is better run on the caller alone.
  /// The window is 50 ms after a first stall and doubles (up to 1.6 s) for
  /// each stall that follows soon after the previous window ended: on a
  /// machine that stays busy, the probes (the small jobs that try the
  /// workers again) become rare, since each may cost a time slice.
  bool recently_stalled() const noexcept {
    const auto last = last_stall_.load(std::memory_order_relaxed);
    return last != never && clock::now().time_since_epoch().count() - last < stall_window();
  }

  /// The current stall window, in steady_clock ticks.
  std::chrono::steady_clock::rep stall_window() const noexcept {
    return stall_memory_ticks << stall_streak_.load(std::memory_order_relaxed);
  }

  /// Records a stall at steady_clock time `now` (in ticks since its epoch):
  /// called by `run` for the job holding the pool, and by tests.
  void note_stall(std::chrono::steady_clock::rep now) noexcept {
    const auto last = last_stall_.load(std::memory_order_relaxed);
    const int streak = stall_streak_.load(std::memory_order_relaxed);
    // Another stall within twice the window: the machine stays busy.
    const bool again = last != never && now - last < 2 * stall_window();
    stall_streak_.store(again ? std::min(streak + 1, max_stall_streak) : 0, std::memory_order_relaxed);
    last_stall_.store(now, std::memory_order_relaxed);
  }

  /// Forgets past stalls (tests start from a known state).
  void forget_stalls() noexcept {
    last_stall_.store(never, std::memory_order_relaxed);
    stall_streak_.store(0, std::memory_order_relaxed);
  }

  /// Workers started so far (they stay until the program ends).
  std::size_t workers() const {
    std::lock_guard<std::mutex> hold(dispatch_);
    return workers_.size();
  }

 private:
  struct job {
    job(item_fn c, void* x, std::size_t count, std::size_t h) : call(c), ctx(x), n(count), helpers(h) {}
    item_fn call;
    void* ctx;
    std::size_t n;
    std::size_t helpers;
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;  // written by the first thrower only
  };

  static constexpr std::uint32_t joined_mask = 0xffff;
  static constexpr std::uint32_t open_bit = 0x10000;
  static constexpr std::uint32_t generation_one = 0x20000;
  static constexpr std::uint32_t generation_mask = ~(joined_mask | open_bit);
  // About 10-40 us of pause instructions: long enough to catch the next
  // kernel of a forward pass, short enough not to steal a busy core for long.
  static constexpr int spin_limit = 1 << 11;

  using clock = std::chrono::steady_clock;
  // A wait counts as a stall past this plus 4x the caller's own share; the
  // OS's time slices are milliseconds, a normal wait microseconds.
  static constexpr clock::duration stall_slack = std::chrono::microseconds(50);
  // How long a first stall keeps small jobs on one thread (the stall
  // window); the first small job after it probes the workers again.
  static constexpr auto stall_memory_ticks =
      std::chrono::duration_cast<clock::duration>(std::chrono::milliseconds(50)).count();
  static constexpr int max_stall_streak = 5;  // windows of 50 ms << streak: up to 1.6 s
  static constexpr clock::rep never = std::numeric_limits<clock::rep>::min();

  thread_pool() = default;

  static void work(job& j) noexcept {
    for (;;) {
      const std::size_t i = j.next.fetch_add(1, std::memory_order_relaxed);
      if (i >= j.n) return;
      try {
        j.call(j.ctx, i);
      } catch (...) {
        if (!j.failed.exchange(true, std::memory_order_relaxed)) j.error = std::current_exception();
        j.next.store(j.n, std::memory_order_relaxed);  // skip what nobody started
      }
    }
  }

  void grow(std::size_t helpers) {
    workers_.reserve(helpers);
    // A new worker starts from the generation before the job about to be
    // published, so it does not miss that job if it starts late.
    const std::uint32_t before = state_.load(std::memory_order_relaxed) & generation_mask;
    while (workers_.size() < helpers) workers_.emplace_back([this, before] { worker_loop(before); });
  }

  void worker_loop(std::uint32_t seen) {
    in_pool_job() = true;
    for (;;) {
      std::uint32_t s = state_.load(std::memory_order_acquire);
      for (int spins = 0; (s & generation_mask) == seen; s = state_.load(std::memory_order_acquire)) {
        if (spins < spin_limit) {
          ++spins;
          cpu_relax();
        } else {
          state_.wait(s, std::memory_order_acquire);
        }
      }
      if (stopping_.load(std::memory_order_relaxed)) return;
      seen = s & generation_mask;
      // Join while this generation is open; a closed or newer job is left
      // alone (the newer one is seen on the next turn).
      bool joined = false;
      while ((s & open_bit) != 0 && (s & generation_mask) == seen) {
        if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire, std::memory_order_acquire)) {
          joined = true;
          break;
        }
      }
      if (!joined) continue;
      job& j = *job_.load(std::memory_order_relaxed);
      if ((s & joined_mask) < j.helpers) work(j);
      const std::uint32_t before = state_.fetch_sub(1, std::memory_order_release);
      if ((before & open_bit) == 0 && (before & joined_mask) == 1) state_.notify_all();
    }
  }

  mutable std::mutex dispatch_;  // one job at a time; held by its caller
  std::vector<std::thread> workers_;
  std::atomic<std::uint32_t> state_{0};
  std::atomic<job*> job_{nullptr};
  std::atomic<bool> stopping_{false};
  std::atomic<clock::rep> last_stall_{never};
  std::atomic<int> stall_streak_{0};
};

}  // namespace dimsum::kernels::detail
