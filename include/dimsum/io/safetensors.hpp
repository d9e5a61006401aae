#pragma once
/// \file
/// The name-free `.safetensors` format layer: read, validate and write the
/// file as the public specification (huggingface/safetensors, README
/// "Format") describes it:
///
///     8 bytes   N, the header length, unsigned little-endian
///     N bytes   a JSON object (UTF-8, may be padded with spaces):
///               {"__metadata__": {"key": "value", ...},          (optional)
///                "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
///     rest      the byte buffer; offsets are relative to its start, data
///               is little-endian in C order
///
/// Reading is strict, and every problem is a `dimsum::safetensors_error`
/// naming the file: shorter than 8 bytes, a header length past the end of
/// the file (or above 100 MB), a header that is not a JSON object, JSON
/// nested deeper than 128 levels (the reference reader's bound), a NUL byte
/// or anything but JSON whitespace after the object, a name given twice in
/// one object (a tensor name, a field of an entry, a metadata key), an entry without exactly `dtype`, `shape` and
/// `data_offsets`, an unknown dtype, offsets whose length is not the
/// shape's byte count, and offsets that do not tile the buffer exactly
/// (overlapping, leaving a gap, out of range, or trailing bytes), which is
/// the check the reference implementation makes. Nothing is allocated
/// beyond the file's size. Writing is atomic: the file is written to a
/// temporary in the same directory, flushed, and renamed over the
/// destination (and the directory synced after the rename), so a failed
/// save leaves an existing file intact and a finished one survives a crash.
/// The named layer (module state dicts) is in <dimsum/io/state_dict.hpp>.

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#if __has_include(<unistd.h>)
#include <unistd.h>
#endif

#include <dimsum/core/bf16.hpp>
#include <dimsum/core/errors.hpp>
#include <dimsum/io/detail/file_sync.hpp>

