#!/usr/bin/python3
"""PyTorch's float32 -> bfloat16 rounding on many values, for the conversion
tests of dimsum::bf16 (tests/unit/bf16.cpp).

    round_in.npy    float32 (n,)  the inputs: normal values of every
                                  magnitude, values just below / at / just
                                  above a rounding tie, subnormals, zeros,
                                  infinities, the largest floats (no NaN:
                                  torch makes every NaN 0x7fc0, sign lost)
    round_bits.npy  uint16  (n,)  torch's bfloat16 bits of each input
                                  (tensor.to(torch.bfloat16).view(torch.int16))

    /usr/bin/python3 tests/reference/make_bf16_fixtures.py [OUTPUT_DIR]

The output is deterministic. The C++ test never needs PyTorch.
"""

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "bf16")
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(20261202)

# Random bit patterns over the whole non-NaN range, then the tie
# neighbourhoods of random bf16 values (low 16 bits 0x7fff, 0x8000, 0x8001).
bits = rng.integers(0, 2**32, size=400, dtype=np.uint64).astype(np.uint32)
bits = bits[(bits & 0x7FFFFFFF) <= 0x7F800000]
hi = rng.integers(0, 0x7F80, size=60, dtype=np.uint32) << 16
ties = np.concatenate([hi | 0x7FFF, hi | 0x8000, hi | 0x8001, (hi | 0x10000) | 0x8000])
special = np.array(
    [0x00000000, 0x80000000, 0x00000001, 0x00008000, 0x00018000, 0x007FFFFF, 0x00800000,
     0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0x7F800000, 0xFF800000, 0x3F808000, 0x3F818000],
    dtype=np.uint32)
inputs = np.concatenate([special, ties.astype(np.uint32), bits]).view(np.float32)
out = torch.from_numpy(inputs.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
np.save(os.path.join(OUT, "round_in.npy"), inputs.astype("<f4"))
np.save(os.path.join(OUT, "round_bits.npy"), out.astype("<u2"))
print(f"{len(inputs)} values written to {OUT}")
