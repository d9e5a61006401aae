#pragma once
/// \file
/// Deterministic seeding: one base seed gives every parameter (by its
/// dotted name) its own seed, the same on every platform and in every run,
/// independent of the order parameters are visited or added. See
/// tests/unit/optim_optimizers.cpp.

#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include <dimsum/nn/module.hpp>

namespace dimsum::optim {

/// One step of SplitMix64 (Steele, Lea, Flood 2014): advances `state` and
/// returns the next 64-bit output. From state 0 the first output is
/// 0xe220a8397b1dcdaf.
constexpr std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// The seed for stream `name` under base seed `seed`: SplitMix64 of the
/// base seed xor the 64-bit FNV-1a hash of the name. Portable (no
/// `std::hash`), so a checkpoint's initialisation can be reproduced anywhere.
///
///     auto s = optim::derive_seed(1234, "blocks.0.attn.W_Q");
constexpr std::uint64_t derive_seed(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  std::uint64_t state = seed ^ h;
  return splitmix64(state);
}

/// Calls `init(name, p, derive_seed(seed, name))` for every parameter `p`
/// of `m`: a deterministic initialisation in which each parameter's numbers
/// depend only on the base seed and its name.
///
///     optim::seed_parameters(model, 42, [](const std::string&, auto& p, std::uint64_t s) {
///       std::mt19937_64 gen(s);  // the engine is portable; std:: distributions are not
///       for (std::size_t i = 0; i < p.value.size(); ++i) p.value.data()[i] = double(gen() >> 11) * 0x1p-53;
///     });
template <class M, class F>
void seed_parameters(M& m, std::uint64_t seed, F&& init) {
  nn::for_each_parameter(m, [&](const std::string& name, auto& p) { init(name, p, derive_seed(seed, name)); });
}

}  // namespace dimsum::optim
