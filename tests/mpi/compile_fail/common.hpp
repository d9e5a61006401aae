// Shared declarations of the distributed compile-fail cases.
#pragma once
#include <dimsum/dimsum.hpp>
#include <dimsum/distributed/dist.hpp>

DIMSUM_MESH_AXIS(model);
DIMSUM_MESH_AXIS(data);
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_model, 8);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head, 2);

namespace dist = dimsum::dist;
using heads_split = dist::split<nheads, model>;
