// libFuzzer harness for the .npy reader (include/dimsum/io/detail/npy_format.hpp).
//
// Every input must either load or end in dimsum::npy_error. Any other
// exception escapes and aborts (libFuzzer reports it as a crash), and so does
// a sanitizer report, a leak, a huge allocation (-malloc_limit_mb in
// tests/fuzz/run), or a broken property:
// - reading from memory (read_npy_bytes) and from a file (read_npy) agree:
//   same elements, or the same error message;
// - a loaded array accounts for every byte of the input, and survives a
//   write/read round trip bit for bit;
// - a Fortran-order array is transposed into C order: each element is the
//   file's element at the Fortran offset of its multi-index.
// Build and run with tests/fuzz/run.

#include <dimsum/io/detail/npy_format.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>
#include <string>
#include <string_view>

#include <unistd.h>

namespace {

namespace npy = dimsum::io::detail;

[[noreturn]] void property_failed(const char* what) {
  std::fprintf(stderr, "npy_fuzz: property failed: %s\n", what);
  std::abort();
}

/// Where each input is written for read_npy: $DIMSUM_NPY_FUZZ_SCRATCH_DIR
/// (tests/fuzz/run makes and removes one), else /dev/shm or /tmp.
const std::string& scratch_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("DIMSUM_NPY_FUZZ_SCRATCH_DIR");
    if (dir == nullptr || *dir == '\0') dir = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    return std::string(dir) + "/dimsum_npy_fuzz_" + std::to_string(::getpid()) + ".npy";
  }();
  static const bool cleanup_registered = std::atexit([] { std::remove(path.c_str()); }) == 0;
  (void)cleanup_registered;
  return path;
}

/// "ok" plus the shape and element bytes, or "error: " plus the message.
template <class T>
std::string outcome(const npy::npy_array<T>* a, const dimsum::npy_error* e) {
  if (e != nullptr) return std::string("error: ") + e->what();
  std::string out = "ok " + npy::npy_shape_string(a->shape, a->shape.size()) + " ";
  for (std::size_t i = 0; i < a->data.size(); ++i) {
    const T x = a->data[i];
    out.append(reinterpret_cast<const char*>(&x), sizeof(T));
  }
  return out;
}

template <class T, class Read>
std::string read_outcome(Read read, npy::npy_array<T>& a) {
  try {
    a = read();
  } catch (const dimsum::npy_error& e) {
    return outcome<T>(nullptr, &e);
  }
  return outcome<T>(&a, nullptr);
}

template <class T>
void check_read(std::string_view bytes, bool also_from_file) {
  const std::string& path = scratch_path();
  npy::npy_array<T> a;
  const std::string from_memory = read_outcome<T>([&] { return npy::read_npy_bytes<T>(bytes, path); }, a);
  if (also_from_file) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
      property_failed("cannot write the scratch file");
    }
    npy::npy_array<T> b;
    if (read_outcome<T>([&] { return npy::read_npy<T>(path); }, b) != from_memory) {
      property_failed("read_npy and read_npy_bytes disagree");
    }
  }
  if (from_memory.rfind("error: ", 0) == 0) return;

  // Loaded: the shape accounts for every element and for every data byte.
  std::size_t count = 1;
  for (const std::size_t extent : a.shape) count *= extent;  // cannot overflow: checked on read
  if (a.data.size() != count) property_failed("element count differs from the shape's product");
  const npy::npy_header h = npy::parse_npy_header(bytes, "fuzz input");
  if (h.data_offset + count * sizeof(T) != bytes.size()) property_failed("data size differs from the input");

  // Fortran order (native byte order, not bool): element i, in C order, is
  // the file's element at the Fortran offset of i's multi-index.
  if constexpr (!std::is_same_v<T, bool>) {
    if (h.fortran_order && npy::npy_descr_matches<T>(h.descr) == std::optional<bool>(false)) {
      const std::size_t rank = a.shape.size();
      for (std::size_t i = 0; i < count; ++i) {
        std::size_t rest = i, offset = 0, step = 1;
        std::vector<std::size_t> idx(rank);
        for (std::size_t k = rank; k-- > 0;) {
          idx[k] = rest % a.shape[k];
          rest /= a.shape[k];
        }
        for (std::size_t k = 0; k < rank; ++k) {
          offset += idx[k] * step;
          step *= a.shape[k];
        }
        const T x = a.data[i];
        if (std::memcmp(&x, bytes.data() + h.data_offset + offset * sizeof(T), sizeof(T)) != 0)
          property_failed("a Fortran-order element is not where its multi-index puts it");
      }
    }
  }

  // Writing what was read and reading it back gives the same elements, bit for bit.
  auto copy = std::make_unique<T[]>(count + 1);
  for (std::size_t i = 0; i < count; ++i) copy[i] = a.data[i];
  npy::npy_array<T> b;
  if (read_outcome<T>([&] { return npy::read_npy_bytes<T>(npy::npy_bytes(copy.get(), a.shape), path); }, b) !=
      from_memory) {
    property_failed("write/read round trip changed the array");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  npy::npy_header h;
  try {
    h = npy::parse_npy_header(bytes, "fuzz input");
  } catch (const dimsum::npy_error&) {
    // read_npy_bytes parses the same way first, so every T would throw the
    // same error; one call checks that (exceptions are slow under ASan).
    check_read<float>(bytes, true);
    return 0;
  }
  if (h.data_offset > bytes.size()) property_failed("data offset past the end");
  // float always (it exercises the wrong-dtype path for every other descr),
  // each other type when the header names it.
  check_read<float>(bytes, true);
  const auto read_if_named = [&](auto tag) {
    using T = decltype(tag);
    if (npy::npy_descr_matches<T>(h.descr)) check_read<T>(bytes, true);
  };
  read_if_named(double{});
  read_if_named(std::int32_t{});
  read_if_named(std::int64_t{});
  read_if_named(std::uint16_t{});
  read_if_named(std::uint8_t{});
  read_if_named(std::int8_t{});
  read_if_named(bool{});
  return 0;
}
