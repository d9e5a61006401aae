// .safetensors interop: a file dimsum writes is read correctly by a numpy
// reader written from the format specification
// (tests/reference/safetensors_interop.py), and a file that script writes
// loads in dimsum. Needs /usr/bin/python3 with numpy; tests/CMakeLists.txt
// disables this test where it is missing.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <dimsum/io/state_dict.hpp>

namespace {
DIMSUM_DIM(vocab, 4);
DIMSUM_DIM(d_model, 3);
DIMSUM_DIM(nheads);

using dimsum::parameter;

struct block {
  BOOST_HANA_DEFINE_STRUCT(block, (parameter<float, nheads, d_model>, W), (parameter<double, d_model>, b));
};
struct net {
  BOOST_HANA_DEFINE_STRUCT(net, (parameter<float, vocab, d_model>, embed), (std::array<block, 2>, blocks));
};

// The script's pattern: element i of tensor `name` is
// ((7 i + 3 len(name) + 5 salt) mod 17) / 4 - 2.
double pattern(const std::string& name, std::size_t i, std::size_t salt) {
  return double((7 * i + 3 * name.size() + 5 * salt) % 17) / 4.0 - 2.0;
}

net make_net(std::size_t salt) {
  net n;
  n.embed = parameter<float, vocab, d_model>(dimsum::tensor<float, vocab, d_model>{});
  for (auto& b : n.blocks) {
    b.W = parameter<float, nheads, d_model>(nheads{2});
    b.b = parameter<double, d_model>(dimsum::tensor<double, d_model>{});
  }
  dimsum::nn::for_each_parameter(n, [&](const std::string& name, auto& p) {
    using T = typename std::remove_cvref_t<decltype(p)>::value_type;
    for (std::size_t i = 0; i < p.value.size(); ++i) p.value.data()[i] = T(pattern(name, i, salt));
  });
  return n;
}

const std::string script = std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/safetensors_interop.py";

int run_python(const std::string& args) {
  return std::system(("/usr/bin/python3 " + script + " " + args).c_str());
}

std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("dimsum_safetensors_interop_" + std::to_string(::getpid()) + "_" + name);
}
}  // namespace

TEST_CASE("io_safetensors_interop: a file dimsum writes is read correctly by the numpy reader") {
  const auto path = scratch("from_dimsum.safetensors");
  dimsum::save_safetensors(path.string(), make_net(0), {{"written_by", "dimsum"}});
  CHECK(run_python("check " + path.string()) == 0);
  std::filesystem::remove(path);
}

TEST_CASE("io_safetensors_interop: a file the numpy writer writes loads in dimsum") {
  const auto path = scratch("from_numpy.safetensors");
  REQUIRE(run_python("write " + path.string()) == 0);
  net n = make_net(0);
  dimsum::load_safetensors(path.string(), n);
  CHECK(dimsum::read_safetensors(path.string()).metadata.at("written_by") == "numpy");
  dimsum::nn::for_each_parameter(n, [&](const std::string& name, const auto& p) {
    for (std::size_t i = 0; i < p.value.size(); ++i) {
      INFO(name << " element " << i);
      CHECK(double(p.value.data()[i]) == pattern(name, i, 1));
    }
  });
  std::filesystem::remove(path);
}
