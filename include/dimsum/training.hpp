#pragma once
/// \file
/// The training umbrella: the tape and gradient rules (grad/grad.hpp), module
/// reflection (nn/module.hpp), the optimizers,
/// gradient clipping, the learning-rate schedule and seeding (optim/), and
/// checkpoints (io/safetensors.hpp, io/state_dict.hpp, io/npy_dir.hpp,
/// io/optimizer_state.hpp). Kept apart from
/// <dimsum/dimsum.hpp> so that forward-only code does not compile Hana's
/// struct machinery and nlohmann-json.

#include <dimsum/grad/grad.hpp>
#include <dimsum/io/npy_dir.hpp>
#include <dimsum/io/optimizer_state.hpp>
#include <dimsum/io/safetensors.hpp>
#include <dimsum/io/state_dict.hpp>
#include <dimsum/nn/module.hpp>
#include <dimsum/optim/optim.hpp>
