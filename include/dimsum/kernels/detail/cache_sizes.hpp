#pragma once
/// \file
/// The data cache sizes of the machine the program runs on, read once
/// (sysconf, else /sys/devices/system/cpu/cpu0/cache), for the GEMM's cache
/// blocking (gemm_driver.hpp).

#include <cstddef>
#include <fstream>
#include <string>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace dimsum::kernels::detail {

/// Bytes of each level's data cache as one core sees it (L3 shared).
struct cache_sizes {
  std::size_t l1d = 0, l2 = 0, l3 = 0;
};

/// "48K", "1024K", "32M" (the sysfs format) in bytes; 0 if unreadable.
inline std::size_t parse_cache_size(const std::string& text) {
  std::size_t value = 0, i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') value = value * 10 + std::size_t(text[i++] - '0');
  if (i == 0) return 0;
  if (i < text.size() && (text[i] == 'K' || text[i] == 'k')) return value << 10;
  if (i < text.size() && (text[i] == 'M' || text[i] == 'm')) return value << 20;
  return value;
}

/// The caches of cpu0 from sysfs (Linux): index<i>/level, type and size.
inline cache_sizes caches_from_sysfs(const std::string& dir = "/sys/devices/system/cpu/cpu0/cache") {
  cache_sizes c;
  for (int i = 0; i < 8; ++i) {
    const std::string base = dir + "/index" + std::to_string(i) + "/";
    std::ifstream level_in(base + "level"), type_in(base + "type"), size_in(base + "size");
    int level = 0;
    std::string type, size;
    if (!(level_in >> level) || !(type_in >> type) || !(size_in >> size)) continue;
    if (type == "Instruction") continue;
    const std::size_t bytes = parse_cache_size(size);
    if (level == 1) c.l1d = bytes;
    if (level == 2) c.l2 = bytes;
    if (level == 3) c.l3 = bytes;
  }
  return c;
}

/// This machine's caches, read on first use: sysconf, then sysfs for what
/// sysconf does not report, then 32 KiB / 1 MiB / 8 MiB for what neither does.
inline const cache_sizes& machine_caches() {
  static const cache_sizes c = [] {
    cache_sizes s;
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
    auto conf = [](int name) {
      const long v = ::sysconf(name);
      return v > 0 ? std::size_t(v) : std::size_t(0);
    };
    s = {conf(_SC_LEVEL1_DCACHE_SIZE), conf(_SC_LEVEL2_CACHE_SIZE), conf(_SC_LEVEL3_CACHE_SIZE)};
#endif
    if (s.l1d == 0 || s.l2 == 0 || s.l3 == 0) {
      const cache_sizes fs = caches_from_sysfs();
      if (s.l1d == 0) s.l1d = fs.l1d;
      if (s.l2 == 0) s.l2 = fs.l2;
      if (s.l3 == 0) s.l3 = fs.l3;
    }
    if (s.l1d == 0) s.l1d = std::size_t(32) << 10;
    if (s.l2 == 0) s.l2 = std::size_t(1) << 20;
    if (s.l3 == 0) s.l3 = std::size_t(8) << 20;
    return s;
  }();
  return c;
}

}  // namespace dimsum::kernels::detail
