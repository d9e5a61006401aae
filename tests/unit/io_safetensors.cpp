// io/safetensors.hpp and io/state_dict.hpp: module checkpoints as
// .safetensors files and as directories of .npy files. Files are built by
// hand from the format specification where the reader is under test.
#include <catch2/catch.hpp>

#include "scoped_dir.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <dimsum/io/state_dict.hpp>

namespace {
DIMSUM_DIM(vocab);
DIMSUM_DIM(d_model);
DIMSUM_DIM(d_head, 2);
DIMSUM_DIM(nheads);

using dimsum::parameter;

struct head {
  BOOST_HANA_DEFINE_STRUCT(head, (parameter<float, nheads, d_model, d_head>, W_Q), (parameter<double, d_head>, b));
};
struct net {
  BOOST_HANA_DEFINE_STRUCT(net, (parameter<float, vocab, d_model>, embed), (std::array<head, 2>, blocks),
                           (int, flag));
};
// The same names with the dims of W_Q in another order.
struct head_swapped {
  BOOST_HANA_DEFINE_STRUCT(head_swapped, (parameter<float, d_model, nheads, d_head>, W_Q), (parameter<double, d_head>, b));
};
struct net_swapped {
  BOOST_HANA_DEFINE_STRUCT(net_swapped, (parameter<float, vocab, d_model>, embed), (std::array<head_swapped, 2>, blocks));
};

net make_net(std::size_t v = 5, std::size_t d = 3, std::size_t h = 2, float offset = 0.0f) {
  net n;
  n.embed = parameter<float, vocab, d_model>(vocab{v}, d_model{d});
  for (auto& b : n.blocks) {
    b.W_Q = parameter<float, nheads, d_model, d_head>(nheads{h}, d_model{d});
    b.b = parameter<double, d_head>(dimsum::tensor<double, d_head>{});
  }
  float k = offset;
  dimsum::nn::for_each_parameter(n, [&](const std::string&, auto& p) {
    for (std::size_t i = 0; i < p.value.size(); ++i) p.value.data()[i] = k + 0.5f * float(i);
    k += 100.0f;
  });
  return n;
}

// A fresh directory per test case and process, removed afterwards.
struct scoped_dir : test::scoped_dir {
  explicit scoped_dir(const std::string& name) : test::scoped_dir("io_safetensors_" + name) {}
};

std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::filesystem::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}

// A file from the specification: 8-byte little-endian length, the header,
// then the data.
std::string file_of(const std::string& header, const std::string& data) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[std::size_t(i)] = char((std::uint64_t(header.size()) >> (8 * i)) & 0xff);
  return s + header + data;
}

template <class T>
std::string bytes_of(std::initializer_list<T> xs) {
  std::string s;
  for (T x : xs) s.append(reinterpret_cast<const char*>(&x), sizeof x);
  return s;
}

template <class A, class B>
void check_same_values(const A& a, const B& b) {
  std::vector<std::vector<double>> va, vb;
  dimsum::nn::for_each_parameter(a, [&](const std::string&, const auto& p) { va.emplace_back(p.value.data(), p.value.data() + p.value.size()); });
  dimsum::nn::for_each_parameter(b, [&](const std::string&, const auto& p) { vb.emplace_back(p.value.data(), p.value.data() + p.value.size()); });
  CHECK(va == vb);
}
}  // namespace

TEST_CASE("io_safetensors: a module round-trips with its dotted names, dtypes and dim names") {
  const scoped_dir dir("roundtrip");
  const net saved = make_net();
  dimsum::save_safetensors((dir / "m.safetensors").string(), saved, {{"step", "42"}});
  net loaded = make_net(5, 3, 2, -7.0f);
  dimsum::load_safetensors((dir / "m.safetensors").string(), loaded);
  check_same_values(saved, loaded);

  const auto c = dimsum::read_safetensors((dir / "m.safetensors").string());
  CHECK(c.tensors.size() == 5);
  CHECK(c.tensors.at("blocks.1.W_Q").dtype == "F32");
  CHECK(c.tensors.at("blocks.1.W_Q").shape == std::vector<std::size_t>{2, 3, 2});
  CHECK(c.tensors.at("blocks.0.b").dtype == "F64");
  CHECK(c.metadata.at("step") == "42");
  CHECK(c.metadata.at("dimsum.dims.blocks.1.W_Q") == "nheads d_model d_head");
  CHECK(c.metadata.at("dimsum.dims.embed") == "vocab d_model");
}

