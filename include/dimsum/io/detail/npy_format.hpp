#pragma once
/// \file
/// The name-free `.npy` format layer: parse and write the header, read and
/// write the raw element data. The named layer (dimsum/io) checks ranks and
/// extents by dim name on top of this.
///
/// Format reference: numpy/lib/format.py (NEP 1). Versions 1.0, 2.0 and 3.0
/// are read; 1.0 is written, or 2.0 when the header does not fit in 1.0's
/// 16-bit length, byte for byte as `np.save` writes it.
///
/// Policy, in the order the checks run when reading:
/// - every problem throws `dimsum::npy_error` whose message names the source
///   (the path, or the name given to `read_npy_bytes`) and what was expected;
/// - the header dict is parsed strictly but accepts everything numpy writes:
///   keys in any order, single or double quotes, whitespace, trailing commas,
///   `()`, `(5,)`, `True`/`False`. Exactly the keys 'descr', 'fortran_order'
///   and 'shape' must appear, once each (numpy rejects other keys too);
/// - the element count is checked for overflow as numpy does (the product
///   of the non-zero extents must fit in `std::ptrdiff_t`);
/// - the dtype must match `T` exactly; big-endian data ('>f4') is accepted
///   and byte-swapped, single-byte types accept '|', '<' and '>';
/// - Fortran order ('fortran_order': True, what np.save writes for a
///   transposed or np.asfortranarray array) is read and transposed into C
///   order, so `npy_array::data` is always C order of `shape`;
/// - the data after the header must be exactly the size the shape needs
///   (shorter is truncation, longer is trailing data); this is checked
///   against the available byte count before anything is allocated, so no
///   allocation is larger than the input.
/// - bool data: any non-zero byte reads as true (as numpy treats it).

#include <dimsum/core/errors.hpp>
#include <dimsum/io/detail/file_sync.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

namespace dimsum::io::detail {

static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big,
              "dimsum: .npy I/O needs a little- or big-endian platform");

/// What a `.npy` header says: the dtype string, the order, the shape, and
/// where the data starts (bytes from the start of the file).
struct npy_header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::size_t> shape;
  std::size_t data_offset = 0;
  unsigned major_version = 1;
  unsigned minor_version = 0;
};

/// The elements of a `.npy` file, in C order (a Fortran-order file is
/// transposed on reading), with their shape.
/// For `T = bool`, `data` is a `std::vector<bool>` (no `data()` pointer).
template <class T>
struct npy_array {
  std::vector<std::size_t> shape;
  std::vector<T> data;
};

/// Throws `npy_error` with the message "npy file '<source>': <what>". The
/// named layer uses it too, so every .npy message has the same shape.
[[noreturn]] inline void throw_npy_error(std::string_view source, std::string_view what) {
  std::string message = "npy file '";
  message.append(source);
  message.append("': ");
  message.append(what);
  throw npy_error(message);
}

/// `s` with bytes outside printable ASCII shown as \xNN, cut at `max_chars`.
inline std::string npy_printable(std::string_view s, std::size_t max_chars = 80) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  const std::size_t n = std::min(s.size(), max_chars);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    }
  }
  if (s.size() > max_chars) out += "...";
  return out;
}

/// "(2, 3)", "(5,)" or "()", as Python writes a tuple. Shapes longer than
/// `max_shown` are cut (for messages).
inline std::string npy_shape_string(const std::vector<std::size_t>& shape,
                                    std::size_t max_shown = 16) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size() && i < max_shown; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() > max_shown) out += ", ... (rank " + std::to_string(shape.size()) + ")";
  if (shape.size() == 1) out += ",";
  out += ")";
  return out;
}

