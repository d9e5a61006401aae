// Tests for include/dimsum/io/detail/npy_format.hpp: the name-free .npy layer.
//
// Expected values come from numpy itself (files under tests/unit/data/npy/,
// written by make.py there, whose formulas are restated here) and from the
// .npy format description, never from the code under test.

#include <dimsum/io/detail/npy_format.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

namespace npy = dimsum::io::detail;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// Checks both the type and the text of the error.
#define REQUIRE_NPY_ERROR(expr, text)                             \
  do {                                                            \
    REQUIRE_THROWS_AS(expr, dimsum::npy_error);                   \
    REQUIRE_THROWS_WITH(expr, Contains(std::string(text)));       \
  } while (false)

namespace {

const std::string fixture_dir = std::string(DIMSUM_SOURCE_DIR) + "/tests/unit/data/npy/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out);
}

/// A fresh directory removed at scope exit.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("dimsum_io_npy_format_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

/// A .npy file built by hand from the format description (NEP 1): magic,
/// version, little-endian header length, the header text, then the data.
std::string npy_file(const std::string& header, const std::string& data = "", unsigned major = 1) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t n = header.size();
  const int length_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string f4_header(const std::string& shape = "(2, 3)") {
  return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }\n";
}

std::string zeros(std::size_t n) { return std::string(n, '\0'); }

/// The message of the npy_error `f` throws ("" if it throws nothing).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const dimsum::npy_error& e) {
    return e.what();
  }
  return "";
}

template <class T>
T value_at(std::size_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    return i % 3 == 0;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(i) * static_cast<T>(0.25) - static_cast<T>(3);
  } else if constexpr (std::is_unsigned_v<T>) {
    return static_cast<T>(i * 37 + 200);  // wraps for narrow types: all bytes exercised
  } else {
    return static_cast<T>(static_cast<std::int64_t>(i * 97) - 50);
  }
}

template <class T>
void require_values(const npy::npy_array<T>& a, const std::vector<std::size_t>& shape) {
  REQUIRE(a.shape == shape);
  std::size_t count = 1;
  for (const std::size_t e : shape) count *= e;
  REQUIRE(a.data.size() == count);
  for (std::size_t i = 0; i < count; ++i) REQUIRE(a.data[i] == value_at<T>(i));
}

}  // namespace

// ---------------------------------------------------------------- round trips

TEMPLATE_TEST_CASE("io/npy_format: round trip in memory and through a file, ranks 0..4 with zero extents",
                   "[io][npy]", float, double, std::int32_t, std::int64_t, bool, std::uint8_t, std::int8_t,
                   std::int16_t, std::uint16_t, std::uint32_t, std::uint64_t) {
  using T = TestType;
  const std::vector<std::vector<std::size_t>> shapes = {
      {}, {5}, {0}, {2, 3}, {3, 0}, {0, 3}, {2, 1, 3}, {2, 0, 4}, {1, 2, 3, 2}, {2, 3, 0, 4}};
  temp_dir dir;
  for (const auto& shape : shapes) {
    std::size_t count = 1;
    for (const std::size_t e : shape) count *= e;
    auto values = std::make_unique<T[]>(count + 1);
    for (std::size_t i = 0; i < count; ++i) values[i] = value_at<T>(i);

    INFO("shape " << npy::npy_shape_string(shape));
    const std::string bytes = npy::npy_bytes(values.get(), shape);
    const npy::npy_header h = npy::parse_npy_header(bytes, "mem");
    REQUIRE(h.descr == npy::npy_descr<T>());
    REQUIRE_FALSE(h.fortran_order);
    REQUIRE(h.shape == shape);
    REQUIRE(h.data_offset % 64 == 0);
    REQUIRE(bytes.size() == h.data_offset + count * sizeof(T));
    require_values(npy::read_npy_bytes<T>(bytes, "mem"), shape);

    const std::string path = dir.file("a.npy");
    npy::write_npy(path, values.get(), shape);
    REQUIRE(slurp(path) == bytes);
    require_values(npy::read_npy<T>(path), shape);
  }
}

TEST_CASE("io/npy_format: a zero-element array may be written from a null pointer", "[io][npy]") {
  const std::string bytes = npy::npy_bytes<float>(nullptr, {4, 0});
  const auto a = npy::read_npy_bytes<float>(bytes, "mem");
  REQUIRE(a.shape == std::vector<std::size_t>{4, 0});
  REQUIRE(a.data.empty());
}

