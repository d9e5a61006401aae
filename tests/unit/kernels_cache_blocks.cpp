// Tests of kernels/detail/cache_sizes.hpp and the GEMM's run-time cache
// blocks (cache_blocks_for in kernels/detail/gemm_driver.hpp): expected
// values computed by hand from the rule in its comment.
#include <dimsum/kernels/gemm.hpp>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

namespace kd = dimsum::kernels::detail;

TEST_CASE("kernels/cache: sysfs sizes parse", "[kernels][cache]") {
  CHECK(kd::parse_cache_size("48K") == 48u * 1024);
  CHECK(kd::parse_cache_size("1024K\n") == 1024u * 1024);
  CHECK(kd::parse_cache_size("32M") == 32u * 1024 * 1024);
  CHECK(kd::parse_cache_size("512") == 512u);
  CHECK(kd::parse_cache_size("") == 0u);
  CHECK(kd::parse_cache_size("K") == 0u);
}

TEST_CASE("kernels/cache: caches_from_sysfs reads data and unified levels, not instruction caches",
          "[kernels][cache]") {
  const auto dir = std::filesystem::temp_directory_path() / "dimsum_cache_test";
  std::filesystem::remove_all(dir);
  auto index = [&](int i, int level, const char* type, const char* size) {
    const auto d = dir / ("index" + std::to_string(i));
    std::filesystem::create_directories(d);
    std::ofstream(d / "level") << level << "\n";
    std::ofstream(d / "type") << type << "\n";
    std::ofstream(d / "size") << size << "\n";
  };
  index(0, 1, "Data", "48K");
  index(1, 1, "Instruction", "32K");
  index(2, 2, "Unified", "1024K");
  index(3, 3, "Unified", "32768K");
  const kd::cache_sizes c = kd::caches_from_sysfs(dir.string());
  std::filesystem::remove_all(dir);
  CHECK(c.l1d == 48u * 1024);
  CHECK(c.l2 == 1024u * 1024);
  CHECK(c.l3 == 32u * 1024 * 1024);
  CHECK(kd::caches_from_sysfs((dir / "missing").string()).l2 == 0u);
}

TEST_CASE("kernels/cache: this machine's caches are known (or the defaults)", "[kernels][cache]") {
  const kd::cache_sizes& c = kd::machine_caches();
  CHECK(c.l1d >= 4096u);
  CHECK(c.l2 >= c.l1d);
  CHECK(c.l3 > 0u);
}

TEST_CASE("kernels/cache: the GEMM's blocks follow the caches", "[kernels][cache]") {
  using blk = kd::gemm_blocking<6, 64, 480, 1024, 8192>;
  // 1 MiB L2, 32 MiB L3 (AMD Zen 4/5): KC = min(1024, 512 Ki / (88 * 4)) =
  // 1024; MC = 512 Ki / 4096 - 64 = 64, down to a multiple of 6: 60;
  // NC = 8 Mi / 4096 = 2048.
  kd::cache_blocks b = kd::cache_blocks_for<float, blk>({48u << 10, 1u << 20, 32u << 20});
  CHECK(b.kc == 1024u);
  CHECK(b.mc == 60u);
  CHECK(b.nc == 2048u);
  // 256 KiB L2, 8 MiB L3: KC = 128 Ki / 352 = 372; MC = 128 Ki / 1488 = 88,
  // minus 64 = 24; NC = 2 Mi / 1488 = 1409, down to a multiple of 64: 1408.
  b = kd::cache_blocks_for<float, blk>({32u << 10, 256u << 10, 8u << 20});
  CHECK(b.kc == 372u);
  CHECK(b.mc == 24u);
  CHECK(b.nc == 1408u);
  // Doubles, 6 x 32 on 1 MiB / 32 MiB: KC = min(1024, 512 Ki / (56 * 8)) =
  // 1024; MC = 512 Ki / 8192 - 32 = 32, down to 30; NC = 8 Mi / 8192 = 1024.
  b = kd::cache_blocks_for<double, kd::gemm_blocking<6, 32, 240, 1024, 4096>>({48u << 10, 1u << 20, 32u << 20});
  CHECK(b.kc == 1024u);
  CHECK(b.mc == 30u);
  CHECK(b.nc == 1024u);
  // A huge cache is capped by the blocking's maxima; a tiny one gives a
  // shallow KC.
  b = kd::cache_blocks_for<float, blk>({1u << 20, 1u << 30, 1u << 31});
  CHECK(b.kc == 1024u);
  CHECK(b.mc == 480u);
  CHECK(b.nc == 8192u);
  b = kd::cache_blocks_for<float, blk>({1u << 10, 4u << 10, 16u << 10});
  CHECK(b.kc == 5u);   // 2 Ki / 352
  CHECK(b.mc == 36u);  // 2 Ki / 20 = 102, minus 64 = 38, down to 36
  CHECK(b.nc == 192u);  // 4 Ki / 20 = 204, down to a multiple of 64
}
