// Tests of dimsum/kernels/threads.hpp: parallel_for on dimsum's thread pool
// (every item exactly once, workers really join, nesting, exceptions,
// concurrent callers) and the OMP_NUM_THREADS default.
#include <dimsum/kernels/threads.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

namespace dk = dimsum::kernels;

namespace {
// How many times parallel_for called each index.
std::vector<int> call_counts(std::size_t n, std::size_t threads) {
  std::vector<std::atomic<int>> hits(n);
  dk::parallel_for(n, [&](std::size_t i) { hits[i].fetch_add(1); }, threads);
  std::vector<int> out;
  for (auto& h : hits) out.push_back(h.load());
  return out;
}
}  // namespace

TEST_CASE("kernels/threads: parallel_for calls every index exactly once", "[kernels][threads]") {
  for (std::size_t threads : {1, 2, 3, 8})
    for (std::size_t n : {0, 1, 2, 3, 17, 1000}) {
      INFO("threads " << threads << ", n " << n);
      CHECK(call_counts(n, threads) == std::vector<int>(n, 1));
    }
}

TEST_CASE("kernels/threads: many jobs in a row each finish before parallel_for returns", "[kernels][threads]") {
  // Each job's items add to a fresh counter on the caller's stack; a worker
  // still running an item after parallel_for returned would touch the next
  // job's counter (and TSan would see it).
  for (int job = 0; job < 2000; ++job) {
    std::atomic<int> sum{0};
    dk::parallel_for(7, [&](std::size_t i) { sum.fetch_add(int(i) + 1); }, 2);
    REQUIRE(sum.load() == 28);
  }
}