TEST_CASE("io/npy_format: npy_descr names the dtype numpy writes", "[io][npy]") {
  REQUIRE(npy::npy_descr<float>() == "<f4");
  REQUIRE(npy::npy_descr<double>() == "<f8");
  REQUIRE(npy::npy_descr<std::int32_t>() == "<i4");
  REQUIRE(npy::npy_descr<std::int64_t>() == "<i8");
  REQUIRE(npy::npy_descr<long long>() == "<i8");
  REQUIRE(npy::npy_descr<std::uint16_t>() == "<u2");
  REQUIRE(npy::npy_descr<bool>() == "|b1");
  REQUIRE(npy::npy_descr<std::uint8_t>() == "|u1");
  REQUIRE(npy::npy_descr<std::int8_t>() == "|i1");
  STATIC_REQUIRE_FALSE(npy::is_npy_element_v<char>);
  STATIC_REQUIRE_FALSE(npy::is_npy_element_v<long double>);
  STATIC_REQUIRE_FALSE(npy::is_npy_element_v<std::string>);
}

// ------------------------------------------------------- files numpy wrote

TEST_CASE("io/npy_format: our bytes equal numpy's np.save bytes", "[io][npy]") {
  const float f4[] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
  REQUIRE(npy::npy_bytes(f4, {2, 3}) == slurp(fixture_dir + "f4_2x3.npy"));
  const double f8 = 3.25;
  REQUIRE(npy::npy_bytes(&f8, {}) == slurp(fixture_dir + "f8_scalar.npy"));
  const std::int32_t i4[] = {-2, -1, 0, 1, 2};
  REQUIRE(npy::npy_bytes(i4, {5}) == slurp(fixture_dir + "i4_5.npy"));
  std::int64_t i8[8];
  for (std::int64_t i = 0; i < 8; ++i) i8[i] = i * 1'000'000'007;
  REQUIRE(npy::npy_bytes(i8, {2, 2, 2}) == slurp(fixture_dir + "i8_2x2x2.npy"));
  const bool b1[] = {true, false, false, true};
  REQUIRE(npy::npy_bytes(b1, {4}) == slurp(fixture_dir + "b1_4.npy"));
  REQUIRE(npy::npy_bytes<std::uint8_t>(nullptr, {3, 0}) == slurp(fixture_dir + "u1_3x0.npy"));
  const std::uint8_t u1[] = {0, 40, 80, 120, 160, 200};
  REQUIRE(npy::npy_bytes(u1, {1, 2, 1, 3}) == slurp(fixture_dir + "u1_1x2x1x3.npy"));
}

TEST_CASE("io/npy_format: reads numpy-written files of every supported kind", "[io][npy]") {
  SECTION("float32 (2, 3)") {
    const auto a = npy::read_npy<float>(fixture_dir + "f4_2x3.npy");
    REQUIRE(a.shape == std::vector<std::size_t>{2, 3});
    REQUIRE(a.data == std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f});
  }
  SECTION("float64 rank 0") {
    const auto a = npy::read_npy<double>(fixture_dir + "f8_scalar.npy");
    REQUIRE(a.shape.empty());
    REQUIRE(a.data == std::vector<double>{3.25});
  }
  SECTION("int32 (5,)") {
    const auto a = npy::read_npy<std::int32_t>(fixture_dir + "i4_5.npy");
    REQUIRE(a.shape == std::vector<std::size_t>{5});
    REQUIRE(a.data == std::vector<std::int32_t>{-2, -1, 0, 1, 2});
  }
  SECTION("int64 (2, 2, 2)") {
    const auto a = npy::read_npy<std::int64_t>(fixture_dir + "i8_2x2x2.npy");
    REQUIRE(a.shape == std::vector<std::size_t>{2, 2, 2});
    REQUIRE(a.data[7] == 7'000'000'049);
  }
  SECTION("bool (4,)") {
    const auto a = npy::read_npy<bool>(fixture_dir + "b1_4.npy");
    REQUIRE(a.data == std::vector<bool>{true, false, false, true});
  }
  SECTION("uint8 (3, 0)") {
    const auto a = npy::read_npy<std::uint8_t>(fixture_dir + "u1_3x0.npy");
    REQUIRE(a.shape == std::vector<std::size_t>{3, 0});
    REQUIRE(a.data.empty());
  }
  SECTION("uint8 rank 4") {
    const auto a = npy::read_npy<std::uint8_t>(fixture_dir + "u1_1x2x1x3.npy");
    REQUIRE(a.shape == std::vector<std::size_t>{1, 2, 1, 3});
    REQUIRE(a.data == std::vector<std::uint8_t>{0, 40, 80, 120, 160, 200});
  }
  SECTION("big-endian float32 is byte-swapped") {
    REQUIRE(npy::parse_npy_header(slurp(fixture_dir + "f4_be_2x2.npy"), "be").descr == ">f4");
    const auto a = npy::read_npy<float>(fixture_dir + "f4_be_2x2.npy");
    REQUIRE(a.data == std::vector<float>{0.25f, 1.25f, 2.25f, 3.25f});
  }
  SECTION("format version 2.0") {
    const auto h = npy::parse_npy_header(slurp(fixture_dir + "f8_v2_3.npy"), "v2");
    REQUIRE(h.major_version == 2);
    const auto a = npy::read_npy<double>(fixture_dir + "f8_v2_3.npy");
    REQUIRE(a.data == std::vector<double>{1.5, -2.5, 1e300});
  }
  SECTION("format version 3.0") {
    const auto h = npy::parse_npy_header(slurp(fixture_dir + "i4_v3_2.npy"), "v3");
    REQUIRE(h.major_version == 3);
    const auto a = npy::read_npy<std::int32_t>(fixture_dir + "i4_v3_2.npy");
    REQUIRE(a.data == std::vector<std::int32_t>{7, -7});
  }
}

