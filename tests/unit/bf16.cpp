// dimsum::bf16: conversion from float (round to nearest, ties to even; NaN,
// infinities, subnormals, overflow) against hand-computed bit patterns and
// against PyTorch's rounding (tests/reference/make_bf16_fixtures.py);
// arithmetic through float; printing; tensors of bf16 with their xtensor
// storage; .safetensors BF16 and .npy (written as float32) files; einsum
// and element-wise operations on bf16 (float32 sums, one rounding), with a
// stated result type (einsum<float>, cast) against float64 loops; softmax,
// reductions and layer norm of bf16 computed in float32 and rounded once;
// attention written as contractions on bf16 tensors.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>

#include <dimsum/core/bf16.hpp>
#include <dimsum/io/npy.hpp>
#include <dimsum/ops/einsum.hpp>
#include <dimsum/ops/layer_norm.hpp>
#include <dimsum/ops/reduce.hpp>
#include <dimsum/ops/softmax.hpp>
#include <dimsum/io/print.hpp>
#include <dimsum/io/safetensors.hpp>
#include <dimsum/tensor/tensor.hpp>

#include "scoped_dir.hpp"

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(d_model, 3);
DIMSUM_DIM(d_in);
DIMSUM_DIM(d_out);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_head, 16);

using dimsum::bf16;

std::uint16_t bits_of(std::uint32_t float_bits) { return bf16(std::bit_cast<float>(float_bits)).bits(); }
float float_of(std::uint16_t bits) { return static_cast<float>(bf16::from_bits(bits)); }
}  // namespace

TEST_CASE("bf16: exact values keep their bits", "[bf16]") {
  CHECK(bits_of(0x3f800000) == 0x3f80);  // 1
  CHECK(bits_of(0xc0490000) == 0xc049);  // -3.140625
  CHECK(bits_of(0x00000000) == 0x0000);  // +0
  CHECK(bits_of(0x80000000) == 0x8000);  // -0
  CHECK(bf16().bits() == 0x0000);
  STATIC_REQUIRE(bf16{}.bits() == 0x0000);  // value-initialised: zero (bf16 x; is uninitialised, as float x;)
  CHECK(bf16(2).bits() == 0x4000);
  CHECK(bf16(-0.5).bits() == 0xbf00);
}

TEST_CASE("bf16: rounds to nearest, ties to even", "[bf16]") {
  // 1 + 2^-8 is half way between 1 (0x3f80, even) and 1 + 2^-7 (0x3f81).
  CHECK(bits_of(0x3f808000) == 0x3f80);
  CHECK(bits_of(0x3f807fff) == 0x3f80);  // below half way: down
  CHECK(bits_of(0x3f808001) == 0x3f81);  // above half way: up
  // 1 + 3 * 2^-8 is half way between 0x3f81 (odd) and 0x3f82 (even).
  CHECK(bits_of(0x3f818000) == 0x3f82);
  // Negative values round by magnitude.
  CHECK(bits_of(0xbf808000) == 0xbf80);
  CHECK(bits_of(0xbf818000) == 0xbf82);
  // 0.1f = 0x3dcccccd: low half 0xcccd is above half way.
  CHECK(bf16(0.1f).bits() == 0x3dcd);
  // A carry out of the mantissa steps the exponent: 1.9961 (0x3fff8000) -> 2.
  CHECK(bits_of(0x3fff8000) == 0x4000);
}