/// A readable name for a numpy dtype string: "float32", "int64", "bool",
/// with ", big-endian" when the bytes are big-endian and it matters.
inline std::string npy_dtype_name(std::string_view descr) {
  std::string_view rest = descr;
  char order = '\0';
  if (!rest.empty() && (rest[0] == '<' || rest[0] == '>' || rest[0] == '|' || rest[0] == '=')) {
    order = rest[0];
    rest.remove_prefix(1);
  }
  if (rest.empty()) return "unrecognised";
  const char kind = rest[0];
  rest.remove_prefix(1);
  std::size_t size = 0;
  std::size_t digits = 0;
  while (digits < rest.size() && digits < 6 && rest[digits] >= '0' && rest[digits] <= '9') {
    size = size * 10 + static_cast<std::size_t>(rest[digits] - '0');
    ++digits;
  }
  const bool plain = digits > 0 && digits == rest.size();
  std::string name;
  switch (kind) {
    case 'f': name = plain ? "float" + std::to_string(size * 8) : ""; break;
    case 'i': name = plain ? "int" + std::to_string(size * 8) : ""; break;
    case 'u': name = plain ? "uint" + std::to_string(size * 8) : ""; break;
    case 'c': name = plain ? "complex" + std::to_string(size * 8) : ""; break;
    case 'b': name = plain && size == 1 ? "bool" : ""; break;
    case 'U': name = "unicode string"; break;
    case 'S': name = "byte string"; break;
    case 'V': name = "raw bytes"; break;
    case 'O': name = "Python object"; break;
    case 'M': name = "datetime64"; break;
    case 'm': name = "timedelta64"; break;
    default: break;
  }
  if (name.empty()) return "unrecognised";
  if (order == '>' && size > 1) name += ", big-endian";
  return name;
}

/// True for the element types `.npy` I/O supports: bool, float, double and
/// the signed and unsigned integers of 1, 2, 4 and 8 bytes (not plain char).
template <class T>
inline constexpr bool is_npy_element_v =
    std::is_same_v<T, bool> || std::is_same_v<T, float> || std::is_same_v<T, double> ||
    (std::is_integral_v<T> && !std::is_same_v<T, char> && !std::is_same_v<T, wchar_t> &&
     !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> && !std::is_same_v<T, char32_t> &&
     (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8));

/// The dtype string numpy writes for `T` in native byte order:
/// "<f4" float, "<f8" double, "<i4", "<i8", "|u1", "|i1", "|b1" bool, ...
template <class T>
std::string npy_descr() {
  static_assert(is_npy_element_v<T>,
                "dimsum: .npy I/O supports bool, float, double and the fixed-width integer types "
                "(std::int8_t ... std::uint64_t); plain char is not one of them");
  static_assert(sizeof(bool) == 1, "dimsum: .npy bool data needs a one-byte bool");
  const char order = sizeof(T) == 1 ? '|' : (std::endian::native == std::endian::little ? '<' : '>');
  char kind = 'u';
  if constexpr (std::is_same_v<T, bool>) {
    kind = 'b';
  } else if constexpr (std::is_floating_point_v<T>) {
    kind = 'f';
  } else if constexpr (std::is_signed_v<T>) {
    kind = 'i';
  }
  return std::string{order, kind} + std::to_string(sizeof(T));
}

/// Whether `descr` names `T`: nullopt if not, otherwise whether the bytes
/// must be swapped to native order.
template <class T>
std::optional<bool> npy_descr_matches(std::string_view descr) {
  const std::string want = npy_descr<T>();  // e.g. "<f4": order, kind, size
  if (descr.size() != want.size() || descr.substr(1) != std::string_view(want).substr(1)) {
    return std::nullopt;
  }
  if constexpr (sizeof(T) == 1) {
    if (descr[0] == '|' || descr[0] == '<' || descr[0] == '>') return false;
    return std::nullopt;
  } else {
    if (descr[0] == want[0]) return false;
    if (descr[0] == '<' || descr[0] == '>') return true;
    return std::nullopt;
  }
}

/// Number of elements of `shape`, or nullopt if numpy would call the array
/// too big: the product of the non-zero extents exceeds PTRDIFF_MAX.
inline std::optional<std::size_t> npy_element_count(const std::vector<std::size_t>& shape) {
  constexpr auto limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
  std::size_t nonzero_product = 1;
  bool any_zero = false;
  for (const std::size_t extent : shape) {
    if (extent == 0) {
      any_zero = true;
      continue;
    }
    if (nonzero_product > limit / extent) return std::nullopt;
    nonzero_product *= extent;
  }
  return any_zero ? 0 : nonzero_product;
}