// ------------------------------------------------- what the header may say

TEST_CASE("io/npy_format: header dicts in every form numpy may write are accepted", "[io][npy]") {
  const std::string data = zeros(24);
  const auto shape_of = [&](const std::string& dict) {
    return npy::read_npy_bytes<float>(npy_file(dict, data), "hand").shape;
  };
  const std::vector<std::size_t> two_three = {2, 3};
  CHECK(shape_of("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") == two_three);
  CHECK(shape_of("{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}") == two_three);
  CHECK(shape_of("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}") == two_three);
  CHECK(shape_of("{'descr':'<f4','fortran_order':False,'shape':(2,3,),}") == two_three);
  CHECK(shape_of("  {\t'descr' : '<f4' ,\n 'fortran_order' : False , 'shape' : ( 2 , 3 ) }  \n") ==
        two_three);
  CHECK(shape_of("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }") ==
        std::vector<std::size_t>{6});
  CHECK(shape_of("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3, 1, 1), }" +
                 std::string(40, ' ') + "\n") == std::vector<std::size_t>{1, 2, 3, 1, 1});
  const auto scalar = npy::read_npy_bytes<float>(npy_file(f4_header("()"), zeros(4)), "hand");
  CHECK(scalar.shape.empty());
  CHECK(scalar.data.size() == 1);
}

TEST_CASE("io/npy_format: Fortran order is accepted when it lays the data out as C order", "[io][npy]") {
  const auto a = npy::read_npy_bytes<float>(
      npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 5, 1), }", zeros(20)), "hand");
  REQUIRE(a.shape == std::vector<std::size_t>{1, 5, 1});
}

TEST_CASE("io/npy_format: a bool byte other than 0 or 1 reads as true", "[io][npy]") {
  const auto a = npy::read_npy_bytes<bool>(
      npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x00\x02\xff", 3)),
      "hand");
  REQUIRE(a.data == std::vector<bool>{false, true, true});
}

TEST_CASE("io/npy_format: single-byte types accept any byte-order mark", "[io][npy]") {
  for (const char* descr : {"|u1", "<u1", ">u1"}) {
    const auto a = npy::read_npy_bytes<std::uint8_t>(
        npy_file(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (2,), }", "\x07\x09"),
        "hand");
    REQUIRE(a.data == std::vector<std::uint8_t>{7, 9});
  }
}

TEST_CASE("io/npy_format: big-endian integers are byte-swapped", "[io][npy]") {
  const auto a = npy::read_npy_bytes<std::int32_t>(
      npy_file("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", std::string("\x00\x00\x01\x02\xff\xff\xff\xfe", 8)),
      "hand");
  REQUIRE(a.data == std::vector<std::int32_t>{258, -2});
}