TEST_CASE("bf16: infinities, overflow and NaN", "[bf16]") {
  CHECK(bits_of(0x7f800000) == 0x7f80);
  CHECK(bits_of(0xff800000) == 0xff80);
  CHECK(bits_of(0x7f7f7fff) == 0x7f7f);  // rounds down to bf16's largest finite value
  CHECK(bits_of(0x7f7f8000) == 0x7f80);  // a tie with an odd neighbour: up, to infinity
  CHECK(bits_of(0x7f7fffff) == 0x7f80);  // FLT_MAX rounds to infinity
  CHECK(bits_of(0xff7fffff) == 0xff80);
  // A NaN stays a NaN, quiet, sign and top payload kept, even when its
  // payload sits only in the bits that are dropped (truncation would give inf).
  CHECK(bits_of(0x7fc00000) == 0x7fc0);
  CHECK(bits_of(0x7f800001) == 0x7fc0);
  CHECK(bits_of(0xff800001) == 0xffc0);
  CHECK(bits_of(0x7fa00000) == 0x7fe0);
  CHECK(bits_of(0x7fffffff) == 0x7fff);  // no carry into the sign
  CHECK(std::isnan(float_of(0x7f81)));
  CHECK(dimsum::isnan(bf16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(dimsum::isinf(bf16(std::numeric_limits<float>::infinity())));
  CHECK(!dimsum::isfinite(std::numeric_limits<bf16>::infinity()));
  CHECK(dimsum::isfinite(std::numeric_limits<bf16>::max()));
}

TEST_CASE("bf16: subnormals are kept and rounded like normals", "[bf16]") {
  CHECK(bits_of(0x00010000) == 0x0001);  // bf16's smallest subnormal, 2^-133
  CHECK(float_of(0x0001) == std::ldexp(1.0f, -133));
  CHECK(bits_of(0x00000001) == 0x0000);  // float's smallest subnormal: to +0
  CHECK(bits_of(0x80000001) == 0x8000);  // ... and to -0
  CHECK(bits_of(0x00008000) == 0x0000);  // tie between 0 and 2^-133: even (0)
  CHECK(bits_of(0x00008001) == 0x0001);
  CHECK(bits_of(0x00018000) == 0x0002);  // tie between 0x0001 and 0x0002: even
  CHECK(bits_of(0x007fffff) == 0x0080);  // the largest subnormal float rounds up to the smallest normal
  CHECK(bits_of(0x007f7fff) == 0x007f);
  CHECK(float_of(0x007f) == 127 * std::ldexp(1.0f, -133));
}

TEST_CASE("bf16: to float is exact", "[bf16]") {
  CHECK(float_of(0x3f81) == 1.0078125f);
  CHECK(float_of(0xc049) == -3.140625f);
  CHECK(float_of(0x7f7f) == 0x1.fep127f);
  CHECK(float_of(0xff80) == -std::numeric_limits<float>::infinity());
  CHECK(std::signbit(float_of(0x8000)));
  CHECK(static_cast<double>(bf16::from_bits(0x4049)) == 3.140625);
  CHECK(static_cast<int>(bf16::from_bits(0xc049)) == -3);
  // Every finite bf16 survives float -> bf16 unchanged.
  for (std::uint32_t b = 0; b < 0x10000; ++b)
    if ((b & 0x7f80) != 0x7f80 || (b & 0x7f) == 0) REQUIRE(bf16(float_of(std::uint16_t(b))).bits() == b);
}

TEST_CASE("bf16: rounding agrees with PyTorch's on 654 values", "[bf16]") {
  const std::string dir = std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/bf16/";
  const auto in = dimsum::io::detail::read_npy<float>(dir + "round_in.npy");
  const auto want = dimsum::io::detail::read_npy<std::uint16_t>(dir + "round_bits.npy");
  REQUIRE(in.data.size() == 654);
  REQUIRE(want.data.size() == in.data.size());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < in.data.size(); ++i)
    if (bf16(in.data[i]).bits() != want.data[i]) ++mismatches;
  CHECK(mismatches == 0);
}

TEST_CASE("bf16: arithmetic computes in float and rounds once", "[bf16]") {
  const bf16 one(1.0f), small = bf16::from_bits(0x3c40);  // 3 * 2^-8
  CHECK(float_of(0x3c40) == 0.01171875f);
  CHECK((one + small).bits() == 0x3f82);  // 1 + 3 * 2^-8: a tie, to even
  CHECK((one - bf16(0.25f)).bits() == 0x3f40);
  CHECK((bf16(3.0f) * bf16(3.0f)).bits() == 0x4110);    // 9
  CHECK((bf16(1.0f) / bf16(3.0f)).bits() == 0x3eab);    // 0.33333334f = 0x3eaaaaab: up
  CHECK((-bf16(2.0f)).bits() == 0xc000);
  bf16 acc(1.0f);
  acc += bf16(1.0f);
  acc *= bf16(3.0f);
  CHECK(acc.bits() == 0x40c0);  // 6
  CHECK(bf16(1.0f) < bf16(2.0f));
  CHECK(bf16(0.0f) == bf16(-0.0f));
  CHECK_FALSE(bf16::from_bits(0x7fc0) == bf16::from_bits(0x7fc0));
  CHECK(std::numeric_limits<bf16>::epsilon().bits() == 0x3c00);
  CHECK(static_cast<float>(std::numeric_limits<bf16>::epsilon()) == 0.0078125f);
  CHECK(std::numeric_limits<bf16>::digits == 8);
}

TEST_CASE("bf16: prints as its float value", "[bf16]") {
  std::ostringstream os;
  os << bf16(1.5f) << ' ' << bf16(-0.1f) << ' ' << std::numeric_limits<bf16>::infinity();
  CHECK(os.str() == "1.5 -0.100098 inf");
}

TEST_CASE("bf16: a tensor value type with xtensor storage", "[bf16]") {
  using x_t = dimsum::tensor<bf16, batch, posn, d_model>;
  static_assert(std::is_same_v<x_t::storage_type, xt::xtensor<bf16, 3>>);
  x_t x(posn{2}, batch{1});
  CHECK(x.size() == 6);
  CHECK(x.data()[5].bits() == 0);
  x.fill(bf16(0.5f));
  CHECK(x.storage()(0, 1, 2).bits() == 0x3f00);
  x.storage()(0, 1, 2) = bf16(-2.0f);
  CHECK(x.data()[5].bits() == 0xc000);
  const auto ones = x_t::ones(batch{1}, posn{1});
  CHECK(ones.data()[2].bits() == 0x3f80);
  // random_normal rounds each draw to bf16.
  const auto r = x_t::random_normal(7, batch{2}, posn{4});
  for (std::size_t i = 0; i < r.size(); ++i) CHECK(std::abs(static_cast<float>(r.data()[i])) < 10.0f);
  std::ostringstream os;
  os << x;
  CHECK(os.str().find("tensor<bf16>[batch=1, posn=2, d_model=3]") == 0);
  CHECK(os.str().find("-2") != std::string::npos);
}

TEST_CASE("bf16: .safetensors dtype BF16, bits unchanged", "[bf16]") {
  STATIC_REQUIRE(dimsum::safetensors_dtype_v<bf16> == "BF16");
  test::scoped_dir dir("bf16_safetensors");
  dimsum::safetensors_contents c;
  auto& t = c.tensors["w"];
  t.dtype = "BF16";
  t.shape = {3};
  const std::uint16_t bits[3] = {0x3f80, 0xff80, 0x0001};
  t.data.resize(6);
  dimsum::io::detail::copy_le_bytes(reinterpret_cast<const std::byte*>(bits), reinterpret_cast<std::uint16_t*>(t.data.data()), 3);
  // Little-endian bytes, as the format says: 1.0 is 80 3f.
  CHECK(std::to_integer<int>(t.data[0]) == 0x80);
  CHECK(std::to_integer<int>(t.data[1]) == 0x3f);
  dimsum::write_safetensors((dir / "w.safetensors").string(), c);
  const auto back = dimsum::read_safetensors((dir / "w.safetensors").string());
  const auto& w = back.tensors.at("w");
  CHECK(w.dtype == "BF16");
  bf16 v[3];
  dimsum::io::detail::copy_le_bytes(w.data.data(), v, 3);
  CHECK(v[0].bits() == 0x3f80);
  CHECK(v[1].bits() == 0xff80);
  CHECK(v[2].bits() == 0x0001);
}

TEST_CASE("bf16: save_npy writes float32 (exact), load_npy rounds float32 to bf16", "[bf16]") {
  test::scoped_dir dir("bf16_npy");
  using x_t = dimsum::tensor<bf16, posn, d_model>;
  x_t x(posn{1});
  x.data()[0] = bf16::from_bits(0x3f81);  // 1.0078125
  x.data()[1] = bf16::from_bits(0xff80);  // -inf
  x.data()[2] = bf16::from_bits(0x0001);  // 2^-133
  const std::string path = (dir / "x.npy").string();
  dimsum::save_npy(path, x);
  const auto f = dimsum::io::detail::read_npy<float>(path);  // refuses any dtype but <f4
  REQUIRE(f.data.size() == 3);
  CHECK(f.data[0] == 1.0078125f);
  CHECK(f.data[1] == -std::numeric_limits<float>::infinity());
  CHECK(f.data[2] == std::ldexp(1.0f, -133));
  const auto back = dimsum::load_npy<x_t>(path);
  CHECK(back.data()[0].bits() == 0x3f81);
  CHECK(back.data()[1].bits() == 0xff80);
  CHECK(back.data()[2].bits() == 0x0001);
  // A float32 file of values that are not bf16 is rounded to nearest even.
  const float g[2] = {std::bit_cast<float>(0x3f808000u), std::bit_cast<float>(0x3f818000u)};
  dimsum::io::detail::write_npy((dir / "g.npy").string(), g, {2});
  const auto r = dimsum::load_npy<dimsum::tensor<bf16, posn>>((dir / "g.npy").string());
  CHECK(r.data()[0].bits() == 0x3f80);
  CHECK(r.data()[1].bits() == 0x3f82);
}

namespace {
// x (posn, d_in) and w (d_in, d_out) of bf16 values, and the float64 sums
// x w with sum |x w| per output element (the error bound's scale).
struct product_case {
  dimsum::tensor<bf16, posn, d_in> x;
  dimsum::tensor<bf16, d_in, d_out> w;
  std::vector<double> want, scale;
  product_case(std::size_t p, std::size_t k, std::size_t n)
      : x(dimsum::tensor<bf16, posn, d_in>::random_normal(11, posn{p}, d_in{k})),
        w(dimsum::tensor<bf16, d_in, d_out>::random_normal(12, d_in{k}, d_out{n})),
        want(p * n),
        scale(p * n) {
    for (std::size_t i = 0; i < p; ++i)
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t q = 0; q < k; ++q) {
          const double v = double(static_cast<float>(x.data()[i * k + q])) * double(static_cast<float>(w.data()[q * n + j]));
          want[i * n + j] += v;
          scale[i * n + j] += std::abs(v);
        }
  }
  // Float32 sums of k terms: within (k + 2) 2^-24 sum |x w|; rounded to
  // bf16 besides: plus 2^-8 |sum| (half an ulp of 8 significant bits, and
  // a margin for the float error).
  template <class T>
  bool close(const T* got, std::size_t k, bool rounded_to_bf16) const {
    for (std::size_t i = 0; i < want.size(); ++i) {
      double tol = double(k + 2) * std::ldexp(1.0, -24) * scale[i];
      if (rounded_to_bf16) tol += std::ldexp(1.0, -8) * std::abs(want[i]) + tol;
      if (std::abs(double(static_cast<float>(got[i])) - want[i]) > tol) return false;
    }
    return true;
  }
};
}  // namespace