TEST_CASE("io_safetensors: a parameter with no elements and a rank-0 one round-trip") {
  // An empty tensor's data pointer may be null: the byte copies must not
  // hand it to memcpy (UBSan's nonnull-attribute check caught that).
  struct odd {
    BOOST_HANA_DEFINE_STRUCT(odd, (parameter<float, vocab>, none), (parameter<double>, scale));
  };
  const scoped_dir dir("empty_parameter");
  odd saved;
  saved.none = parameter<float, vocab>(vocab{0});
  saved.scale = parameter<double>(dimsum::tensor<double>{});
  saved.scale.value.data()[0] = 2.5;
  dimsum::save_safetensors((dir / "m.safetensors").string(), saved);
  odd loaded;
  loaded.none = parameter<float, vocab>(vocab{0});
  loaded.scale = parameter<double>(dimsum::tensor<double>{});
  dimsum::load_safetensors((dir / "m.safetensors").string(), loaded);
  CHECK(loaded.none.value.size() == 0);
  CHECK(loaded.scale.value.item() == 2.5);
  const auto c = dimsum::read_safetensors((dir / "m.safetensors").string());
  CHECK(c.tensors.at("none").shape == std::vector<std::size_t>{0});
  CHECK(c.tensors.at("scale").shape.empty());
}

TEST_CASE("io_safetensors: the writer follows the format byte for byte") {
  dimsum::safetensors_contents c;
  c.tensors["x"] = {"F32", {2}, {}};
  const std::string data = bytes_of<float>({1.5f, -2.0f});
  c.tensors["x"].data.assign(reinterpret_cast<const std::byte*>(data.data()),
                             reinterpret_cast<const std::byte*>(data.data()) + data.size());
  const auto bytes = dimsum::serialize_safetensors(c);
  const std::string header = R"({"x":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  CHECK(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()) == file_of(padded, data));
}

TEST_CASE("io_safetensors: a file made by hand from the specification loads") {
  const scoped_dir dir("by_hand");
  struct small {
    BOOST_HANA_DEFINE_STRUCT(small, (parameter<double, d_head>, w), (parameter<float, nheads>, v));
  } m;
  m.w = parameter<double, d_head>(dimsum::tensor<double, d_head>{});
  m.v = parameter<float, nheads>(nheads{3});
  // Tensors out of name order in the buffer, metadata, spaces in the header.
  const std::string header =
      R"({"__metadata__": {"format": "pt"}, "w": {"dtype": "F64", "shape": [2], "data_offsets": [12, 28]},)"
      R"( "v": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}}   )";
  write_bytes(dir / "h.safetensors", file_of(header, bytes_of<float>({1.f, 2.f, 3.f}) + bytes_of<double>({-0.25, 8.0})));
  dimsum::load_safetensors((dir / "h.safetensors").string(), m);
  CHECK(m.w.value(d_head{0}) == -0.25);
  CHECK(m.w.value(d_head{1}) == 8.0);
  CHECK(m.v.value(nheads{2}) == 3.0f);
}

TEST_CASE("io_safetensors: missing and unexpected keys are errors naming each key") {
  const scoped_dir dir("keys");
  struct fewer {
    BOOST_HANA_DEFINE_STRUCT(fewer, (parameter<float, vocab, d_model>, embed), (parameter<float, vocab, d_model>, extra));
  } f;
  f.embed = parameter<float, vocab, d_model>(vocab{5}, d_model{3});
  f.extra = parameter<float, vocab, d_model>(vocab{5}, d_model{3});
  dimsum::save_safetensors((dir / "f.safetensors").string(), f);
  net n = make_net();
  const net before = n;
  CHECK_THROWS_AS(dimsum::load_safetensors((dir / "f.safetensors").string(), n), dimsum::state_dict_error);
  CHECK_THROWS_WITH(dimsum::load_safetensors((dir / "f.safetensors").string(), n),
                    Catch::Contains("missing keys 'blocks.0.W_Q', 'blocks.0.b', 'blocks.1.W_Q', 'blocks.1.b'") &&
                        Catch::Contains("unexpected keys 'extra'"));
  check_same_values(before, n);
}

TEST_CASE("io_safetensors: an extent that differs is a shape_error naming the parameter, its dims and both extents") {
  const scoped_dir dir("extents");
  dimsum::save_safetensors((dir / "m.safetensors").string(), make_net(5, 3, 2));
  net other = make_net(5, 4, 2);
  const net before = other;
  CHECK_THROWS_AS(dimsum::load_safetensors((dir / "m.safetensors").string(), other), dimsum::shape_error);
  CHECK_THROWS_WITH(dimsum::load_safetensors((dir / "m.safetensors").string(), other),
                    Catch::Contains("parameter 'embed' (vocab, d_model): dim 'd_model' has extent 4 in the module but 3 "
                                    "in the checkpoint"));
  check_same_values(before, other);  // nothing changed
}