TEST_CASE("io/npy_format: a header too long for version 1.0 is written as version 2.0", "[io][npy]") {
  const std::vector<std::size_t> shape(30000, 1);  // "1, " x 30000 > 65535 bytes
  const std::string header = npy::npy_header_bytes("<f4", false, shape);
  REQUIRE(header.substr(0, 8) == std::string("\x93NUMPY\x02\x00", 8));
  REQUIRE(header.size() % 64 == 0);
  REQUIRE(header.back() == '\n');
  const npy::npy_header h = npy::parse_npy_header(header, "v2");
  REQUIRE(h.shape == shape);
  REQUIRE(h.data_offset == header.size());
}

TEST_CASE("io/npy_format: headers are padded with spaces to 64 bytes and end with a newline", "[io][npy]") {
  // numpy pads even when already aligned, so the header length is never 0 mod 64 minus 10.
  for (std::size_t rank = 0; rank < 40; ++rank) {
    const std::string header = npy::npy_header_bytes("<f8", false, std::vector<std::size_t>(rank, 7));
    INFO("rank " << rank);
    REQUIRE(header.size() % 64 == 0);
    REQUIRE(header.back() == '\n');
    REQUIRE(header[header.size() - 2] == ' ');
  }
}

// ----------------------------------------------------------- error: the file

TEST_CASE("io/npy_format: error: missing file", "[io][npy][error]") {
  REQUIRE_NPY_ERROR(npy::read_npy<float>("/nonexistent/dimsum/x.npy"),
                    "dimsum: npy file '/nonexistent/dimsum/x.npy': no such file");
}

TEST_CASE("io/npy_format: error: a directory is not a file", "[io][npy][error]") {
  temp_dir dir;
  REQUIRE_NPY_ERROR(npy::read_npy<float>(dir.path.string()), "is a directory, not a .npy file");
}

TEST_CASE("io/npy_format: error: unreadable file", "[io][npy][error]") {
  if (::geteuid() == 0) {
    SUCCEED("skipped: root can read any file");
    return;
  }
  temp_dir dir;
  const std::string path = dir.file("locked.npy");
  spit(path, npy_file(f4_header(), zeros(24)));
  std::filesystem::permissions(path, std::filesystem::perms::none);
  REQUIRE_NPY_ERROR(npy::read_npy<float>(path), "cannot open for reading: Permission denied");
}

TEST_CASE("io/npy_format: error: empty file", "[io][npy][error]") {
  temp_dir dir;
  spit(dir.file("empty.npy"), "");
  REQUIRE_NPY_ERROR(npy::read_npy<float>(dir.file("empty.npy")), "the file is empty");
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>("", "mem"), "npy file 'mem': the file is empty");
}

TEST_CASE("io/npy_format: error: bad magic", "[io][npy][error]") {
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(std::string("PK\x03\x04 zip file", 13), "z.npy"),
                    "npy file 'z.npy': not a .npy file: it starts with 'PK\\x03\\x04 z' instead of the magic "
                    "string '\\x93NUMPY'");
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>("\x93NUM", "short"), "not a .npy file");
}

TEST_CASE("io/npy_format: error: unsupported version", "[io][npy][error]") {
  std::string bytes = npy_file(f4_header(), zeros(24));
  bytes[6] = 4;
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(bytes, "v"),
                    "unsupported .npy format version 4.0 (dimsum reads versions 1.0, 2.0 and 3.0)");
  bytes[6] = 1;
  bytes[7] = 1;
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(bytes, "v"), "unsupported .npy format version 1.1");
  bytes[6] = 0;
  bytes[7] = 0;
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(bytes, "v"), "unsupported .npy format version 0.0");
}

TEST_CASE("io/npy_format: error: the file ends inside the preamble", "[io][npy][error]") {
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>("\x93NUMPY\x01", "p"),
                    "truncated: the file ends inside the format version (7 bytes)");
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(std::string("\x93NUMPY\x02\x00\x10\x00", 10), "p"),
                    "truncated: the file ends inside the header length field (10 bytes)");
}