TEST_CASE("bf16: einsum of bf16 sums in float32 and rounds once to bf16", "[bf16][einsum]") {
  const product_case c(7, 300, 9);
  const dimsum::tensor<bf16, posn, d_out> y = dimsum::einsum<"posn d_in, d_in d_out -> posn d_out">(c.x, c.w);
  CHECK(c.close(y.data(), 300, true));
  // Summed in bf16 the 300 terms would be off by far more than the bound.
  const dimsum::tensor<bf16, d_out, posn> t = dimsum::einsum<d_out, posn>(c.x, c.w);
  for (std::size_t i = 0; i < 7; ++i)
    for (std::size_t j = 0; j < 9; ++j) CHECK(t.data()[j * 7 + i].bits() == y.data()[i * 9 + j].bits());
}

TEST_CASE("bf16: einsum<float> of bf16 operands returns the float32 sums", "[bf16][einsum]") {
  const product_case c(5, 260, 11);
  const dimsum::tensor<float, posn, d_out> y = dimsum::einsum<"posn d_in, d_in d_out -> posn d_out", float>(c.x, c.w);
  CHECK(c.close(y.data(), 260, false));
  const dimsum::tensor<float, posn, d_out> z = dimsum::einsum<float, posn, d_out>(c.x, c.w);
  CHECK(std::equal(y.data(), y.data() + y.size(), z.data()));
  // Three operands (no GEMM): the same bound, with the third operand all ones.
  const auto ones = dimsum::tensor<bf16, d_out>::ones(d_out{11});
  const dimsum::tensor<float, posn> r = dimsum::einsum<float, posn>(c.x, c.w, ones);
  for (std::size_t i = 0; i < 5; ++i) {
    double want = 0, scale = 0;
    for (std::size_t j = 0; j < 11; ++j) want += c.want[i * 11 + j], scale += c.scale[i * 11 + j];
    CHECK(std::abs(double(r.data()[i]) - want) <= double(260 * 11 + 4) * std::ldexp(1.0, -24) * scale);
  }
}

