// Tests of kernels/detail/cache_sizes.hpp and the GEMM's run-time cache
// blocks (cache_blocks_for in kernels/detail/gemm_driver.hpp): expected
// values computed by hand from the rule in its comment.
#include <dimsum/kernels/gemm.hpp>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <type_traits>

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

namespace {
struct expected_blocks {
  kd::cache_sizes caches;
  std::size_t kc, mc, nc;
};
}  // namespace

TEST_CASE("kernels/cache: the GEMM's blocks follow the caches", "[kernels][cache]") {
  // The blocks of 6 x 64 floats (the AVX-512 GEMM tile) for several
  // machines, computed by hand.
  using blk = kd::gemm_blocking<6, 64, 480, 1024, 8192>;
  const expected_blocks cases[] = {
      // 1 MiB L2, 32 MiB L3 (AMD Zen 4/5): KC = min(1024, 512 Ki / (88 * 4))
      // = 1024; MC = 512 Ki / 4096 - 64 = 64, down to a multiple of 6: 60;
      // NC = 8 Mi / 4096 = 2048.
      {{48u << 10, 1u << 20, 32u << 20}, 1024, 60, 2048},
      // 256 KiB L2, 8 MiB L3: KC = 128 Ki / 352 = 372; MC = 128 Ki / 1488 =
      // 88, minus 64 = 24; NC = 2 Mi / 1488 = 1409, down to a multiple of 64.
      {{32u << 10, 256u << 10, 8u << 20}, 372, 24, 1408},
      // A huge cache is capped by the blocking's maxima.
      {{1u << 20, 1u << 30, 1u << 31}, 1024, 480, 8192},
      // A tiny one: KC = 2 Ki / 352 = 5; MC = 2 Ki / 20 = 102, minus 64 = 38,
      // down to 36; NC = 4 Ki / 20 = 204, down to 192.
      {{1u << 10, 4u << 10, 16u << 10}, 5, 36, 192},
  };
  for (const expected_blocks& e : cases) {
    INFO("L2 " << e.caches.l2 << ", L3 " << e.caches.l3);
    const kd::cache_blocks b = kd::cache_blocks_for<float, blk>(e.caches);
    CHECK(b.kc == e.kc);
    CHECK(b.mc == e.mc);
    CHECK(b.nc == e.nc);
  }
  // Doubles, 6 x 32 on 1 MiB / 32 MiB: KC = min(1024, 512 Ki / (56 * 8)) =
  // 1024; MC = 512 Ki / 8192 - 32 = 32, down to 30; NC = 8 Mi / 8192 = 1024.
  const kd::cache_blocks d =
      kd::cache_blocks_for<double, kd::avx512_tile<double, 6, 4>>({48u << 10, 1u << 20, 32u << 20});
  CHECK(d.kc == 1024u);
  CHECK(d.mc == 30u);
  CHECK(d.nc == 1024u);
  // The blocking the GEMM uses on AVX-512 is the one above.
  STATIC_REQUIRE(std::is_same_v<kd::avx512_tile<float, 6, 4>, blk>);
}
