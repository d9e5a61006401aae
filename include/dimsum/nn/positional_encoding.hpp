#pragma once
/// \file
/// `nn::sinusoidal_encoding<T>(Time{t}, Channel{c})`: the Transformer's
/// positional encoding (seed 002): PE[pos, 2i] = sin(pos / 10000^(2i/C)),
/// PE[pos, 2i+1] = cos(pos / 10000^(2i/C)), computed in double.

#include <cmath>

#include <dimsum/tensor/tensor.hpp>

namespace dimsum::nn {

template <class T, dimension Time, dimension Channel>
tensor<T, Time, Channel> sinusoidal_encoding(Time time, Channel channel) {
  tensor<T, Time, Channel> pe(time, channel);
  const std::size_t n = time.value, c = channel.value;
  for (std::size_t pos = 0; pos < n; ++pos)
    for (std::size_t i = 0; i < c; ++i) {
      const double even = double(i - i % 2);  // 2i for both channels of a pair
      const double angle = double(pos) / std::pow(10000.0, even / double(c));
      pe.data()[pos * c + i] = static_cast<T>(i % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  return pe;
}

}  // namespace dimsum::nn