TEST_CASE("bf16: einsum<float> of bf16 and float operands, and einsum<bf16> of floats", "[bf16][einsum]") {
  const product_case c(4, 50, 6);
  const dimsum::tensor<float, d_in, d_out> wf = dimsum::cast<float>(c.w);
  const dimsum::tensor<float, posn, d_out> y = dimsum::einsum<"posn d_in, d_in d_out -> posn d_out", float>(c.x, wf);
  CHECK(c.close(y.data(), 50, false));
  const dimsum::tensor<float, posn, d_in> xf = dimsum::cast<float>(c.x);
  const dimsum::tensor<bf16, posn, d_out> b = dimsum::einsum<bf16, posn, d_out>(xf, wf);
  CHECK(c.close(b.data(), 50, true));
}

TEST_CASE("bf16: element-wise operations compute in float and round once", "[bf16][elementwise]") {
  using t_t = dimsum::tensor<bf16, posn, d_model>;
  const auto a = t_t::random_normal(3, posn{4}), b = t_t::random_normal(4, posn{4});
  const t_t sum = a + b, scaled = a * 0.5, prod = a * b;
  const dimsum::tensor<float, posn, d_model> mixed = dimsum::cast<float>(a) + dimsum::tensor<float, posn, d_model>::ones(posn{4});
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<float>(a.data()[i]), y = static_cast<float>(b.data()[i]);
    CHECK(sum.data()[i].bits() == bf16(float(x + y)).bits());  // x + y is exact in double
    CHECK(static_cast<float>(scaled.data()[i]) == float(x / 2));
    CHECK(prod.data()[i].bits() == bf16(float(x * y)).bits());  // x * y: 16 bits, exact in float
    CHECK(mixed.data()[i] == float(x + 1));
  }
}

