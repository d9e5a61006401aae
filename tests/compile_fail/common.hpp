// Shared declarations of the compile-fail cases: the seed-000 dims.
#pragma once
#include <dimsum/dimsum.hpp>

DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_model, 30);
DIMSUM_DIM(nheads, 2);
DIMSUM_DIM(d_head, 10);

using x_t = dimsum::tensor<float, batch, posn, d_model>;
using w_t = dimsum::tensor<float, nheads, d_model, d_head>;
using qkv_t = dimsum::tensor<float, batch, posn, nheads, d_head>;
using scores_t = dimsum::tensor<float, batch, nheads, q_posn, k_posn>;
