// Edge cases of sizes and failures: empty dims next to
// offsets and huge extents, sums and products that wrap, a save that fails
// half-way, and negative indices in messages. Each case must pass under the
// clang ASan+UBSan build (no report) as well as under g++.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <dimsum/nn/attention.hpp>

#include "support.hpp"

namespace {
DIMSUM_DIM(a);
DIMSUM_DIM(b);
DIMSUM_DIM(c);
DIMSUM_DIM(d);
DIMSUM_DIM(emb);
DIMSUM_DIM(heads);
DIMSUM_DIM(dk);

std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A fresh, empty scratch directory for one test.
std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("dimsum_reliability_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}
}  // namespace

using namespace dimsum;
using Catch::Contains;

constexpr std::size_t two_pow(int k) { return std::size_t(1) << k; }

TEST_CASE("reliability: select and slice of a tensor with an empty dim elsewhere", "[reliability]") {
  tensor<float, a, b> t(a{0}, b{4});
  REQUIRE(t.size() == 0);
  auto col = dimsum::select<b>(t, 2);  // no offset is added to the (null) data pointer
  static_assert(std::is_same_v<decltype(col), tensor_view<float, a>>);
  CHECK(col.extents()[0] == 0);
  auto part = dimsum::slice<b>(t, 1, 3);
  CHECK(part.extents()[0] == 0);
  CHECK(part.extents()[1] == 2);
  // An empty range of a non-empty tensor is empty too, at either end.
  tensor<float, a, b> u(a{2}, b{4});
  CHECK(dimsum::slice<b>(u, 4, 4).extents()[1] == 0);
  CHECK(dimsum::slice<a>(u, 2, 2).extents()[0] == 0);
  // Evaluating the empty views gives empty tensors.
  tensor<float, a> e = col;
  CHECK(e.size() == 0);
  tensor<float, a, b> p = part;
  CHECK(p.size() == 0);
  // The index is still checked against the extent of the dim it selects.
  REQUIRE_THROWS_WITH(dimsum::select<a>(t, 0), Contains("index 0 is out of range for dim 'a' of extent 0"));
}

TEST_CASE("reliability: an empty tensor whose other extents multiply past PTRDIFF_MAX is refused, naming the dims",
          "[reliability]") {
  // The product of the non-zero extents must fit in ptrdiff_t (as numpy requires),
  // so every stride fits, even when another extent is 0.
  REQUIRE_THROWS_WITH((tensor<float, a, b, c>(a{0}, b{two_pow(32)}, c{two_pow(32)})),
                      Contains("a=0, b=4294967296, c=4294967296"));
  REQUIRE_THROWS_AS((tensor<float, a, b, c>(a{two_pow(32)}, b{two_pow(32)}, c{0})), shape_error);
  // Bytes count too: 2^62 floats do not fit, even with nothing to allocate.
  REQUIRE_THROWS_WITH((tensor<float, a, b>(a{0}, b{two_pow(62)})),
                      Contains("b=4611686018427387904") && Contains("4-byte"));
  // Up to the limit, an empty tensor is fine and its strides are exact.
  tensor<char, a, b, c> ok(a{0}, b{two_pow(31)}, c{two_pow(31)});
  CHECK(ok.size() == 0);
  CHECK(ok.strides()[1] == std::ptrdiff_t(two_pow(31)));
  CHECK(ok.strides()[0] == std::ptrdiff_t(two_pow(62)));
  // A split of an empty dim into huge extents is refused the same way.
  tensor<float, a, d> e(a{0}, d{3});
  REQUIRE_THROWS_WITH((split_dim<0, dim_list<b, c>>(e, {0, two_pow(62)})), Contains("split: extents [b=0, c=4611686018427387904, d=3]"));
  // (bytes too: 3 x 2^61 floats)
  REQUIRE_THROWS_AS((split_dim<0, dim_list<b, c>>(eval(e), {two_pow(61), 0})), shape_error);
  // A merge of a lazy result whose extents are (0, 2^40, 2^40) is refused too.
  tensor<float, b, c> x(b{0}, c{two_pow(40)});
  tensor<float, b, d> z(b{0}, d{two_pow(40)});
  REQUIRE_THROWS_WITH((merge_expr<0, 3, a, decltype(x * z)>(x * z)),
                      Contains("merge: extents [b=0, c=1099511627776, d=1099511627776]"));
}

TEST_CASE("reliability: overflow errors name the dims and their extents", "[reliability]") {
  REQUIRE_THROWS_WITH((tensor<float, a, b>(a{two_pow(40)}, b{two_pow(40)})),
                      Contains("a=1099511627776") && Contains("b=1099511627776"));
  REQUIRE_THROWS_WITH((tensor<double, a, b>(a{two_pow(31)}, b{two_pow(31)})),
                      Contains("a=2147483648") && Contains("b=2147483648") && Contains("8-byte elements"));
}

TEST_CASE("reliability: concat whose extents sum past SIZE_MAX is an error", "[reliability]") {
  // Parts with a huge extent along the joined dim and an empty one elsewhere
  // hold nothing, so they can be built; their sum wraps a size_t.
  const std::size_t quarter = two_pow(62);
  std::vector<tensor<char, a, b>> parts(4, tensor<char, a, b>(a{quarter}, b{0}));
  REQUIRE_THROWS_WITH(concat<a>(parts), Contains("concat") && Contains("'a'") && Contains("part 3") &&
                                            Contains("4611686018427387904"));
  // A sum that fits is fine (and is still empty).
  std::vector<tensor<char, a, b>> halves(2, tensor<char, a, b>(a{two_pow(61)}, b{0}));
  auto joined = concat<a>(halves);
  CHECK(joined.extents()[0] == quarter);
  CHECK(joined.size() == 0);
}

TEST_CASE("reliability: multi_head_attention checks num_heads * dim_k for overflow", "[reliability]") {
  using mha_t = nn::multi_head_attention<float, emb, heads, dk>;
  // 2^33 x 2^31 wraps to 0 in a size_t.
  REQUIRE_THROWS_WITH(mha_t(heads{two_pow(33)}, emb{4}, dk{two_pow(31)}),
                      Contains("'heads'") && Contains("8589934592") && Contains("'dk'") && Contains("2147483648") &&
                          Contains("overflow"));
}

TEST_CASE("reliability: negative indices print as negative", "[reliability]") {
  tensor<float, a, b> t(a{2}, b{4});
  REQUIRE_THROWS_WITH(dimsum::select<b>(t, -1), Contains("index -1 is out of range for dim 'b' of extent 4"));
  REQUIRE_THROWS_WITH(dimsum::slice<b>(t, -2, 3), Contains("[-2, 3)"));
  // An index that wrapped below zero in unsigned arithmetic says so.
  const std::size_t i = 0;
  REQUIRE_THROWS_WITH(dimsum::select<b>(t, i - 1), Contains("index -1 (18446744073709551615 as unsigned)"));
  REQUIRE_THROWS_WITH(t(a{0}, b{i - 1}), Contains("index -1 (18446744073709551615 as unsigned)") &&
                                             Contains("dim 'b' of extent 4"));
}

namespace {
// Lowers the file size limit (RLIMIT_FSIZE, which binds root too) for one
// scope, so a write past `bytes` fails with EFBIG: a real write error.
struct file_size_limit {
  rlimit old{};
  void (*old_handler)(int) = nullptr;
  explicit file_size_limit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old);
    old_handler = std::signal(SIGXFSZ, SIG_IGN);  // the write returns EFBIG instead of killing us
    rlimit lower = old;
    lower.rlim_cur = bytes;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lower) == 0);
  }
  ~file_size_limit() {
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
  }
};
}  // namespace

