// io/npy_dir.hpp: a module's parameters read from a directory of .npy
// files by their dotted member names, strict or non-strict, with a name
// map. The .npy files are written byte by byte from the format
// specification (not by dimsum's writer), with numbers chosen by hand.
#include <catch2/catch.hpp>

#include "scoped_dir.hpp"


#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <dimsum/io/npy_dir.hpp>
#include <dimsum/io/state_dict.hpp>
#include <dimsum/nn/linear.hpp>

namespace {
DIMSUM_DIM(in);
DIMSUM_DIM(out);
DIMSUM_DIM(pair, 2);

using dimsum::parameter;
using dimsum::tensor;

struct affine {
  BOOST_HANA_DEFINE_STRUCT(affine, (parameter<float, out, in>, W), (parameter<float, out>, b));
};
struct with_static {
  BOOST_HANA_DEFINE_STRUCT(with_static, (parameter<float, pair>, p));
};
struct nested {
  BOOST_HANA_DEFINE_STRUCT(nested, (dimsum::nn::linear<float, in, out>, lin), (parameter<float, pair>, scale));
};

affine make_affine() {
  affine a;
  a.W = parameter<float, out, in>(out{2}, in{3});
  a.b = parameter<float, out>(out{2});
  return a;
}

// A version 1.0 .npy file: magic, version, header length, the header dict
// padded with spaces to a multiple of 64 bytes and ended by '\n', then the
// little-endian data (this test runs on a little-endian machine).
template <class T>
void write_npy_by_hand(const std::filesystem::path& p, const char* descr, const std::string& shape,
                       const std::vector<T>& data) {
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  bytes += char(header.size() & 0xff);
  bytes += char(header.size() >> 8);
  bytes += header;
  const std::size_t at = bytes.size();
  bytes.resize(at + data.size() * sizeof(T));
  std::memcpy(bytes.data() + at, data.data(), data.size() * sizeof(T));
  std::ofstream(p, std::ios::binary) << bytes;
}

void write_f4(const std::filesystem::path& p, const std::string& shape, const std::vector<float>& data) {
  write_npy_by_hand(p, "<f4", shape, data);
}

// A fresh directory per test case and process, removed afterwards.
struct scoped_dir : test::scoped_dir {
  explicit scoped_dir(const std::string& name) : test::scoped_dir("io_npy_dir_" + name) {}
};

// The affine module's files, and files it does not need beside them.
void write_fixture_dir(const scoped_dir& d) {
  write_f4(d / "W.npy", "(2, 3)", {1.5f, -2.0f, 0.25f, 4.0f, 5.0f, -6.5f});
  write_f4(d / "b.npy", "(2,)", {0.5f, -0.75f});
  write_f4(d / "x.npy", "(4, 3)", std::vector<float>(12, 7.0f));
  write_f4(d / "out.npy", "(4, 2)", std::vector<float>(8, 1.0f));
  std::ofstream(d / "notes.txt") << "not an .npy file\n";
}
}  // namespace

TEST_CASE("io_npy_dir: a non-strict load reads the module's files out of a directory that holds more") {
  const scoped_dir d("subset");
  write_fixture_dir(d);
  affine a = make_affine();
  const std::vector<std::string> unread = dimsum::load_npy_dir(d.str(), a, dimsum::non_strict);
  CHECK(unread == std::vector<std::string>{"out", "x"});
  CHECK(a.W.value(out{0}, in{0}) == 1.5f);
  CHECK(a.W.value(out{0}, in{2}) == 0.25f);
  CHECK(a.W.value(out{1}, in{0}) == 4.0f);
  CHECK(a.W.value(out{1}, in{2}) == -6.5f);
  CHECK(a.b.value(out{1}) == -0.75f);
}

TEST_CASE("io_npy_dir: a strict load names every missing and unexpected key") {
  const scoped_dir d("strict");
  write_fixture_dir(d);
  affine a = make_affine();
  CHECK_THROWS_AS(dimsum::load_npy_dir(d.str(), a), dimsum::state_dict_error);
  CHECK_THROWS_WITH(dimsum::load_npy_dir(d.str(), a),
                    Catch::EndsWith("' does not fit the module: unexpected keys 'out', 'x'"));
  std::filesystem::remove(d / "b.npy");
  CHECK_THROWS_WITH(dimsum::load_npy_dir(d.str(), a, dimsum::strict),
                    Catch::EndsWith("' does not fit the module: missing keys 'b'; unexpected keys 'out', 'x'"));
  // Non-strict allows more files, never fewer: a module is not half loaded.
  CHECK_THROWS_WITH(dimsum::load_npy_dir(d.str(), a, dimsum::non_strict),
                    Catch::EndsWith("' does not fit the module: missing keys 'b'"));
  CHECK(a.W.value(out{0}, in{0}) == 0.0f);
}