TEST_CASE("io/npy_format: error: header length past the end", "[io][npy][error]") {
  const std::string bytes = npy_file(f4_header(), zeros(24)).substr(0, 40);
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(bytes, "h"),
                    "header length 60 runs past the end of the file (only 30 bytes follow the 10-byte preamble)");
  temp_dir dir;
  spit(dir.file("h.npy"), bytes);
  REQUIRE_NPY_ERROR(npy::read_npy<float>(dir.file("h.npy")), "header length 60 runs past the end of the file");
  // A 4 GiB header length in a version 2.0 file: rejected before any allocation.
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14), "h"),
                    "header length 4294967295 runs past the end of the file (only 2 bytes follow the 12-byte "
                    "preamble)");
}

// ------------------------------------------------ error: the header dict

TEST_CASE("io/npy_format: error: malformed header dictionaries", "[io][npy][error]") {
  struct bad_case {
    std::string dict;
    std::string message;
  };
  const std::string ok_tail = "'fortran_order': False, 'shape': (2, 3)}";
  const std::vector<bad_case> cases = {
      {"", "malformed header: expected '{' to open the header dictionary at byte 0"},
      {"   \n", "expected '{' to open the header dictionary at byte 4"},
      {"[1, 2]", "expected '{' to open the header dictionary"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ",
       "the dictionary is not closed (missing '}')"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", "the dictionary is not closed (missing '}')"},
      {"{'descr", "unterminated string in a key (no closing ')"},
      {"{'descr': '<f4}", "unterminated string in 'descr' (no closing ')"},
      {"{'descr': \"<f4', " + ok_tail, "unterminated string in 'descr' (no closing \")"},
      {"{'descr': '<f4\n', " + ok_tail, "unterminated string in 'descr' (no closing ')"},
      {"{'de\\x73cr': '<f4', " + ok_tail, "backslash escapes are not supported in a key"},
      {"{descr: '<f4', " + ok_tail, "expected a quoted key or '}' at byte 1"},
      {"{1: 2}", "expected a quoted key or '}'"},
      {"{, 'descr': '<f4', " + ok_tail, "expected a quoted key or '}'"},
      {"{'descr': '<f4',, " + ok_tail, "expected a quoted key or '}'"},
      {"{'descr' '<f4', " + ok_tail, "expected ':' after key 'descr' at byte 9"},
      {"{'descr': '<f4' " + ok_tail, "expected ',' or '}' after the value of 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}",
       "unexpected key 'extra' (a .npy header has exactly 'descr', 'fortran_order' and 'shape')"},
      {"{'Descr': '<f4', " + ok_tail, "unexpected key 'Descr'"},
      {"{'descr': '<f4', 'descr': '<f4', " + ok_tail, "duplicate key 'descr'"},
      {"{'fortran_order': False, 'shape': (2, 3)}", "malformed header: missing key 'descr' in the header \"{'fortran_order': False, 'shape': (2, 3)}\""},
      {"{'descr': '<f4', 'shape': (2, 3)}", "missing key 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
      {"{}", "missing key 'descr'"},
      {"{'descr': 5, " + ok_tail, "'descr' must be a quoted dtype string such as '<f4'"},
      {"{'descr': b'<f4', " + ok_tail, "'descr' must be a quoted dtype string such as '<f4'"},
      {"{'descr': ", "expected a value for 'descr'"},
      {"{'descr': [('x', '<f4'), ('y', '<i4')], " + ok_tail,
       "structured dtypes are not supported ('descr' is a list of fields); save a plain numeric array"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}", "'fortran_order' must be True or False"},
      {"{'descr': '<f4', 'fortran_order': true, 'shape': (2, 3)}", "'fortran_order' must be True or False"},
      {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2, 3)}", "'fortran_order' must be True or False"},
      {"{'descr': '<f4', 'fortran_order': Fal", "'fortran_order' must be True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': 6}",
       "'shape' must be a tuple such as (5,) or (2, 3), not a bare integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}",
       "'shape' must be a tuple of integers such as (), (5,) or (2, 3)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': None}", "'shape' must be a tuple of integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3}",
       "expected ',' or ')' after an extent in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", "unterminated tuple in 'shape' (missing ')')"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, ", "unterminated tuple in 'shape' (missing ')')"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", "negative extent in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}",
       "extents in 'shape' must be plain decimal integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L)}",
       "extents in 'shape' must be plain decimal integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0x10,)}",
       "extents in 'shape' must be plain decimal integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (007,)}", "leading zeros are not allowed in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6)}",
       "'shape' (6) is an integer in parentheses, not a tuple; a 1-d shape is written (6,)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (,)}", "expected an integer or ')' in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}", "expected an integer or ')' in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}",
       "expected ',' or ')' after an extent in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551616,)}",
       "extent in 'shape' does not fit in std::size_t"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} x", "unexpected text after the closing '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}}", "unexpected text after the closing '}'"},
      {std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}") + '\0',
       "unexpected text after the closing '}'"},
  };
  for (const bad_case& c : cases) {
    INFO("header " << c.dict);
    REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(npy_file(c.dict, zeros(24)), "bad.npy"), c.message);
    REQUIRE_NPY_ERROR(npy::parse_npy_header(npy_file(c.dict, zeros(24)), "bad.npy"),
                      "npy file 'bad.npy': malformed header: ");
  }
}