TEST_CASE("reliability: a save_npy that fails mid-write leaves the old file intact", "[reliability][npy]") {
  const auto dir = scratch_dir("save_fails");
  const auto path = (dir / "x.npy").string();
  tensor<float, a, b> old_value(a{2}, b{3});
  test::fill_pattern(old_value);
  save_npy(path, old_value);
  const std::string before = file_bytes(path);
  REQUIRE(before.size() > 6 * sizeof(float));

  tensor<float, a, b> big(a{64}, b{1024});  // 256 KiB of data
  test::fill_pattern(big);
  {
    file_size_limit limit(4096);
    REQUIRE_THROWS_AS(save_npy(path, big), npy_error);
  }
  CHECK(file_bytes(path) == before);
  auto back = load_npy<tensor<float, a, b>>(path);
  CHECK(test::flat(back) == test::flat(old_value));
  // No temporary file is left behind.
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) left.push_back(entry.path().filename().string());
  CHECK(left == std::vector<std::string>{"x.npy"});

  // With the limit gone, the same save replaces the file.
  save_npy(path, big);
  CHECK(test::flat(load_npy<tensor<float, a, b>>(path)) == test::flat(big));
  std::filesystem::remove_all(dir);
}

TEST_CASE("reliability: a save_npy that cannot be renamed into place leaves the target as it was",
          "[reliability][npy]") {
  // The target is a non-empty directory: the data is written, the rename
  // fails, the temporary file is removed and the directory is untouched.
  const auto dir = scratch_dir("save_rename");
  const auto target = dir / "x.npy";
  std::filesystem::create_directories(target / "inside");
  tensor<float, a> v(a{3});
  REQUIRE_THROWS_WITH(save_npy(target.string(), v), Contains(target.string()));
  CHECK(std::filesystem::is_directory(target / "inside"));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++entries;
  CHECK(entries == 1);
  std::filesystem::remove_all(dir);
}