TEST_CASE("io_safetensors: dims stored by name must match the module's") {
  const scoped_dir dir("dim_names");
  // nheads = d_model = 3: the extents agree, only the names tell the orders apart.
  dimsum::save_safetensors((dir / "m.safetensors").string(), make_net(5, 3, 3));
  net_swapped s;
  s.embed = parameter<float, vocab, d_model>(vocab{5}, d_model{3});
  for (auto& b : s.blocks) {
    b.W_Q = parameter<float, d_model, nheads, d_head>(d_model{3}, nheads{3});
    b.b = parameter<double, d_head>(dimsum::tensor<double, d_head>{});
  }
  CHECK_THROWS_WITH(dimsum::load_safetensors((dir / "m.safetensors").string(), s),
                    Catch::Contains("parameter 'blocks.0.W_Q' has dims (d_model nheads d_head) in the module but "
                                    "(nheads d_model d_head) in the checkpoint"));
}

TEST_CASE("io_safetensors: a dtype or rank that differs is an error naming the parameter") {
  const scoped_dir dir("dtype");
  struct one_f64 {
    BOOST_HANA_DEFINE_STRUCT(one_f64, (parameter<double, vocab>, embed));
  } d;
  d.embed = parameter<double, vocab>(vocab{4});
  struct one_f32 {
    BOOST_HANA_DEFINE_STRUCT(one_f32, (parameter<float, vocab>, embed));
  } f;
  f.embed = parameter<float, vocab>(vocab{4});
  dimsum::save_safetensors((dir / "d.safetensors").string(), d);
  CHECK_THROWS_AS(dimsum::load_safetensors((dir / "d.safetensors").string(), f), dimsum::state_dict_error);
  CHECK_THROWS_WITH(dimsum::load_safetensors((dir / "d.safetensors").string(), f),
                    Catch::Contains("parameter 'embed' is F32 in the module but F64 in the checkpoint"));
  // Rank: a file without dim names, written by hand.
  write_bytes(dir / "r.safetensors",
              file_of(R"({"embed":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", std::string(16, '\0')));
  CHECK_THROWS_WITH(dimsum::load_safetensors((dir / "r.safetensors").string(), f),
                    Catch::Contains("parameter 'embed' (vocab) has 1 dims but the checkpoint's tensor has 2 axes"));
}

