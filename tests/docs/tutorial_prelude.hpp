// The includes every chapter of docs/tutorial.md assumes (the first lines of
// the translation unit tests/docs/extract_tutorial.cpp writes).

// The snippets name values to show them (`float total = ...;  // 1`).
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <dimsum/dimsum.hpp>
#include <dimsum/nn/nn.hpp>
#include <dimsum/nn/seeds/seeds.hpp>
#include <dimsum/training.hpp>

#include "examples/attention.hpp"
#include "examples/seed_fixtures.hpp"