TEST_CASE("bf16: softmax sums in float32 and rounds each value once", "[bf16][softmax]") {
  // 1000 equal values: each is 1/1000. A bf16 running sum would stall at
  // 256 (256 + 1 rounds to 256) and give 1/256.
  const auto flat = dimsum::tensor<bf16, posn, d_in>::full(bf16(0.5f), posn{2}, d_in{1000});
  const dimsum::tensor<bf16, posn, d_in> p = dimsum::softmax<d_in>(flat);        // contiguous rows
  const dimsum::tensor<bf16, d_in, posn> q = dimsum::softmax<d_in>(dimsum::tensor<bf16, d_in, posn>(flat));  // strided
  for (std::size_t i = 0; i < p.size(); ++i) {
    CHECK(p.data()[i].bits() == bf16(0.001f).bits());
    CHECK(q.data()[i].bits() == bf16(0.001f).bits());
  }
  // Random rows against float64: within half a bf16 ulp plus float32's error.
  const auto x = dimsum::tensor<bf16, posn, d_in>::random_normal(5, posn{3}, d_in{37});
  const dimsum::tensor<bf16, posn, d_in> y = dimsum::softmax<d_in>(x * 3.0f);
  for (std::size_t r = 0; r < 3; ++r) {
    double m = -1e300, sum = 0;
    for (std::size_t j = 0; j < 37; ++j) m = std::max(m, 3.0 * static_cast<float>(x.data()[r * 37 + j]));
    for (std::size_t j = 0; j < 37; ++j) sum += std::exp(double(static_cast<float>(bf16(3.0f * static_cast<float>(x.data()[r * 37 + j])))) - m);
    for (std::size_t j = 0; j < 37; ++j) {
      const double want = std::exp(double(static_cast<float>(bf16(3.0f * static_cast<float>(x.data()[r * 37 + j])))) - m) / sum;
      CHECK(std::abs(double(static_cast<float>(y.data()[r * 37 + j])) - want) <= (std::ldexp(1.0, -8) + 1e-5) * want);
    }
  }
}

