// .npy with named shapes: round trips, and a clear npy_error for each bad
// file (missing, wrong dtype, wrong rank, wrong extent,
// truncated, malformed header); Fortran order loads transposed.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <dimsum/io/npy.hpp>

#include "support.hpp"

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(d_model, 4);

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("dimsum_io_npy_" + name)).string();
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}
// A valid v1.0 header for `descr`, `fortran` and `shape`, padded as numpy pads it.
std::string header(const std::string& descr, bool fortran, const std::string& shape) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + shape + ", }";
  std::size_t total = 10 + dict.size() + 1;
  dict += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::string h = "\x93NUMPY";
  h += char(1);
  h += char(0);
  h += char(dict.size() & 0xff);
  h += char(dict.size() >> 8);
  return h + dict;
}
}  // namespace

using namespace dimsum;
using x_t = tensor<float, batch, posn, d_model>;
using Catch::Contains;

TEST_CASE("io_npy: round trip fills dynamic extents", "[npy]") {
  x_t x(batch{2}, posn{3});
  test::fill_pattern(x);
  const auto p = temp_path("roundtrip.npy");
  save_npy(p, x);
  auto y = load_npy<x_t>(p);
  CHECK(y.extents() == x.extents());
  CHECK(test::flat(y) == test::flat(x));
  auto z = load_npy<x_t>(p, batch{2}, posn{3});  // required extents, by name
  CHECK(test::flat(z) == test::flat(x));
  // An expression is evaluated before it is written, in its own dims order.
  save_npy(p, rename<posn, batch>(rename<batch, dim<"tmp">>(x)) * 1.0f);
  CHECK(load_npy<tensor<float, dim<"tmp">, batch, d_model>>(p).extents() == x.extents());
  std::filesystem::remove(p);
}

TEST_CASE("io_npy: a file numpy wrote loads (the PyTorch fixtures)", "[npy]") {
  auto q = load_npy<tensor<float, batch, posn, dim<"nheads">, dim<"d_head">>>(
      std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/seed000/q.npy");
  CHECK(q.extents() == std::array<std::size_t, 4>{12, 20, 2, 10});
}

TEST_CASE("io_npy: each bad file is a clear npy_error", "[npy]") {
  const auto p = temp_path("bad.npy");
  SECTION("missing file") {
    REQUIRE_THROWS_AS(load_npy<x_t>(temp_path("does_not_exist.npy")), npy_error);
    REQUIRE_THROWS_WITH(load_npy<x_t>(temp_path("does_not_exist.npy")), Contains("does_not_exist.npy"));
  }
  SECTION("not a regular file") {
    REQUIRE_THROWS_WITH(load_npy<x_t>("/dev/null"), Contains("/dev/null") && Contains("not a regular file"));
    REQUIRE_THROWS_WITH(load_npy<x_t>(std::filesystem::temp_directory_path().string()), Contains("directory"));
  }
  SECTION("wrong dtype") {
    tensor<double, batch, posn, d_model> d(batch{1}, posn{1});
    save_npy(p, d);
    REQUIRE_THROWS_WITH(load_npy<x_t>(p), Contains("'<f4'") && Contains("'<f8'"));
  }
  SECTION("wrong rank") {
    save_npy(p, tensor<float, batch, posn>(batch{2}, posn{3}));
    REQUIRE_THROWS_WITH(load_npy<x_t>(p), Contains("has 2 axes") && Contains("(2, 3)") && Contains("3 dims") &&
                                              Contains("d_model=4"));
  }
  SECTION("wrong static extent") {
    save_npy(p, tensor<float, batch, posn, dim<"d_model">>(batch{2}, posn{3}, dim<"d_model">{5}));
    REQUIRE_THROWS_WITH(load_npy<x_t>(p), Contains("dim 'd_model'") && Contains("extent 5") &&
                                              Contains("static with extent 4"));
  }
  SECTION("wrong required dynamic extent") {
    save_npy(p, x_t(batch{2}, posn{3}));
    REQUIRE_THROWS_WITH(load_npy<x_t>(p, posn{7}), Contains("dim 'posn'") && Contains("extent 3") && Contains("7"));
  }
  SECTION("Fortran order loads, transposed into the dims' order") {
    // Values 0..7 in Fortran order of (1, 2, 4): element (0, p, d) is p + 2 d.
    std::string data;
    for (int i = 0; i < 8; ++i) {
      const float v = float(i);
      data.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    write_bytes(p, header("<f4", true, "(1, 2, 4)") + data);
    const x_t t = load_npy<x_t>(p);
    for (std::size_t q = 0; q < 2; ++q)
      for (std::size_t d = 0; d < 4; ++d) CHECK(t(batch{0}, posn{q}, d_model{d}) == float(q + 2 * d));
  }
  SECTION("truncated data") {
    write_bytes(p, header("<f4", false, "(1, 2, 4)") + std::string(20, '\0'));
    REQUIRE_THROWS_AS(load_npy<x_t>(p), npy_error);
    REQUIRE_THROWS_WITH(load_npy<x_t>(p), Contains("bad.npy"));
  }
  SECTION("malformed header") {
    std::string h = header("<f4", false, "(1, 1, 4)");
    h.replace(h.find("'shape'"), 7, "'shapf'");
    write_bytes(p, h + std::string(16, '\0'));
    REQUIRE_THROWS_AS(load_npy<x_t>(p), npy_error);
    write_bytes(p, "not a numpy file at all");
    REQUIRE_THROWS_AS(load_npy<x_t>(p), npy_error);
  }
  std::filesystem::remove(p);
}
