#pragma once
/// \file
/// The umbrella header of reverse-mode differentiation: the tape, vars,
/// parameters and every operation's gradient rule. See docs/design.md,
/// "Gradients", and docs/reference.md.

#include <dimsum/grad/parameter.hpp>
#include <dimsum/grad/rules/activation.hpp>
#include <dimsum/grad/rules/argmax.hpp>
#include <dimsum/grad/rules/attention.hpp>
#include <dimsum/grad/rules/cast.hpp>
#include <dimsum/grad/rules/cumsum.hpp>
#include <dimsum/grad/rules/dropout.hpp>
#include <dimsum/grad/rules/einsum.hpp>
#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/grad/rules/embedding.hpp>
#include <dimsum/grad/rules/layer_norm.hpp>
#include <dimsum/grad/rules/log_softmax.hpp>
#include <dimsum/grad/rules/map.hpp>
#include <dimsum/grad/rules/math.hpp>
#include <dimsum/grad/rules/mask.hpp>
#include <dimsum/grad/rules/reduce.hpp>
#include <dimsum/grad/rules/regroup.hpp>
#include <dimsum/grad/rules/rename.hpp>
#include <dimsum/grad/rules/repeat.hpp>
#include <dimsum/grad/rules/rope.hpp>
#include <dimsum/grad/rules/sink_softmax.hpp>
#include <dimsum/grad/rules/slice.hpp>
#include <dimsum/grad/rules/softmax.hpp>
#include <dimsum/grad/rules/window_mask.hpp>
#include <dimsum/grad/tape.hpp>