TEST_CASE("io/npy_format: error: the header is quoted in the message, non-ASCII escaped, padding dropped", "[io][npy][error]") {
  const std::string message = error_of(
      [] { npy::read_npy_bytes<float>(npy_file("{'descr': '<f4', \xff}     \n", zeros(24)), "bad.npy"); });
  REQUIRE(message ==
          "dimsum: npy file 'bad.npy': malformed header: expected a quoted key or '}' at byte 17 of the header "
          "\"{'descr': '<f4', \\xff}\"");
}

TEST_CASE("io/npy_format: error: element count overflows", "[io][npy][error]") {
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(npy_file(f4_header("(4294967296, 4294967296)")), "big"),
                    "shape (4294967296, 4294967296) is too big: the product of its extents overflows");
  // numpy's rule: a zero extent does not excuse the others from overflowing.
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(npy_file(f4_header("(0, 4294967296, 4294967296)")), "big"),
                    "is too big: the product of its extents overflows");
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<double>(
                        npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }"),
                        "big"),
                    "shape (2305843009213693952,) of '<f8' is too big: its byte count overflows");
}

TEST_CASE("io/npy_format: error: a huge shape with little data is truncation, not an allocation", "[io][npy][error]") {
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(npy_file(f4_header("(1000000000, 1000)"), zeros(8)), "huge"),
                    "truncated data: shape (1000000000, 1000) of '<f4' needs 4000000000000 data bytes but the file "
                    "has only 8");
}

// ------------------------------------------------------- error: the dtype

TEST_CASE("io/npy_format: error: wrong dtype names found and expected", "[io][npy][error]") {
  REQUIRE_NPY_ERROR(npy::read_npy<float>(fixture_dir + "f8_v2_3.npy"),
                    "f8_v2_3.npy': expected '<f4' (float32) but the file has '<f8' (float64)");
  REQUIRE_NPY_ERROR(npy::read_npy<std::int32_t>(fixture_dir + "i8_2x2x2.npy"),
                    "expected '<i4' (int32) but the file has '<i8' (int64)");
  REQUIRE_NPY_ERROR(npy::read_npy<std::uint8_t>(fixture_dir + "b1_4.npy"),
                    "expected '|u1' (uint8) but the file has '|b1' (bool)");
  REQUIRE_NPY_ERROR(npy::read_npy<bool>(fixture_dir + "u1_3x0.npy"),
                    "expected '|b1' (bool) but the file has '|u1' (uint8)");
  REQUIRE_NPY_ERROR(npy::read_npy<double>(fixture_dir + "f4_be_2x2.npy"),
                    "expected '<f8' (float64) but the file has '>f4' (float32, big-endian)");
  REQUIRE_NPY_ERROR(npy::read_npy<std::uint32_t>(fixture_dir + "i4_5.npy"),
                    "expected '<u4' (uint32) but the file has '<i4' (int32)");
  const auto with_descr = [](const std::string& descr) {
    return npy_file("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2,), }", zeros(8));
  };
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(with_descr("|O"), "o"), "but the file has '|O' (Python object)");
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(with_descr("<U1"), "u"), "but the file has '<U1' (unicode string)");
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(with_descr("<c8"), "c"), "but the file has '<c8' (complex64)");
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(with_descr("<f2"), "h"), "but the file has '<f2' (float16)");
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(with_descr("<M8[ns]"), "m"), "but the file has '<M8[ns]' (datetime64)");
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(with_descr("=f4"), "n"), "but the file has '=f4' (float32)");
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(with_descr("|f4"), "n"), "but the file has '|f4' (float32)");
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(with_descr("float32"), "n"), "but the file has 'float32' (unrecognised)");
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(with_descr(""), "n"), "but the file has '' (unrecognised)");
}

