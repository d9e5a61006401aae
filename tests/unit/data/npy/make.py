#!/usr/bin/python3
"""Writes the numpy-made .npy fixtures read by tests/unit/io_npy_format.cpp.

Run once with Debian's numpy: /usr/bin/python3 tests/unit/data/npy/make.py
The files are committed; the tests never need Python. Each array's values
follow a formula the C++ test restates, so the test checks numpy's bytes
against an independent expectation.
"""
import os

import numpy as np
from numpy.lib import format as npy_format

HERE = os.path.dirname(os.path.abspath(__file__))


def save(name, array, version=None):
    path = os.path.join(HERE, name)
    if version is None:
        np.save(path, array)
    else:
        with open(path, "wb") as f:
            npy_format.write_array(f, array, version=version)


# value(i) for flat index i, as restated in the C++ test.
save("f4_2x3.npy", (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3))
save("f8_scalar.npy", np.array(3.25, dtype=np.float64))
save("i4_5.npy", np.arange(5, dtype=np.int32) - 2)
save("i8_2x2x2.npy", (np.arange(8, dtype=np.int64) * 1_000_000_007).reshape(2, 2, 2))
save("b1_4.npy", np.array([True, False, False, True]))
save("u1_3x0.npy", np.zeros((3, 0), dtype=np.uint8))
save("u1_1x2x1x3.npy", np.arange(6, dtype=np.uint8).reshape(1, 2, 1, 3) * 40)
save("f4_be_2x2.npy", (np.arange(4, dtype=np.float32) + 0.25).astype(">f4").reshape(2, 2))
save("f8_v2_3.npy", np.array([1.5, -2.5, 1e300]), version=(2, 0))
save("i4_v3_2.npy", np.array([7, -7], dtype=np.int32), version=(3, 0))
save("f4_fortran_2x3.npy", np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
# Fortran order, transposed on reading (value(i) over the C-order flat index
# of the shape as saved, restated in the C++ test "Fortran order"):
# np.save of a transposed C array writes Fortran order as well.
save("f8_fortran_2x3x4.npy", np.asfortranarray((np.arange(24, dtype=np.float64) * 0.25 - 3).reshape(2, 3, 4)))
save("i4_transposed_4x3.npy", (np.arange(12, dtype=np.int32) * 7 - 40).reshape(3, 4).T)
save("b1_fortran_3x2.npy", np.asfortranarray(np.array([[True, False], [False, False], [True, True]])))
save("f4_be_fortran_2x2x2.npy", np.asfortranarray((np.arange(8, dtype=np.float32) + 0.5).astype(">f4").reshape(2, 2, 2)))