TEST_CASE("kernels/threads: a worker takes items while the caller is busy", "[kernels][threads]") {
  // Item 0 waits (up to 10 s) for item 1 to start on another thread: the
  // caller holds item 0, so only a pool worker can take item 1.
  std::atomic<bool> second_started{false};
  std::mutex m;
  std::set<std::thread::id> ids;
  dk::parallel_for(
      2,
      [&](std::size_t i) {
        {
          std::lock_guard<std::mutex> hold(m);
          ids.insert(std::this_thread::get_id());
        }
        if (i == 1) {
          second_started = true;
        } else {
          const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
          while (!second_started && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
        }
      },
      2);
  CHECK(second_started.load());
  CHECK(ids.size() == 2);
  CHECK(dk::detail::thread_pool::instance().workers() >= 1);
}

TEST_CASE("kernels/threads: a parallel_for inside an item runs serially on that thread", "[kernels][threads]") {
  std::vector<std::atomic<int>> hits(6 * 5);
  std::atomic<int> foreign{0};
  dk::parallel_for(
      6,
      [&](std::size_t i) {
        const auto outer = std::this_thread::get_id();
        dk::parallel_for(
            5,
            [&](std::size_t j) {
              if (std::this_thread::get_id() != outer) foreign.fetch_add(1);
              hits[i * 5 + j].fetch_add(1);
            },
            4);
      },
      2);
  CHECK(foreign.load() == 0);
  for (auto& h : hits) CHECK(h.load() == 1);
}

TEST_CASE("kernels/threads: an exception from an item reaches the caller, and the pool still works",
          "[kernels][threads]") {
  std::atomic<int> ran{0};
  CHECK_THROWS_WITH(dk::parallel_for(
                        100,
                        [&](std::size_t i) {
                          ran.fetch_add(1);
                          if (i == 3) throw std::runtime_error("item 3 failed");
                        },
                        2),
                    "item 3 failed");
  CHECK(ran.load() >= 4);
  CHECK(ran.load() <= 100);
  CHECK(call_counts(50, 2) == std::vector<int>(50, 1));
}

TEST_CASE("kernels/threads: parallel_for from several threads at once", "[kernels][threads]") {
  // One caller gets the pool, the others run their items themselves.
  constexpr int callers = 4, n = 300;
  std::vector<std::vector<int>> counts(callers);
  std::vector<std::thread> ts;
  for (int c = 0; c < callers; ++c)
    ts.emplace_back([&, c] {
      for (int rep = 0; rep < 20; ++rep) counts[c] = call_counts(n, 2);
    });
  for (auto& t : ts) t.join();
  for (const auto& c : counts) CHECK(c == std::vector<int>(n, 1));
}

TEST_CASE("kernels/threads: OMP_NUM_THREADS's first number is the default count", "[kernels][threads]") {
  using dimsum::detail::thread_count_from_env;
  CHECK(thread_count_from_env(nullptr) == 0);
  CHECK(thread_count_from_env("") == 0);
  CHECK(thread_count_from_env("3") == 3);
  CHECK(thread_count_from_env("4,2") == 4);
  CHECK(thread_count_from_env(" 2") == 2);
  CHECK(thread_count_from_env("0") == 0);
  CHECK(thread_count_from_env("-2") == 0);
  CHECK(thread_count_from_env("two") == 0);
}

TEST_CASE("kernels/threads: threads_for_flops keeps small calls on one thread", "[kernels][threads]") {
  dimsum::set_num_threads(2);
  dk::detail::thread_pool::instance().forget_stalls();  // an earlier test's job may have stalled
  CHECK(dk::threads_for_flops(1000.0) == 1);
  CHECK(dk::threads_for_flops(dk::detail::parallel_min_flops) == 2);
  dimsum::set_num_threads(0);
}

TEST_CASE("kernels/threads: after a worker stalls mid-item, small calls stay on one thread for a while",
          "[kernels][threads]") {
  using namespace std::chrono_literals;
  auto& pool = dk::detail::thread_pool::instance();
  dimsum::set_num_threads(2);
  pool.forget_stalls();
  CHECK_FALSE(pool.recently_stalled());
  // The caller's item waits (up to 10 s) for a worker to start the other
  // item, which then holds the worker for 200 ms (as if the OS had given its
  // core to another process): the caller waits far longer than its own
  // share took.
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> on_worker{false};
  dk::parallel_for(
      2,
      [&](std::size_t) {
        if (std::this_thread::get_id() != caller) {
          on_worker = true;
          std::this_thread::sleep_for(200ms);
        } else {
          const auto give_up = std::chrono::steady_clock::now() + 10s;
          while (!on_worker && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
        }
      },
      2);
  const bool worker_ran = on_worker.load();
  REQUIRE(worker_ran);
  CHECK(pool.recently_stalled());
  CHECK(dk::threads_for_flops(dk::detail::parallel_min_flops) == 1);
  CHECK(dk::threads_for_flops(dk::detail::busy_serial_max_flops - 1) == 1);
  CHECK(dk::threads_for_flops(dk::detail::busy_serial_max_flops) == 2);  // large calls keep both threads
  std::this_thread::sleep_for(60ms);  // past the 50 ms a stall is remembered
  CHECK_FALSE(pool.recently_stalled());
  CHECK(dk::threads_for_flops(dk::detail::parallel_min_flops) == 2);
  dimsum::set_num_threads(0);
}

TEST_CASE("kernels/threads: stalls that keep coming widen the stall window, up to 1.6 s", "[kernels][threads]") {
  using namespace std::chrono;
  auto& pool = dk::detail::thread_pool::instance();
  const auto ms = [](int n) { return duration_cast<steady_clock::duration>(milliseconds(n)).count(); };
  pool.forget_stalls();
  const auto t0 = steady_clock::now().time_since_epoch().count() - ms(10000);  // long past: not "recent"
  pool.note_stall(t0);
  CHECK(pool.stall_window() == ms(50));
  pool.note_stall(t0 + ms(60));  // within twice the window after the last one: the machine stays busy
  CHECK(pool.stall_window() == ms(100));
  pool.note_stall(t0 + ms(60 + 150));
  CHECK(pool.stall_window() == ms(200));
  for (int i = 1; i <= 10; ++i) pool.note_stall(t0 + ms(210 + 10 * i));
  CHECK(pool.stall_window() == ms(1600));
  pool.note_stall(t0 + ms(210 + 100 + 3200));  // twice the window after the last: a fresh start
  CHECK(pool.stall_window() == ms(50));
  CHECK_FALSE(pool.recently_stalled());  // all of it 6 s ago
  pool.forget_stalls();
  CHECK(pool.stall_window() == ms(50));
}