// Fortran order: numpy's files (make.py) read into C order, from memory and
// from a file. Expected values restate make.py's formulas over the C-order
// flat index of the array as numpy holds it.
TEST_CASE("io/npy_format: Fortran order is transposed into C order on reading", "[io][npy]") {
  // np.asfortranarray(np.arange(6, dtype=f4).reshape(2, 3)): the file's data
  // bytes are 0 3 1 4 2 5; the array is [[0 1 2] [3 4 5]].
  const std::string f4_bytes = slurp(fixture_dir + "f4_fortran_2x3.npy");
  for (const auto& a : {npy::read_npy<float>(fixture_dir + "f4_fortran_2x3.npy"), npy::read_npy_bytes<float>(f4_bytes, "f")}) {
    REQUIRE(a.shape == std::vector<std::size_t>{2, 3});
    REQUIRE(a.data == std::vector<float>{0, 1, 2, 3, 4, 5});
  }
  // Rank 3, float64: value(i) = i * 0.25 - 3 over the (2, 3, 4) C order.
  const auto f8 = npy::read_npy<double>(fixture_dir + "f8_fortran_2x3x4.npy");
  REQUIRE(f8.shape == std::vector<std::size_t>{2, 3, 4});
  for (std::size_t i = 0; i < 24; ++i) CHECK(f8.data[i] == double(i) * 0.25 - 3);
  // np.save of a transposed C array: (np.arange(12) * 7 - 40).reshape(3, 4).T,
  // element (r, c) of the (4, 3) result is the (c, r) of the (3, 4) one.
  const auto t = npy::read_npy<std::int32_t>(fixture_dir + "i4_transposed_4x3.npy");
  REQUIRE(t.shape == std::vector<std::size_t>{4, 3});
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t c = 0; c < 3; ++c) CHECK(t.data[r * 3 + c] == std::int32_t(c * 4 + r) * 7 - 40);
  // bool (a std::vector<bool>) and big-endian bytes take the same path.
  const auto b = npy::read_npy<bool>(fixture_dir + "b1_fortran_3x2.npy");
  REQUIRE(b.data == std::vector<bool>{true, false, false, false, true, true});
  const auto be = npy::read_npy<float>(fixture_dir + "f4_be_fortran_2x2x2.npy");
  REQUIRE(be.data == std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f, 7.5f});
}

TEST_CASE("io/npy_format: Fortran order with unit and zero extents, by hand", "[io][npy]") {
  // Shape (2, 1, 3) in Fortran order: bytes hold a[0,0,0] a[1,0,0] a[0,0,1] ...
  std::string data;
  for (const std::uint8_t v : {10, 11, 20, 21, 30, 31}) data += static_cast<char>(v);
  const auto a = npy::read_npy_bytes<std::uint8_t>(
      npy_file("{'descr': '|u1', 'fortran_order': True, 'shape': (2, 1, 3), }", data), "hand");
  REQUIRE(a.data == std::vector<std::uint8_t>{10, 20, 30, 11, 21, 31});
  const auto empty = npy::read_npy_bytes<float>(
      npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 0, 3), }", ""), "hand");
  REQUIRE(empty.shape == std::vector<std::size_t>{2, 0, 3});
  REQUIRE(empty.data.empty());
  // Size checks apply as in C order.
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(
                        npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", zeros(20)), "cut"),
                    "truncated data: shape (2, 3) of '<f4' needs 24 data bytes but the file has only 20");
}

// -------------------------------------------------------- error: the data

TEST_CASE("io/npy_format: error: truncated data", "[io][npy][error]") {
  const std::string bytes = slurp(fixture_dir + "f4_2x3.npy");
  const std::string cut = bytes.substr(0, bytes.size() - 4);
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(cut, "cut.npy"),
                    "npy file 'cut.npy': truncated data: shape (2, 3) of '<f4' needs 24 data bytes but the file has "
                    "only 20");
  temp_dir dir;
  spit(dir.file("cut.npy"), cut);
  REQUIRE_NPY_ERROR(npy::read_npy<float>(dir.file("cut.npy")), "truncated data: shape (2, 3) of '<f4' needs 24");
  spit(dir.file("nodata.npy"), bytes.substr(0, 128));
  REQUIRE_NPY_ERROR(npy::read_npy<float>(dir.file("nodata.npy")), "needs 24 data bytes but the file has only 0");
}