TEST_CASE("bf16: sum, mean and max reduce in float32 and round once", "[bf16][reduce]") {
  // 1 + 256 * 2^-8 = 2 in float; a bf16 running sum stays at 1.
  auto t = dimsum::tensor<bf16, d_in>::full(bf16(std::ldexp(1.0f, -8)), d_in{257});
  t.data()[0] = bf16(1.0f);
  const dimsum::tensor<bf16> s = dimsum::sum<d_in>(t);
  CHECK(s.data()[0].bits() == 0x4000);
  const auto x = dimsum::tensor<bf16, posn, d_in>::random_normal(6, posn{4}, d_in{300});
  const dimsum::tensor<bf16, posn> total = dimsum::sum<d_in>(x), avg = dimsum::mean<d_in>(x), top = dimsum::max<d_in>(x);
  for (std::size_t r = 0; r < 4; ++r) {
    double want = 0, scale = 0, m = -1e300;
    for (std::size_t j = 0; j < 300; ++j) {
      const double v = static_cast<float>(x.data()[r * 300 + j]);
      want += v, scale += std::abs(v), m = std::max(m, v);
    }
    const double tol = 302 * std::ldexp(1.0, -24) * scale;
    CHECK(std::abs(double(static_cast<float>(total.data()[r])) - want) <= std::ldexp(1.0, -8) * std::abs(want) + 2 * tol);
    CHECK(std::abs(double(static_cast<float>(avg.data()[r])) - want / 300) <= std::ldexp(1.0, -8) * std::abs(want / 300) + 2 * tol / 300);
    CHECK(double(static_cast<float>(top.data()[r])) == m);
  }
}