TEST_CASE("io_npy_dir: a file with wrong extents or rank is a shape_error naming the dims, and nothing changes") {
  const scoped_dir d("extents");
  write_fixture_dir(d);
  write_f4(d / "W.npy", "(2, 4)", std::vector<float>(8, 3.0f));
  affine a = make_affine();
  a.b.value(out{0}) = 9.0f;
  CHECK_THROWS_AS(dimsum::load_npy_dir(d.str(), a, dimsum::non_strict), dimsum::shape_error);
  CHECK_THROWS_WITH(dimsum::load_npy_dir(d.str(), a, dimsum::non_strict),
                    Catch::Contains("parameter 'W' (out, in): dim 'in' has extent 3 in the module but 4 in the checkpoint"));
  CHECK(a.b.value(out{0}) == 9.0f);  // b.npy was fine, but nothing is loaded when one file does not fit

  write_f4(d / "W.npy", "(2, 3)", std::vector<float>(6, 3.0f));
  write_f4(d / "b.npy", "(2, 1)", {1.0f, 2.0f});
  CHECK_THROWS_WITH(dimsum::load_npy_dir(d.str(), a, dimsum::non_strict),
                    Catch::Contains("parameter 'b' (out) has 1 dims but the checkpoint's tensor has 2 axes"));

  const scoped_dir s("static");
  write_f4(s / "p.npy", "(3,)", {1.0f, 2.0f, 3.0f});
  with_static w;
  CHECK_THROWS_WITH(dimsum::load_npy_dir(s.str(), w),
                    Catch::Contains("parameter 'p' (pair): dim 'pair' has extent 2 in the module but 3 in the checkpoint"));
}

TEST_CASE("io_npy_dir: a file of another dtype is an npy_error") {
  const scoped_dir d("dtype");
  write_npy_by_hand<double>(d / "p.npy", "<f8", "(2,)", {1.0, 2.0});
  with_static w;
  CHECK_THROWS_AS(dimsum::load_npy_dir(d.str(), w), dimsum::npy_error);
}

TEST_CASE("io_npy_dir: a name map reads files saved under other names and says which file a key is") {
  const scoped_dir d("map");
  write_f4(d / "lin_weight.npy", "(2, 3)", {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f});
  write_f4(d / "lin_bias.npy", "(2,)", {-1.0f, -2.0f});
  write_f4(d / "scale.npy", "(2,)", {0.5f, 0.25f});
  nested n;
  n.lin = dimsum::nn::linear<float, in, out>(in{3}, out{2});
  dimsum::load_npy_dir(d.str(), n, dimsum::strict, dimsum::underscored);
  CHECK(n.lin.weight.value(out{1}, in{0}) == 4.0f);
  CHECK(n.lin.bias->value(out{1}) == -2.0f);
  CHECK(n.scale.value(pair{1}) == 0.25f);

  std::filesystem::remove(d / "lin_bias.npy");
  CHECK_THROWS_WITH(dimsum::load_npy_dir(d.str(), n, dimsum::strict, dimsum::underscored),
                    Catch::EndsWith("missing keys 'lin.bias' (file 'lin_bias.npy')"));
  write_f4(d / "lin_bias.npy", "(3,)", {1.0f, 2.0f, 3.0f});
  CHECK_THROWS_WITH(
      dimsum::load_npy_dir(d.str(), n, dimsum::strict, dimsum::underscored),
      Catch::Contains("parameter 'lin.bias' (file 'lin_bias.npy') (out): dim 'out' has extent 2 in the module but 3"));

  // Two parameters sent to one file are refused before anything is read or written.
  const auto one_file = [](const std::string&) { return std::string("same"); };
  CHECK_THROWS_WITH(dimsum::load_npy_dir(d.str(), n, dimsum::non_strict, one_file),
                    Catch::Contains("gives parameters 'lin.weight' and 'lin.bias' one file 'same.npy'"));
  const auto into_a_path = [](const std::string& name) { return "sub/" + name; };
  CHECK_THROWS_WITH(dimsum::load_npy_dir(d.str(), n, dimsum::non_strict, into_a_path),
                    Catch::Contains("gives 'sub/lin.weight' for parameter 'lin.weight'; a file name must be non-empty"));
  const scoped_dir e("map_save");
  CHECK_THROWS_AS(dimsum::save_npy_dir((e / "ckpt").string(), n, one_file), dimsum::state_dict_error);
  CHECK(!std::filesystem::exists(e / "ckpt"));
  dimsum::save_npy_dir((e / "ckpt").string(), n, dimsum::underscored);
  CHECK(std::filesystem::exists(e / "ckpt" / "lin_weight.npy"));
  CHECK(std::filesystem::exists(e / "ckpt" / "scale.npy"));
}