TEST_CASE("io/npy_format: error: trailing data", "[io][npy][error]") {
  const std::string bytes = slurp(fixture_dir + "f4_2x3.npy") + "\x01\x02\x03\x04";
  REQUIRE_NPY_ERROR(npy::read_npy_bytes<float>(bytes, "long.npy"),
                    "trailing data: shape (2, 3) of '<f4' needs 24 data bytes but the file has 28 (the header's "
                    "shape or dtype does not match the data)");
  temp_dir dir;
  spit(dir.file("long.npy"), bytes);
  REQUIRE_NPY_ERROR(npy::read_npy<float>(dir.file("long.npy")), "trailing data");
}

// ------------------------------------------------------- error: writing

TEST_CASE("io/npy_format: error: writing", "[io][npy][error]") {
  const float values[] = {1.0f, 2.0f};
  REQUIRE_NPY_ERROR(npy::write_npy("/nonexistent/dimsum/out.npy", values, {2}),
                    "npy file '/nonexistent/dimsum/out.npy': cannot open for writing: No such file or directory");
  if (std::filesystem::exists("/dev/full")) {
    std::vector<double> many(1 << 16, 1.0);
    REQUIRE_NPY_ERROR(npy::write_npy("/dev/full", many.data(), {many.size()}),
                      "npy file '/dev/full': write failed: No space left on device");
  }
  REQUIRE_NPY_ERROR(npy::npy_bytes<float>(nullptr, {2}), "cannot write 2 elements from a null pointer");
  REQUIRE_NPY_ERROR(npy::npy_bytes(values, {std::size_t{1} << 62, 4}),
                    "cannot write shape (4611686018427387904, 4): its byte count overflows");
}

// ------------------------------------------------------ the fuzz seed corpus

namespace {

/// Loads `bytes` (from memory) or `path` (from the file) as whichever
/// supported type its header names; "ok <descr> <shape>" or the error text.
template <class T, class... Rest>
std::string load_any(const std::string& bytes, const std::string& path, bool from_file) {
  try {
    const bool last = sizeof...(Rest) == 0;
    if (!last && !npy::npy_descr_matches<T>(npy::parse_npy_header(bytes, path).descr)) {
      if constexpr (sizeof...(Rest) > 0) return load_any<Rest...>(bytes, path, from_file);
    }
    const auto a = from_file ? npy::read_npy<T>(path) : npy::read_npy_bytes<T>(bytes, path);
    return "ok " + npy::npy_descr<T>() + " " + npy::npy_shape_string(a.shape);
  } catch (const dimsum::npy_error& e) {
    return e.what();
  }
}

std::string load_any(const std::string& path, bool from_file) {
  return load_any<double, std::int32_t, std::int64_t, std::uint16_t, std::uint8_t, std::int8_t, bool, float>(
      slurp(path), path, from_file);
}

}  // namespace

TEST_CASE("io/npy_format: every fuzz seed loads or throws npy_error, alike from memory and from a file",
          "[io][npy][error]") {
  const std::filesystem::path corpus = std::filesystem::path(DIMSUM_SOURCE_DIR) / "tests/fuzz/corpus";
  std::size_t valid = 0, bad = 0;
  for (const auto& entry : std::filesystem::directory_iterator(corpus)) {
    const std::string path = entry.path().string();
    const std::string name = entry.path().filename().string();
    const std::string from_memory = load_any(path, false);
    INFO(name << ": " << from_memory);
    REQUIRE(load_any(path, true) == from_memory);
    if (name.rfind("valid_", 0) == 0) {
      ++valid;
      REQUIRE_THAT(from_memory, StartsWith("ok "));
    } else {
      ++bad;
      REQUIRE_THAT(from_memory, StartsWith("dimsum: npy file '" + path + "': "));
    }
  }
  REQUIRE(valid >= 10);
  REQUIRE(bad >= 20);
}

// ------------------------------------------------ fuzzer regression inputs
// Each input tests/fuzz/run ever reports (an artifact in build-fuzz/artifacts/)
// becomes a TEST_CASE here, with its bytes inline and the message it must
// give. None so far: ~3 million executions (tests/fuzz/run, clang-16,
// ASan+UBSan, 64 MB allocation limit) found no crash, and the harness was
// checked to catch a deliberately removed truncation check within seconds.
