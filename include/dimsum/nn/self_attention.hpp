#pragma once
/// \file
/// Deprecated: the seed classes moved to `dimsum::nn::seeds`; include
/// <dimsum/nn/seeds/seeds.hpp> (or <dimsum/nn/nn.hpp>). This header still
/// gives them, and their old names in `dimsum::nn` as deprecated aliases.

#include <dimsum/nn/seeds/old_names.hpp>