TEST_CASE("bf16: layer_norm normalises in float32 and rounds once", "[bf16][layer_norm]") {
  using x_t = dimsum::tensor<bf16, posn, d_in>;
  const auto x = x_t::random_normal(8, posn{3}, d_in{64});
  const auto w = dimsum::tensor<bf16, d_in>::random_normal(9, d_in{64});
  const auto b = dimsum::tensor<bf16, d_in>::random_normal(10, d_in{64});
  const x_t y = dimsum::layer_norm<d_in>(x, w, b);
  for (std::size_t r = 0; r < 3; ++r) {
    double mu = 0, var = 0;
    for (std::size_t j = 0; j < 64; ++j) mu += static_cast<float>(x.data()[r * 64 + j]) / 64.0;
    for (std::size_t j = 0; j < 64; ++j) var += std::pow(static_cast<float>(x.data()[r * 64 + j]) - mu, 2) / 64.0;
    for (std::size_t j = 0; j < 64; ++j) {
      const double want = (static_cast<float>(x.data()[r * 64 + j]) - mu) / std::sqrt(var + 1e-5) *
                              double(static_cast<float>(w.data()[j])) + double(static_cast<float>(b.data()[j]));
      CHECK(std::abs(double(static_cast<float>(y.data()[r * 64 + j])) - want) <= std::ldexp(1.0, -8) * std::abs(want) + 1e-5);
    }
  }
}

TEST_CASE("bf16: attention as contractions on bf16 tensors", "[bf16][attention]") {
  // z = softmax(q k^T / 4) v. Written as one expression it runs on the
  // fused kernel (float32 throughout, z rounded once: tests/unit/
  // fused_attention_bf16.cpp); the bound here is that of the unfused steps,
  // each a bf16 result, which covers it: scores rounded
  // (2^-8 relative), scaled (exact: a power of two), softmax in float32 and
  // rounded, z summed in float32 and rounded. Bound per output: the scores'
  // rounding moves each probability by at most exp(2 * 2^-8 * max|s|) - 1
  // relative (the row's shift and the element's own), the probabilities'
  // rounding by 2^-8, the final rounding 2^-8 |z|.
  const auto q = dimsum::tensor<bf16, q_posn, d_head>::random_normal(21, q_posn{5});
  const auto k = dimsum::tensor<bf16, k_posn, d_head>::random_normal(22, k_posn{7});
  const auto v = dimsum::tensor<bf16, k_posn, d_head>::random_normal(23, k_posn{7});
  const dimsum::tensor<bf16, q_posn, d_head> z = dimsum::einsum<"q_posn k_posn, k_posn d_head -> q_posn d_head">(
      dimsum::softmax<k_posn>(dimsum::einsum<"q_posn d_head, k_posn d_head -> q_posn k_posn">(q, k) * 0.25f), v);
  const auto f = [](bf16 b) { return double(static_cast<float>(b)); };
  for (std::size_t i = 0; i < 5; ++i) {
    double s[7], m = -1e300, max_abs = 0, sum = 0;
    for (std::size_t j = 0; j < 7; ++j) {
      s[j] = 0;
      for (std::size_t d = 0; d < 16; ++d) s[j] += f(q.data()[i * 16 + d]) * f(k.data()[j * 16 + d]) / 4;
      m = std::max(m, s[j]);
      max_abs = std::max(max_abs, std::abs(s[j]));
    }
    for (std::size_t j = 0; j < 7; ++j) sum += std::exp(s[j] - m);
    const double p_rel = std::expm1(2 * std::ldexp(1.0, -8) * max_abs + 1e-5) + std::ldexp(1.0, -8) * 1.01;
    for (std::size_t d = 0; d < 16; ++d) {
      double want = 0, scale = 0;
      for (std::size_t j = 0; j < 7; ++j) {
        const double p = std::exp(s[j] - m) / sum;
        want += p * f(v.data()[j * 16 + d]);
        scale += p * std::abs(f(v.data()[j * 16 + d]));
      }
      const double tol = p_rel * (1 + p_rel) * scale + std::ldexp(1.0, -8) * (std::abs(want) + p_rel * scale) + 16 * std::ldexp(1.0, -24) * scale;
      CHECK(std::abs(f(z.data()[i * 16 + d]) - want) <= tol);
    }
  }
}