namespace npy_impl {

inline constexpr std::string_view magic = "\x93NUMPY";

/// Reads the header dict, e.g. "{'descr': '<f4', 'fortran_order': False,
/// 'shape': (2, 3), }" plus padding. Not recursive: the grammar is flat.
class header_parser {
 public:
  header_parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  void parse(npy_header& out) {
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    if (at_end() || text_[pos_] != '{') fail("expected '{' to open the header dictionary");
    ++pos_;
    for (;;) {
      skip_space();
      if (at_end()) fail("the dictionary is not closed (missing '}')");
      if (text_[pos_] == '}') break;
      if (text_[pos_] != '\'' && text_[pos_] != '"') fail("expected a quoted key or '}'");
      const std::string key = parse_string("a key");
      skip_space();
      if (at_end() || text_[pos_] != ':') fail("expected ':' after key '" + npy_printable(key) + "'");
      ++pos_;
      skip_space();
      if (key == "descr") {
        take_once(have_descr, key);
        parse_descr(out.descr);
      } else if (key == "fortran_order") {
        take_once(have_order, key);
        out.fortran_order = parse_bool(key);
      } else if (key == "shape") {
        take_once(have_shape, key);
        parse_shape(out.shape);
      } else {
        fail("unexpected key '" + npy_printable(key) +
             "' (a .npy header has exactly 'descr', 'fortran_order' and 'shape')");
      }
      skip_space();
      if (at_end()) fail("the dictionary is not closed (missing '}')");
      if (text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (text_[pos_] != '}') fail("expected ',' or '}' after the value of '" + key + "'");
    }
    ++pos_;  // the closing '}'
    skip_space();
    if (!at_end()) fail("unexpected text after the closing '}'");
    if (!have_descr) fail_whole("missing key 'descr'");
    if (!have_order) fail_whole("missing key 'fortran_order'");
    if (!have_shape) fail_whole("missing key 'shape'");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw_npy_error(source_, "malformed header: " + what + " at byte " + std::to_string(pos_) + " of the header " +
                                 shown_text());
  }
  [[noreturn]] void fail_whole(const std::string& what) const {
    throw_npy_error(source_, "malformed header: " + what + " in the header " + shown_text());
  }
  // The header in double quotes, without numpy's padding, cut when long.
  std::string shown_text() const {
    std::string_view text = text_;
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    return '"' + npy_printable(text, 160) + '"';
  }

  bool at_end() const { return pos_ >= text_.size(); }
  static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_word(char c) {
    return is_digit(c) || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
  void skip_space() {
    while (!at_end() && is_space(text_[pos_])) ++pos_;
  }

  void take_once(bool& seen, const std::string& key) const {
    if (seen) fail("duplicate key '" + key + "'");
    seen = true;
  }

  // A Python string literal without prefixes or escapes, in ' or " quotes.
  std::string parse_string(std::string_view what) {
    const char quote = text_[pos_];
    const std::size_t start = ++pos_;
    for (; !at_end(); ++pos_) {
      const char c = text_[pos_];
      if (c == quote) {
        std::string value(text_.substr(start, pos_ - start));
        ++pos_;
        return value;
      }
      if (c == '\\') fail("backslash escapes are not supported in " + std::string(what));
      if (c == '\n' || c == '\r') break;
    }
    fail("unterminated string in " + std::string(what) + " (no closing " + quote + ")");
  }

  void parse_descr(std::string& descr) {
    if (at_end()) fail("expected a value for 'descr'");
    const char c = text_[pos_];
    if (c == '[') {
      fail("structured dtypes are not supported ('descr' is a list of fields); save a plain numeric "
           "array");
    }
    if (c != '\'' && c != '"') fail("'descr' must be a quoted dtype string such as '<f4'");
    descr = parse_string("'descr'");
  }

  bool parse_bool(const std::string& key) {
    const std::string_view rest = text_.substr(pos_);
    for (const std::string_view word : {std::string_view("True"), std::string_view("False")}) {
      if (rest.substr(0, word.size()) == word && (rest.size() == word.size() || !is_word(rest[word.size()]))) {
        pos_ += word.size();
        return word == "True";
      }
    }
    fail("'" + key + "' must be True or False");
  }

  void parse_shape(std::vector<std::size_t>& shape) {
    if (at_end() || text_[pos_] != '(') {
      if (!at_end() && is_digit(text_[pos_])) {
        fail("'shape' must be a tuple such as (5,) or (2, 3), not a bare integer");
      }
      fail("'shape' must be a tuple of integers such as (), (5,) or (2, 3)");
    }
    ++pos_;
    bool trailing_comma = false;
    for (;;) {
      skip_space();
      if (at_end()) fail("unterminated tuple in 'shape' (missing ')')");
      if (text_[pos_] == ')') break;
      shape.push_back(parse_extent());
      skip_space();
      if (at_end()) fail("unterminated tuple in 'shape' (missing ')')");
      trailing_comma = text_[pos_] == ',';
      if (trailing_comma) {
        ++pos_;
      } else if (text_[pos_] != ')') {
        fail("expected ',' or ')' after an extent in 'shape'");
      }
    }
    if (shape.size() == 1 && !trailing_comma) {
      fail("'shape' (" + std::to_string(shape[0]) +
           ") is an integer in parentheses, not a tuple; a 1-d shape is written (" +
           std::to_string(shape[0]) + ",)");
    }
    ++pos_;  // the closing ')'
  }

  std::size_t parse_extent() {
    if (text_[pos_] == '-') fail("negative extent in 'shape'");
    if (!is_digit(text_[pos_])) fail("expected an integer or ')' in 'shape'");
    if (text_[pos_] == '0' && pos_ + 1 < text_.size() && is_digit(text_[pos_ + 1])) {
      fail("leading zeros are not allowed in 'shape' (Python rejects them too)");
    }
    std::size_t value = 0;
    constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
    for (; !at_end() && is_digit(text_[pos_]); ++pos_) {
      const auto digit = static_cast<std::size_t>(text_[pos_] - '0');
      if (value > (max - digit) / 10) fail("extent in 'shape' does not fit in std::size_t");
      value = value * 10 + digit;
    }
    if (!at_end() && (is_word(text_[pos_]) || text_[pos_] == '.')) {
      fail("extents in 'shape' must be plain decimal integers");
    }
    return value;
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t pos_ = 0;
};

struct preamble {
  unsigned major = 0;
  unsigned minor = 0;
  std::size_t header_offset = 0;  // where the header dict starts
  std::size_t header_length = 0;
};

/// Reads magic, version and header length from `prefix`, which holds the
/// first min(total_size, 12) bytes of an input of `total_size` bytes.
inline preamble parse_preamble(std::string_view prefix, std::size_t total_size, std::string_view source) {
  if (total_size == 0) throw_npy_error(source, "the file is empty; a .npy file starts with \\x93NUMPY");
  if (total_size < magic.size() || prefix.substr(0, magic.size()) != magic) {
    throw_npy_error(source, "not a .npy file: it starts with '" +
                                npy_printable(prefix.substr(0, magic.size())) +
                                "' instead of the magic string '\\x93NUMPY'");
  }
  if (total_size < magic.size() + 2) {
    throw_npy_error(source, "truncated: the file ends inside the format version (" +
                                std::to_string(total_size) + " bytes)");
  }
  preamble p;
  p.major = static_cast<unsigned char>(prefix[6]);
  p.minor = static_cast<unsigned char>(prefix[7]);
  if (p.minor != 0 || p.major < 1 || p.major > 3) {
    throw_npy_error(source, "unsupported .npy format version " + std::to_string(p.major) + "." +
                                std::to_string(p.minor) + " (dimsum reads versions 1.0, 2.0 and 3.0)");
  }
  const std::size_t length_bytes = p.major == 1 ? 2 : 4;
  p.header_offset = magic.size() + 2 + length_bytes;
  if (total_size < p.header_offset) {
    throw_npy_error(source, "truncated: the file ends inside the header length field (" +
                                std::to_string(total_size) + " bytes)");
  }
  for (std::size_t i = 0; i < length_bytes; ++i) {  // little-endian in every version
    p.header_length |= static_cast<std::size_t>(static_cast<unsigned char>(prefix[8 + i])) << (8 * i);
  }
  if (p.header_length > total_size - p.header_offset) {
    throw_npy_error(source, "header length " + std::to_string(p.header_length) +
                                " runs past the end of the file (only " +
                                std::to_string(total_size - p.header_offset) + " bytes follow the " +
                                std::to_string(p.header_offset) + "-byte preamble)");
  }
  return p;
}

/// What reading `h` as `T` needs: element count, data bytes, byte swap.
struct data_plan {
  std::size_t count = 0;
  std::size_t bytes = 0;
  bool swap = false;
};

/// Checks dtype, order and data size of `h` against `T` and the `available`
/// bytes after the header. Runs before any allocation.
template <class T>
data_plan plan_read(const npy_header& h, std::size_t available, std::string_view source) {
  const std::optional<bool> swap = npy_descr_matches<T>(h.descr);
  if (!swap) {
    const std::string want = npy_descr<T>();
    throw_npy_error(source, "expected '" + want + "' (" + npy_dtype_name(want) + ") but the file has '" +
                                npy_printable(h.descr, 40) + "' (" + npy_dtype_name(h.descr) + ")");
  }
  data_plan plan;
  plan.swap = *swap;
  const std::optional<std::size_t> count = npy_element_count(h.shape);
  constexpr auto limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
  if (!count || *count > limit / sizeof(T)) {
    throw_npy_error(source, "shape " + npy_shape_string(h.shape) + " of '" + npy_printable(h.descr, 40) +
                                "' is too big: its byte count overflows");
  }
  plan.count = *count;
  plan.bytes = *count * sizeof(T);
  const std::string what = "shape " + npy_shape_string(h.shape) + " of '" + npy_descr<T>() + "' needs " +
                           std::to_string(plan.bytes) + " data bytes but the file has ";
  if (available < plan.bytes) {
    throw_npy_error(source, "truncated data: " + what + "only " + std::to_string(available));
  }
  if (available > plan.bytes) {
    throw_npy_error(source, "trailing data: " + what + std::to_string(available) +
                                " (the header's shape or dtype does not match the data)");
  }
  return plan;
}

template <class T>
void swap_bytes(T* values, std::size_t count) {
  unsigned char buffer[sizeof(T)];
  for (std::size_t i = 0; i < count; ++i) {
    std::memcpy(buffer, values + i, sizeof(T));
    std::reverse(buffer, buffer + sizeof(T));
    std::memcpy(values + i, buffer, sizeof(T));
  }
}

/// Reorders `data`, the elements of `shape` in Fortran order (first axis
/// fastest), into C order (last axis fastest). Nothing to do when at most
/// one extent differs from 1: both orders are the same sequence then.
template <class Vector>
void fortran_to_c(Vector& data, const std::vector<std::size_t>& shape) {
  const std::size_t rank = shape.size();
  if (std::count_if(shape.begin(), shape.end(), [](std::size_t e) { return e != 1; }) <= 1 || data.empty()) return;
  // Fortran strides: axis i steps over the product of the extents before it.
  std::vector<std::size_t> stride(rank, 1);
  for (std::size_t i = 1; i < rank; ++i) stride[i] = stride[i - 1] * shape[i - 1];
  Vector out(data.size());
  std::vector<std::size_t> idx(rank, 0);
  std::size_t from = 0;  // the Fortran offset of idx
  for (std::size_t to = 0; to < out.size(); ++to) {
    out[to] = data[from];
    // Odometer in C order (last axis fastest), keeping `from` in step.
    for (std::size_t i = rank; i-- > 0;) {
      if (++idx[i] < shape[i]) {
        from += stride[i];
        break;
      }
      from -= (shape[i] - 1) * stride[i];
      idx[i] = 0;
    }
  }
  data.swap(out);
}

/// Decodes `plan.bytes` bytes at `raw` into `out.data`.
template <class T>
void decode(const char* raw, const data_plan& plan, npy_array<T>& out) {
  if constexpr (std::is_same_v<T, bool>) {
    // A bool object may only hold 0 or 1; numpy reads any non-zero byte as True.
    out.data.resize(plan.count);
    for (std::size_t i = 0; i < plan.count; ++i) out.data[i] = raw[i] != 0;
  } else {
    out.data.resize(plan.count);
    if (plan.count > 0) std::memcpy(out.data.data(), raw, plan.bytes);
    if (plan.swap) swap_bytes(out.data.data(), plan.count);
  }
}

struct file_closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using file_ptr = std::unique_ptr<std::FILE, file_closer>;

inline std::string errno_message(int error) { return std::error_code(error, std::generic_category()).message(); }

/// Reads exactly `n` bytes or throws (the file changed while being read).
inline void read_exact(std::FILE* f, char* dst, std::size_t n, std::string_view source) {
  const std::size_t got = n == 0 ? 0 : std::fread(dst, 1, n, f);
  if (got != n) {
    const int error = errno;
    throw_npy_error(source, "read failed after " + std::to_string(got) + " of " + std::to_string(n) +
                                " bytes: " + (std::ferror(f) ? errno_message(error) : "the file got shorter"));
  }
}

inline void write_all(std::FILE* f, const void* src, std::size_t n, std::string_view source) {
  if (n != 0 && std::fwrite(src, 1, n, f) != n) {
    throw_npy_error(source, "write failed: " + errno_message(errno));
  }
}

}  // namespace npy_impl

/// Parses the preamble and header dict of a `.npy` file. `bytes` is the
/// whole file or a prefix of it that reaches `data_offset`.
inline npy_header parse_npy_header(std::string_view bytes, std::string_view source) {
  const npy_impl::preamble p = npy_impl::parse_preamble(bytes, bytes.size(), source);
  npy_header h;
  h.major_version = p.major;
  h.minor_version = p.minor;
  h.data_offset = p.header_offset + p.header_length;
  npy_impl::header_parser(bytes.substr(p.header_offset, p.header_length), source).parse(h);
  if (!npy_element_count(h.shape)) {
    throw_npy_error(source, "shape " + npy_shape_string(h.shape) +
                                " is too big: the product of its extents overflows");
  }
  return h;
}

/// The preamble and header numpy's `np.save` writes for an array of dtype
/// `descr` and `shape`: version 1.0 (2.0 if the header needs more than
/// 65535 bytes), padded with spaces to a multiple of 64 bytes, ending '\n'.
inline std::string npy_header_bytes(std::string_view descr, bool fortran_order,
                                    const std::vector<std::size_t>& shape) {
  std::string dict = "{'descr': '";
  dict.append(descr);
  dict += "', 'fortran_order': ";
  dict += fortran_order ? "True" : "False";
  dict += ", 'shape': " + npy_shape_string(shape, shape.size()) + ", }";
  if (!shape.empty()) {
    // numpy leaves room to grow the outermost extent in place (GROWTH_AXIS_MAX_DIGITS).
    const std::size_t digits = std::to_string(fortran_order ? shape.back() : shape.front()).size();
    dict.append(21 - digits, ' ');
  }
  const std::size_t text_length = dict.size() + 1;  // with the final '\n'
  for (const unsigned major : {1u, 2u}) {
    const std::size_t prefix = npy_impl::magic.size() + 2 + (major == 1 ? 2 : 4);
    const std::size_t padding = 64 - (prefix + text_length) % 64;
    const std::size_t header_length = text_length + padding;
    if (major == 1 && header_length > 0xffff) continue;
    std::string out(npy_impl::magic);
    out += static_cast<char>(major);
    out += '\0';
    for (std::size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((header_length >> (8 * i)) & 0xff);
    out += dict;
    out.append(padding, ' ');
    out += '\n';
    return out;
  }
  throw npy_error("npy header unexpectedly long");  // unreachable: 2.0 holds 4 GiB headers
}

/// Decodes a whole `.npy` file held in memory. `source` names it in errors.
template <class T>
npy_array<T> read_npy_bytes(std::string_view bytes, std::string_view source) {
  npy_header h = parse_npy_header(bytes, source);
  const npy_impl::data_plan plan = npy_impl::plan_read<T>(h, bytes.size() - h.data_offset, source);
  npy_array<T> out;
  npy_impl::decode(bytes.data() + h.data_offset, plan, out);
  if (h.fortran_order) npy_impl::fortran_to_c(out.data, h.shape);
  out.shape = std::move(h.shape);
  return out;
}

/// Reads the `.npy` file at `path`; its dtype must be `npy_descr<T>()`.
template <class T>
npy_array<T> read_npy(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) throw_npy_error(path, "no such file");
  if (ec) throw_npy_error(path, "cannot access the file: " + ec.message());
  if (fs::is_directory(status)) throw_npy_error(path, "is a directory, not a .npy file");
  if (!fs::is_regular_file(status)) throw_npy_error(path, "is not a regular file");
  const std::uintmax_t file_size = fs::file_size(path, ec);
  if (ec) throw_npy_error(path, "cannot get the file size: " + ec.message());
  if (file_size > std::numeric_limits<std::size_t>::max()) throw_npy_error(path, "the file is too large");
  const auto size = static_cast<std::size_t>(file_size);

  npy_impl::file_ptr file(std::fopen(path.c_str(), "rb"));
  if (!file) throw_npy_error(path, "cannot open for reading: " + npy_impl::errno_message(errno));

  // The header is read only after its length was checked against the file size.
  std::string head(std::min<std::size_t>(size, 12), '\0');
  npy_impl::read_exact(file.get(), head.data(), head.size(), path);
  const npy_impl::preamble p = npy_impl::parse_preamble(head, size, path);
  const std::size_t data_offset = p.header_offset + p.header_length;
  if (data_offset > head.size()) {
    const std::size_t have = head.size();
    head.resize(data_offset);
    npy_impl::read_exact(file.get(), head.data() + have, data_offset - have, path);
  }
  npy_header h = parse_npy_header(std::string_view(head).substr(0, data_offset), path);
  const npy_impl::data_plan plan = npy_impl::plan_read<T>(h, size - h.data_offset, path);

  // The first 12 bytes may already hold data when the header is tiny.
  const std::string_view early = std::string_view(head).substr(data_offset);
  const auto read_data = [&](char* dst) {
    if (!early.empty()) std::memcpy(dst, early.data(), early.size());
    npy_impl::read_exact(file.get(), dst + early.size(), plan.bytes - early.size(), path);
  };
  npy_array<T> out;
  if constexpr (std::is_same_v<T, bool>) {
    std::string raw(plan.bytes, '\0');
    read_data(raw.data());
    npy_impl::decode(raw.data(), plan, out);
  } else {
    out.data.resize(plan.count);
    read_data(reinterpret_cast<char*>(out.data.data()));
    if (plan.swap) npy_impl::swap_bytes(out.data.data(), plan.count);
  }
  if (h.fortran_order) npy_impl::fortran_to_c(out.data, h.shape);
  out.shape = std::move(h.shape);
  return out;
}

namespace npy_impl {

template <class T>
std::size_t checked_write_count(const T* data, const std::vector<std::size_t>& shape, std::string_view source) {
  const std::optional<std::size_t> count = npy_element_count(shape);
  constexpr auto limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
  if (!count || *count > limit / sizeof(T)) {
    throw_npy_error(source, "cannot write shape " + npy_shape_string(shape) + ": its byte count overflows");
  }
  if (*count > 0 && data == nullptr) {
    throw_npy_error(source, "cannot write " + std::to_string(*count) + " elements from a null pointer");
  }
  return *count;
}

}  // namespace npy_impl

/// The bytes of a `.npy` file holding `shape` elements of `data` in C order.
template <class T>
std::string npy_bytes(const T* data, const std::vector<std::size_t>& shape,
                      std::string_view source = "<memory>") {
  const std::size_t count = npy_impl::checked_write_count(data, shape, source);
  std::string out = npy_header_bytes(npy_descr<T>(), false, shape);
  if (count > 0) out.append(reinterpret_cast<const char*>(data), count * sizeof(T));
  return out;
}

/// Writes `shape` elements of `data` (C order) to a `.npy` file at `path`.
template <class T>
void write_npy(const std::string& path, const T* data, const std::vector<std::size_t>& shape) {
  const std::size_t count = npy_impl::checked_write_count(data, shape, path);
  const std::string header = npy_header_bytes(npy_descr<T>(), false, shape);
  npy_impl::file_ptr file(std::fopen(path.c_str(), "wb"));
  if (!file) throw_npy_error(path, "cannot open for writing: " + npy_impl::errno_message(errno));
  npy_impl::write_all(file.get(), header.data(), header.size(), path);
  npy_impl::write_all(file.get(), data, count * sizeof(T), path);
  // A full disk often shows only when the buffers are flushed.
  if (std::fflush(file.get()) != 0) throw_npy_error(path, "write failed: " + npy_impl::errno_message(errno));
  if (!fsync_file(file.get())) throw_npy_error(path, "fsync failed: " + npy_impl::errno_message(errno));
  if (std::fclose(file.release()) != 0) throw_npy_error(path, "write failed: " + npy_impl::errno_message(errno));
}

}  // namespace dimsum::io::detail