namespace {
std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}
}  // namespace

TEST_CASE("io_npy_dir: a save that fails is dimsum's error naming the path and leaves the old files as they were") {
  const scoped_dir d("failed_save");
  affine a = make_affine();
  a.W.value.fill(3.0f);
  a.b.value.fill(4.0f);

  // A target whose parent is a file, and a target that is a file: a
  // state_dict_error naming the directory (not std::filesystem_error).
  std::ofstream(d / "plain") << "a file\n";
  const std::string under_a_file = (d / "plain" / "ckpt").string();
  CHECK_THROWS_AS(dimsum::save_npy_dir(under_a_file, a), dimsum::state_dict_error);
  CHECK_THROWS_WITH(dimsum::save_npy_dir(under_a_file, a),
                    Catch::Contains("state dict '" + under_a_file + "': not saved, cannot create the directory"));
  CHECK_THROWS_WITH(dimsum::save_npy_dir((d / "plain").string(), a),
                    Catch::Contains("state dict '" + (d / "plain").string() + "': not saved, cannot create the directory"));
  CHECK(file_bytes(d / "plain") == "a file\n");

  // An old checkpoint whose b.npy is in the way (a directory): the save is
  // refused before W.npy is replaced, and no temporary file is left.
  const std::filesystem::path ckpt = d / "ckpt";
  std::filesystem::create_directories(ckpt / "b.npy");
  write_f4(ckpt / "W.npy", "(2, 3)", {1.5f, -2.0f, 0.25f, 4.0f, 5.0f, -6.5f});
  const std::string old_w = file_bytes(ckpt / "W.npy");
  CHECK_THROWS_AS(dimsum::save_npy_dir(ckpt.string(), a), dimsum::npy_error);
  CHECK_THROWS_WITH(dimsum::save_npy_dir(ckpt.string(), a), Catch::Contains((ckpt / "b.npy").string()));
  CHECK(file_bytes(ckpt / "W.npy") == old_w);
  std::size_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ckpt)) {
    (void)entry;
    ++entries;
  }
  CHECK(entries == 2);  // W.npy and the directory b.npy

  // With the obstacle gone the same save replaces W.npy.
  std::filesystem::remove(ckpt / "b.npy");
  dimsum::save_npy_dir(ckpt.string(), a);
  affine back = make_affine();
  dimsum::load_npy_dir(ckpt.string(), back);
  CHECK(back.W.value(out{1}, in{2}) == 3.0f);
  CHECK(back.b.value(out{0}) == 4.0f);
}

TEST_CASE("io_npy_dir: a .safetensors checkpoint loads non-strictly into a module with fewer parameters") {
  const scoped_dir d("safetensors");
  nested n;
  n.lin = dimsum::nn::linear<float, in, out>(in{3}, out{2});
  n.lin.reset_parameters(3);
  n.scale.value(pair{0}) = 0.5f;
  const std::string path = (d / "n.safetensors").string();
  dimsum::save_safetensors(path, n);
  with_static s;  // its one parameter is "p", which the file lacks
  CHECK_THROWS_WITH(dimsum::load_safetensors(path, s, dimsum::non_strict), Catch::EndsWith("missing keys 'p'"));
  struct only_scale {
    BOOST_HANA_DEFINE_STRUCT(only_scale, (parameter<float, pair>, scale));
  } o;
  CHECK_THROWS_WITH(dimsum::load_safetensors(path, o),
                    Catch::EndsWith("unexpected keys 'lin.bias', 'lin.weight'"));
  CHECK(dimsum::load_safetensors(path, o, dimsum::non_strict) == std::vector<std::string>{"lin.bias", "lin.weight"});
  CHECK(o.scale.value(pair{0}) == 0.5f);
}
