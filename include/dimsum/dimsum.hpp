#pragma once
/// \file
/// The umbrella header: includes every public header of dimsum except the
/// seed modules of nn/ (include <dimsum/nn/nn.hpp> for those) and the
/// name-free kernels (reached through einsum; kernels/threads.hpp sets their
/// thread count).

#include <dimsum/version.hpp>
#include <dimsum/core/bf16.hpp>
#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/dim.hpp>
#include <dimsum/core/dim_list.hpp>
#include <dimsum/core/errors.hpp>
#include <dimsum/core/fixed_string.hpp>
#include <dimsum/ops/arange.hpp>
#include <dimsum/ops/argmax.hpp>
#include <dimsum/ops/cross_entropy.hpp>
#include <dimsum/ops/cumsum.hpp>
#include <dimsum/ops/diagonal.hpp>
#include <dimsum/ops/einsum.hpp>
#include <dimsum/ops/elementwise.hpp>
#include <dimsum/ops/map.hpp>
#include <dimsum/ops/mask.hpp>
#include <dimsum/ops/pack.hpp>
#include <dimsum/ops/math.hpp>
#include <dimsum/ops/reduce.hpp>
#include <dimsum/ops/reduce_pattern.hpp>
#include <dimsum/ops/regroup.hpp>
#include <dimsum/ops/repeat.hpp>
#include <dimsum/ops/rope.hpp>
#include <dimsum/ops/kv_cache.hpp>
#include <dimsum/ops/layer_norm.hpp>
#include <dimsum/ops/log_softmax.hpp>
#include <dimsum/ops/window_mask.hpp>
#include <dimsum/ops/alibi.hpp>
#include <dimsum/ops/lookup.hpp>
#include <dimsum/ops/relative_bucket.hpp>
#include <dimsum/ops/rename.hpp>
#include <dimsum/ops/slice.hpp>
#include <dimsum/ops/sink_softmax.hpp>
#include <dimsum/ops/with_derivative.hpp>
#include <dimsum/ops/softmax.hpp>
#include <dimsum/ops/stack.hpp>
#include <dimsum/tensor/concepts.hpp>
#include <dimsum/tensor/named.hpp>
#include <dimsum/tensor/tensor.hpp>
#include <dimsum/tensor/tensor_view.hpp>
#include <dimsum/io/npy.hpp>
#include <dimsum/io/print.hpp>
#include <dimsum/io/heatmap.hpp>