namespace dimsum {

/// A `.safetensors` file could not be read or written: missing, truncated,
/// malformed header, bad offsets, unknown dtype. The message names the file.
struct safetensors_error : error {
  using error::error;
};

/// One tensor of a `.safetensors` file: its dtype string ("F32", "F64",
/// "I64", ...), its shape, and its bytes (little-endian, C order).
struct safetensors_tensor {
  std::string dtype;
  std::vector<std::size_t> shape;
  std::vector<std::byte> data;
};

/// The contents of a `.safetensors` file: the `__metadata__` strings and
/// the tensors by name.
struct safetensors_contents {
  std::map<std::string, std::string> metadata;
  std::map<std::string, safetensors_tensor> tensors;
};

/// The element size in bytes of a safetensors dtype string, or 0 if the
/// specification does not define it. The dtypes: BOOL, U8, I8, F8_E5M2,
/// F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64.
constexpr std::size_t safetensors_dtype_size(std::string_view dtype) {
  constexpr std::pair<std::string_view, std::size_t> table[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4},  {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  for (const auto& [name, size] : table)
    if (name == dtype) return size;
  return 0;
}

/// The safetensors dtype string of the C++ type `T` ("F32" for float, "F64"
/// for double, "I64" for std::int64_t, "BF16" for dimsum::bf16, ...); only
/// the types that the format names have one.
template <class T>
inline constexpr std::string_view safetensors_dtype_v = [] {
  if constexpr (std::is_same_v<T, float>) return std::string_view("F32");
  else if constexpr (std::is_same_v<T, double>) return std::string_view("F64");
  else if constexpr (std::is_same_v<T, std::int8_t>) return std::string_view("I8");
  else if constexpr (std::is_same_v<T, std::int16_t>) return std::string_view("I16");
  else if constexpr (std::is_same_v<T, std::int32_t>) return std::string_view("I32");
  else if constexpr (std::is_same_v<T, std::int64_t>) return std::string_view("I64");
  else if constexpr (std::is_same_v<T, std::uint8_t>) return std::string_view("U8");
  else if constexpr (std::is_same_v<T, std::uint16_t>) return std::string_view("U16");
  else if constexpr (std::is_same_v<T, std::uint32_t>) return std::string_view("U32");
  else if constexpr (std::is_same_v<T, std::uint64_t>) return std::string_view("U64");
  else if constexpr (std::is_same_v<T, bf16>) return std::string_view("BF16");
  else return std::string_view();
}();

namespace io::detail {

[[noreturn]] inline void throw_safetensors_error(std::string_view source, std::string_view what) {
  std::string message = "safetensors file '";
  message.append(source);
  message.append("': ");
  message.append(what);
  throw safetensors_error(message);
}

/// The largest header accepted (the reference implementation's limit).
inline constexpr std::uint64_t safetensors_max_header = 100'000'000;
/// The deepest nesting of JSON arrays and objects accepted in a header (the
/// header object itself is level 1); a valid header needs 3.
inline constexpr std::size_t safetensors_max_depth = 128;

// Whether the JSON text [p, p + n) nests arrays and objects deeper than
// `limit` levels (brackets inside strings do not count). A linear scan
// that allocates nothing and stops at the first bracket too deep: the
// parser, run after it, needs memory in proportion to the depth.
inline bool json_nests_deeper_than(const char* p, std::size_t n, std::size_t limit) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = p[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

inline std::uint64_t read_le64(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | std::uint64_t(std::to_integer<unsigned char>(p[i]));
  return v;
}

// Copies `count` values of T from little-endian bytes (or to them: the
// swap is its own inverse).
template <class T>
void copy_le_bytes(const std::byte* from, T* to, std::size_t count) {
  if (count == 0) return;  // an empty tensor's pointers may be null, which memcpy may not get
  std::memcpy(static_cast<void*>(to), from, count * sizeof(T));
  if constexpr (std::endian::native == std::endian::big && sizeof(T) > 1)
    for (std::size_t i = 0; i < count; ++i) {
      auto* b = reinterpret_cast<unsigned char*>(to + i);
      std::reverse(b, b + sizeof(T));
    }
}

// A JSON number that is a non-negative integer, or an error naming `what`.
inline std::uint64_t json_size(std::string_view source, const nlohmann::json& j, const std::string& what) {
  if (!j.is_number_unsigned()) throw_safetensors_error(source, what + " is not a non-negative integer");
  return j.get<std::uint64_t>();
}

}  // namespace io::detail

/// Parses the bytes of a `.safetensors` file (`source` names it in errors)
/// and validates everything the format requires; see the file comment.
inline safetensors_contents parse_safetensors(const std::byte* bytes, std::size_t size, std::string_view source) {
  using io::detail::throw_safetensors_error;
  using nlohmann::json;
  if (size < 8)
    throw_safetensors_error(source, "truncated: " + std::to_string(size) +
                                        " bytes, shorter than the 8-byte header length");
  const std::uint64_t n = io::detail::read_le64(bytes);
  if (n > size - 8)
    throw_safetensors_error(source, "header length " + std::to_string(n) + " runs past the end of the file (" +
                                        std::to_string(size - 8) + " bytes follow the length)");
  if (n > io::detail::safetensors_max_header)
    throw_safetensors_error(source, "header length " + std::to_string(n) + " exceeds the 100 MB limit");
  const char* header = reinterpret_cast<const char*>(bytes + 8);
  if (n == 0 || header[0] != '{') throw_safetensors_error(source, "the header is not a JSON object");
  // JSON text has no NUL byte, but the parser takes one for the end of its
  // input, which would let padding other than spaces through.
  if (const void* nul = std::memchr(header, 0, std::size_t(n)))
    throw_safetensors_error(source, "the header has a NUL byte at offset " +
                                        std::to_string(static_cast<const char*>(nul) - header) +
                                        " (it may be padded with spaces only)");
  if (io::detail::json_nests_deeper_than(header, std::size_t(n), io::detail::safetensors_max_depth))
    throw_safetensors_error(source, "the header nests arrays and objects deeper than " +
                                        std::to_string(io::detail::safetensors_max_depth) + " levels");
  // A name given twice in one object would silently keep the last: reject
  // it in every object (tensor names, an entry's fields, metadata keys).
  // One set of keys per open object; the depth bound bounds the stack.
  std::vector<std::set<std::string>> keys;
  std::string top_key;  // the tensor name (or __metadata__) being parsed
  std::string duplicate;
  json::parser_callback_t on_key = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      keys.pop_back();
    } else if (event == json::parse_event_t::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (depth == 1) top_key = key;
      if (!keys.back().insert(key).second && duplicate.empty())
        duplicate = depth == 1 ? "the header names '" + key + "' twice" : "'" + top_key + "' names '" + key + "' twice";
    }
    return true;
  };
  json h;
  try {
    h = json::parse(header, header + n, on_key);
  } catch (const json::exception& e) {
    throw_safetensors_error(source, std::string("the header is not valid JSON: ") + e.what());
  }
  if (!h.is_object()) throw_safetensors_error(source, "the header is not a JSON object");
  if (!duplicate.empty()) throw_safetensors_error(source, duplicate);

  const std::size_t buffer_size = size - 8 - std::size_t(n);
  const std::byte* buffer = bytes + 8 + n;
  safetensors_contents out;
  struct span_of {
    std::uint64_t begin, end;
    std::string name;
  };
  std::vector<span_of> spans;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& entry = it.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) throw_safetensors_error(source, "__metadata__ is not an object of strings");
      for (auto m = entry.begin(); m != entry.end(); ++m) {
        if (!m.value().is_string())
          throw_safetensors_error(source, "__metadata__ value of '" + m.key() + "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string what = "tensor '" + name + "'";
    if (!entry.is_object() || entry.size() != 3 || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets"))
      throw_safetensors_error(source, what + " must be an object with exactly dtype, shape and data_offsets");
    if (!entry["dtype"].is_string()) throw_safetensors_error(source, what + ": dtype is not a string");
    safetensors_tensor t;
    t.dtype = entry["dtype"].get<std::string>();
    const std::size_t element = safetensors_dtype_size(t.dtype);
    if (element == 0) throw_safetensors_error(source, what + ": unknown dtype \"" + t.dtype + "\"");
    if (!entry["shape"].is_array()) throw_safetensors_error(source, what + ": shape is not an array");
    std::uint64_t count = 1;
    bool overflow = false;
    for (const auto& e : entry["shape"]) {
      const std::uint64_t extent = io::detail::json_size(source, e, what + ": a shape entry");
      t.shape.push_back(std::size_t(extent));
      if (extent != 0 && count > std::numeric_limits<std::uint64_t>::max() / extent) overflow = true;
      count *= extent;
    }
    if (overflow || count > std::numeric_limits<std::uint64_t>::max() / element)
      throw_safetensors_error(source, what + ": the shape's byte count overflows");
    const json& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2)
      throw_safetensors_error(source, what + ": data_offsets is not an array [begin, end]");
    const std::uint64_t begin = io::detail::json_size(source, offsets[0], what + ": data_offsets[0]");
    const std::uint64_t end = io::detail::json_size(source, offsets[1], what + ": data_offsets[1]");
    if (begin > end)
      throw_safetensors_error(source, what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                          "] end before they begin");
    if (end - begin != count * element)
      throw_safetensors_error(source, what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                          "] hold " + std::to_string(end - begin) + " bytes but " + t.dtype +
                                          " of this shape needs " + std::to_string(count * element));
    if (end > buffer_size)
      throw_safetensors_error(source, what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                          "] are out of range: the data buffer has " + std::to_string(buffer_size) +
                                          " bytes");
    spans.push_back({begin, end, name});
    out.tensors.emplace(name, std::move(t));
  }
  // The tensors must tile the buffer: sorted by offset, each starts where
  // the previous ended, and the last ends at the end of the file.
  std::sort(spans.begin(), spans.end(), [](const span_of& a, const span_of& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t at = 0;
  for (const auto& s : spans) {
    if (s.begin < at)
      throw_safetensors_error(source, "tensor '" + s.name + "': data_offsets [" + std::to_string(s.begin) + ", " +
                                          std::to_string(s.end) + "] overlap the previous tensor, which ends at " +
                                          std::to_string(at));
    if (s.begin > at)
      throw_safetensors_error(source, "tensor '" + s.name + "': data_offsets [" + std::to_string(s.begin) + ", " +
                                          std::to_string(s.end) + "] leave a gap after byte " + std::to_string(at));
    at = s.end;
  }
  if (at != buffer_size)
    throw_safetensors_error(source, "the data buffer has " + std::to_string(buffer_size) +
                                        " bytes but the tensors cover " + std::to_string(at) + " (trailing bytes)");
  for (const auto& s : spans) {
    auto& t = out.tensors[s.name];
    t.data.assign(buffer + s.begin, buffer + s.end);
  }
  return out;
}

/// Reads and validates a `.safetensors` file.
inline safetensors_contents read_safetensors(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) io::detail::throw_safetensors_error(path, "cannot be read: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) io::detail::throw_safetensors_error(path, "cannot be opened");
  std::vector<std::byte> bytes(size);
  in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(size));
  if (std::size_t(in.gcount()) != size) io::detail::throw_safetensors_error(path, "could not be read completely");
  return parse_safetensors(bytes.data(), bytes.size(), path);
}

/// The bytes of a `.safetensors` file holding `contents`: the tensors in
/// name order, contiguous, the header padded with spaces to a multiple of 8
/// bytes (as the reference writer aligns it). Throws `safetensors_error` if
/// a tensor's byte count does not match its dtype and shape, or a name or
/// metadata string is not valid UTF-8 (JSON needs it).
inline std::vector<std::byte> serialize_safetensors(const safetensors_contents& contents) {
  using nlohmann::json;
  json h = json::object();
  if (!contents.metadata.empty()) h["__metadata__"] = contents.metadata;
  std::uint64_t at = 0;
  for (const auto& [name, t] : contents.tensors) {
    if (name == "__metadata__") io::detail::throw_safetensors_error("(writing)", "a tensor cannot be named __metadata__");
    std::size_t count = 1;
    for (std::size_t e : t.shape) count *= e;
    const std::size_t element = safetensors_dtype_size(t.dtype);
    if (element == 0) io::detail::throw_safetensors_error("(writing)", "unknown dtype \"" + t.dtype + "\"");
    if (t.data.size() != count * element)
      io::detail::throw_safetensors_error("(writing)", "tensor '" + name + "' has " + std::to_string(t.data.size()) +
                                                           " bytes but its dtype and shape need " +
                                                           std::to_string(count * element));
    h[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {at, at + t.data.size()}}};
    at += t.data.size();
  }
  std::string header;
  try {
    header = h.dump();
  } catch (const json::exception& e) {  // a name or metadata string that is not valid UTF-8
    io::detail::throw_safetensors_error("(writing)", std::string("the header cannot be written as JSON: ") + e.what());
  }
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<std::byte> out(8 + header.size() + at);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[std::size_t(i)] = std::byte((n >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, header.data(), header.size());
  std::size_t pos = 8 + header.size();
  for (const auto& [name, t] : contents.tensors) {
    if (!t.data.empty()) std::memcpy(out.data() + pos, t.data.data(), t.data.size());
    pos += t.data.size();
  }
  return out;
}

namespace io::detail {

// Writes `bytes` to `path` atomically: a temporary file in the same
// directory, flushed to disk, then renamed over `path`. On any failure the
// temporary is removed, `path` is untouched, and `error_type` is thrown.
template <class Error>
void write_file_atomically(const std::string& path, const std::byte* bytes, std::size_t size) {
  namespace fs = std::filesystem;
  static std::atomic<unsigned> counter{0};
  const fs::path target(path);
  std::string tmp_name = "." + target.filename().string() + ".tmp";
#if __has_include(<unistd.h>)
  tmp_name += "." + std::to_string(::getpid());
#endif
  tmp_name += "." + std::to_string(counter++);
  const fs::path tmp = target.parent_path() / tmp_name;
  auto fail = [&](const std::string& what, std::FILE* f) {
    const std::string reason = std::strerror(errno);
    if (f) std::fclose(f);
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw Error("file '" + path + "': " + what + ": " + reason + "; the existing file, if any, is unchanged");
  };
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("cannot create the temporary file '" + tmp.string() + "'", nullptr);
  if (size && std::fwrite(bytes, 1, size, f) != size) fail("write failed", f);
  if (std::fflush(f) != 0) fail("write failed", f);
  if (!fsync_file(f)) fail("fsync failed", f);
  if (std::fclose(f) != 0) fail("close failed", nullptr);
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    errno = ec.value();
    fail("cannot rename the temporary file over it", nullptr);
  }
  fsync_directory(target.parent_path());
}

}  // namespace io::detail

/// Writes `contents` to `path` as a `.safetensors` file, atomically (see
/// the file comment). Throws `safetensors_error` on failure.
inline void write_safetensors(const std::string& path, const safetensors_contents& contents) {
  const auto bytes = serialize_safetensors(contents);
  io::detail::write_file_atomically<safetensors_error>(path, bytes.data(), bytes.size());
}

}  // namespace dimsum