TEST_CASE("io_safetensors: malformed files are rejected with a message naming the problem") {
  const scoped_dir dir("malformed");
  struct one {
    BOOST_HANA_DEFINE_STRUCT(one, (parameter<float, vocab>, x));
  } m;
  m.x = parameter<float, vocab>(vocab{2});
  const std::string two = bytes_of<float>({1.f, 2.f});
  struct bad_case {
    const char* what;
    std::string bytes;
    const char* message;
  };
  const std::vector<bad_case> cases{
      {"truncated", std::string(5, '\0'), "shorter than the 8-byte header length"},
      {"header past the end", file_of(R"({"x":{}})", "").substr(0, 10), "runs past the end of the file"},
      {"bad JSON", file_of(R"({"x": {"dtype": "F32",)", ""), "not valid JSON"},
      {"not an object", file_of("[1, 2]", ""), "not a JSON object"},
      {"wrong dtype", file_of(R"({"x":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", two), "unknown dtype \"F33\""},
      {"missing field", file_of(R"({"x":{"dtype":"F32","shape":[2]}})", two), "exactly dtype, shape and data_offsets"},
      {"extra field", file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"y":1}})", two),
       "exactly dtype, shape and data_offsets"},
      {"negative extent", file_of(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", two),
       "a shape entry is not a non-negative integer"},
      {"byte count", file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", two.substr(0, 4)),
       "hold 4 bytes but F32 of this shape needs 8"},
      {"out of range", file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", two),
       "are out of range: the data buffer has 8 bytes"},
      {"reversed", file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", two), "end before they begin"},
      {"overlap",
       file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
               two),
       "overlap the previous tensor"},
      {"gap", file_of(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", two), "leave a gap after byte 0"},
      {"trailing bytes", file_of(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", two + "junk"),
       "trailing bytes"},
      {"duplicate name",
       file_of(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
               two),
       "names 'x' twice"},
      {"metadata not strings", file_of(R"({"__metadata__":{"a":1},"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", two),
       "__metadata__ value of 'a' is not a string"},
  };
  for (const auto& c : cases) {
    SECTION(c.what) {
      write_bytes(dir / "bad.safetensors", c.bytes);
      CHECK_THROWS_AS(dimsum::load_safetensors((dir / "bad.safetensors").string(), m), dimsum::safetensors_error);
      CHECK_THROWS_WITH(dimsum::load_safetensors((dir / "bad.safetensors").string(), m),
                        Catch::Contains("bad.safetensors") && Catch::Contains(c.message));
    }
  }
  CHECK_THROWS_WITH(dimsum::load_safetensors((dir / "none.safetensors").string(), m), Catch::Contains("cannot be read"));
}

TEST_CASE("io_safetensors: the header's JSON nests at most 128 levels, names each key once, and ends in whitespace") {
  const scoped_dir dir("header_json");
  struct one {
    BOOST_HANA_DEFINE_STRUCT(one, (parameter<float, vocab>, x));
  } m;
  m.x = parameter<float, vocab>(vocab{2});
  m.x.value.data()[0] = 7.f;
  m.x.value.data()[1] = 8.f;
  const std::string two = bytes_of<float>({1.f, 2.f});
  const std::string entry = R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  // The header object is level 1; x's value adds `levels - 1` nested arrays.
  auto nested = [](std::size_t levels) {
    return R"({"x":)" + std::string(levels - 1, '[') + std::string(levels - 1, ']') + "}";
  };
  struct bad_case {
    const char* what;
    std::string bytes;
    const char* message;
  };
  const std::vector<bad_case> cases{
      {"129 levels", file_of(nested(129), ""), "nests arrays and objects deeper than 128 levels"},
      // 1 MB of '[' would take the parser's memory and time with it: the
      // bound is found at byte 129.
      {"a megabyte of brackets", file_of("{" + std::string(1 << 20, '['), ""),
       "nests arrays and objects deeper than 128 levels"},
      {"brackets inside strings do not count", file_of(R"({"x":")" + std::string(200, '[') + R"("})", ""),
       "exactly dtype, shape and data_offsets"},
      {"NUL padding", file_of(R"({"x":)" + entry + "}" + std::string(6, '\0') + "junk", two),
       "the header has a NUL byte at offset"},
      {"garbage after the object", file_of(R"({"x":)" + entry + "}  junk", two), "not valid JSON"},
      {"duplicate field in a tensor",
       file_of(R"({"x":{"dtype":"F64","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", two),
       "'x' names 'dtype' twice"},
      {"duplicate metadata key", file_of(R"({"__metadata__":{"a":"1","a":"2"},"x":)" + entry + "}", two),
       "'__metadata__' names 'a' twice"},
  };
  for (const auto& c : cases) {
    SECTION(c.what) {
      write_bytes(dir / "bad.safetensors", c.bytes);
      CHECK_THROWS_WITH(dimsum::load_safetensors((dir / "bad.safetensors").string(), m),
                        Catch::Contains("bad.safetensors") && Catch::Contains(c.message));
      CHECK(m.x.value.data()[0] == 7.f);
      CHECK(m.x.value.data()[1] == 8.f);
    }
  }
  SECTION("128 levels pass the bound and reach the entry's check") {
    write_bytes(dir / "deep.safetensors", file_of(nested(128), ""));
    CHECK_THROWS_WITH(dimsum::load_safetensors((dir / "deep.safetensors").string(), m),
                      Catch::Contains("tensor 'x' must be an object with exactly dtype, shape and data_offsets"));
  }
  SECTION("padding with spaces and other JSON whitespace loads") {
    write_bytes(dir / "padded.safetensors", file_of(R"({"x":)" + entry + "}  \n\t ", two));
    dimsum::load_safetensors((dir / "padded.safetensors").string(), m);
    CHECK(m.x.value.data()[0] == 1.f);
    CHECK(m.x.value.data()[1] == 2.f);
  }
}

TEST_CASE("io_safetensors: a failed save leaves the old file intact and no temporary behind") {
  const scoped_dir dir("atomic");
  const auto path = dir / "m.safetensors";
  dimsum::save_safetensors(path.string(), make_net(2, 2, 1));
  const std::string old = read_bytes(path);
  // A big module and a file-size limit below its size: the write fails
  // part-way with EFBIG (the limit binds root too; SIGXFSZ is ignored so the
  // write returns the error instead of killing the process).
  const net big = make_net(4000, 16, 2);
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 64 * 1024;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  bool threw = false;
  std::string message;
  try {
    dimsum::save_safetensors(path.string(), big);
  } catch (const dimsum::safetensors_error& e) {
    threw = true;
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  CHECK(threw);
  CHECK_THAT(message, Catch::Contains("write failed") && Catch::Contains("the existing file, if any, is unchanged"));
  CHECK(read_bytes(path) == old);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path)) ++files;
  CHECK(files == 1);
  // The old file still loads.
  net n = make_net(2, 2, 1, 50.0f);
  dimsum::load_safetensors(path.string(), n);
  check_same_values(make_net(2, 2, 1), n);
  // Without the limit the same save succeeds and replaces the file.
  dimsum::save_safetensors(path.string(), big);
  net reloaded = make_net(4000, 16, 2, 3.0f);
  dimsum::load_safetensors(path.string(), reloaded);
  check_same_values(big, reloaded);
}

TEST_CASE("io_safetensors: saving into a directory that does not exist fails cleanly") {
  const scoped_dir dir("nodir");
  CHECK_THROWS_WITH(dimsum::save_safetensors((dir / "no" / "m.safetensors").string(), make_net()),
                    Catch::Contains("cannot create the temporary file"));
  CHECK(!std::filesystem::exists(dir / "no"));
}

TEST_CASE("io_safetensors: reserved metadata keys are refused") {
  const scoped_dir dir("reserved");
  CHECK_THROWS_AS(dimsum::save_safetensors((dir / "m.safetensors").string(), make_net(), {{"dimsum.dims.embed", "x"}}),
                  dimsum::state_dict_error);
}

TEST_CASE("io_safetensors: metadata that is not UTF-8 is a safetensors_error, and the old file stays") {
  // "caf\xe9" is Latin-1: JSON strings must be UTF-8 (nlohmann's own
  // type_error escaped before).
  const scoped_dir dir("latin1");
  const std::string path = (dir / "m.safetensors").string();
  const net saved = make_net();
  dimsum::save_safetensors(path, saved, {{"note", "caf\xc3\xa9"}});  // UTF-8 is fine
  CHECK_THROWS_WITH(dimsum::save_safetensors(path, make_net(5, 3, 2, -7.0f), {{"note", "caf\xe9"}}),
                    Catch::Contains("the header cannot be written as JSON") && Catch::Contains("UTF-8"));
  CHECK_THROWS_AS(dimsum::save_safetensors(path, make_net(), {{"note", "caf\xe9"}}), dimsum::safetensors_error);
  net loaded = make_net(5, 3, 2, -7.0f);
  dimsum::load_safetensors(path, loaded);
  check_same_values(saved, loaded);
  CHECK(dimsum::read_safetensors(path).metadata.at("note") == "caf\xc3\xa9");
}

TEST_CASE("io_safetensors: a directory of .npy files round-trips, one file per dotted name") {
  const scoped_dir dir("npy_dir");
  const net saved = make_net();
  dimsum::save_npy_dir((dir / "ckpt").string(), saved);
  CHECK(std::filesystem::exists(dir / "ckpt" / "blocks.1.W_Q.npy"));
  CHECK(std::filesystem::exists(dir / "ckpt" / "embed.npy"));
  // Each file is an ordinary .npy file.
  const auto W = dimsum::load_npy<dimsum::tensor<float, nheads, d_model, d_head>>((dir / "ckpt" / "blocks.1.W_Q.npy").string());
  CHECK(W(nheads{1}, d_model{2}, d_head{1}) == saved.blocks[1].W_Q.value(nheads{1}, d_model{2}, d_head{1}));
  net loaded = make_net(5, 3, 2, 9.0f);
  dimsum::load_npy_dir((dir / "ckpt").string(), loaded);
  check_same_values(saved, loaded);
}

TEST_CASE("io_safetensors: a directory of .npy files is checked like a .safetensors file") {
  const scoped_dir dir("npy_dir_errors");
  dimsum::save_npy_dir((dir / "ckpt").string(), make_net());
  net other = make_net(6, 3, 2, 1.0f);
  const net before = other;
  CHECK_THROWS_WITH(dimsum::load_npy_dir((dir / "ckpt").string(), other),
                    Catch::Contains("parameter 'embed' (vocab, d_model): dim 'vocab' has extent 6 in the module but 5"));
  check_same_values(before, other);
  std::filesystem::rename(dir / "ckpt" / "blocks.0.b.npy", dir / "ckpt" / "blocks.0.bias.npy");
  net n = make_net();
  CHECK_THROWS_WITH(dimsum::load_npy_dir((dir / "ckpt").string(), n),
                    Catch::Contains("missing keys 'blocks.0.b'") && Catch::Contains("unexpected keys 'blocks.0.bias'"));
  CHECK_THROWS_AS(dimsum::load_npy_dir((dir / "nothing").string(), n), dimsum::state_dict_error);
}
