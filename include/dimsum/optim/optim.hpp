#pragma once
/// \file
/// The training umbrella: module reflection (nn/module.hpp), the optimizers,
/// gradient clipping, the learning-rate schedule and seeding. Checkpoints
/// are in <dimsum/io/state_dict.hpp>.

#include <dimsum/nn/module.hpp>
#include <dimsum/optim/adamw.hpp>
#include <dimsum/optim/clip_grad_norm.hpp>
#include <dimsum/optim/lr_schedule.hpp>
#include <dimsum/optim/param_groups.hpp>
#include <dimsum/optim/parameter_states.hpp>
#include <dimsum/optim/seed.hpp>
#include <dimsum/optim/sgd.hpp>
