#!/usr/bin/python3
"""Writes the seed corpus for tests/fuzz/npy_fuzz.cpp into tests/fuzz/corpus/.

Run with Debian's numpy: /usr/bin/python3 tests/fuzz/make_corpus.py
Valid files come from numpy itself; malformed ones are hand-made variants,
one per error the reader must report. Every file is a few hundred bytes.
"""
import io
import os
import struct

import numpy as np
from numpy.lib import format as npy_format

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def npy(array, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, array)
    else:
        npy_format.write_array(buf, array, version=version)
    return buf.getvalue()


def by_hand(header, data=b"", major=1):
    """A file with the given header text, unpadded: magic, version, length."""
    header = header.encode("latin1") if isinstance(header, str) else header
    length = struct.pack("<H" if major == 1 else "<I", len(header))
    return b"\x93NUMPY" + bytes([major, 0]) + length + header + data


def dict_text(descr="'<f4'", order="False", shape="(2, 3)"):
    return "{'descr': %s, 'fortran_order': %s, 'shape': %s, }\n" % (descr, order, shape)


f4 = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
valid = {
    "valid_f4_2x3": npy(f4),
    "valid_f8_scalar": npy(np.array(-0.0)),
    "valid_f8_nan_inf": npy(np.array([np.nan, np.inf, -np.inf])),
    "valid_i4_5": npy(np.arange(5, dtype=np.int32) - 2),
    "valid_i8_2x1x2": npy(np.arange(4, dtype=np.int64).reshape(2, 1, 2) << 40),
    "valid_u2_3": npy(np.array([1, 2, 65535], dtype=np.uint16)),
    "valid_u1_1x2x1x3": npy(np.arange(6, dtype=np.uint8).reshape(1, 2, 1, 3)),
    "valid_u1_3x0": npy(np.zeros((3, 0), dtype=np.uint8)),
    "valid_i1_4": npy(np.array([-128, -1, 0, 127], dtype=np.int8)),
    "valid_b1_4": npy(np.array([True, False, False, True])),
    "valid_f4_big_endian": npy(f4.astype(">f4")),
    "valid_f8_v2": npy(np.array([1.5, -2.5]), version=(2, 0)),
    "valid_i4_v3": npy(np.array([7, -7], dtype=np.int32), version=(3, 0)),
    "valid_fortran_1x4": npy(np.asfortranarray(np.ones((1, 4), dtype=np.float32))),
    # Fortran order, transposed on reading: rank 2 and 3, a transposed C
    # array (np.save writes it as Fortran order), bool, big-endian, version
    # 2.0, a unit extent in the middle, and a hand-made empty one.
    "valid_fortran_2x3": npy(np.asfortranarray(f4)),
    "valid_fortran_f8_2x3x4": npy(np.asfortranarray(np.arange(24, dtype=np.float64).reshape(2, 3, 4))),
    "valid_fortran_transposed_i4_4x3": npy(np.arange(12, dtype=np.int32).reshape(3, 4).T),
    "valid_fortran_b1_3x2": npy(np.asfortranarray(np.array([[1, 0], [0, 0], [1, 1]], dtype=bool))),
    "valid_fortran_f4_big_endian": npy(np.asfortranarray(f4.astype(">f4"))),
    "valid_fortran_v2": npy(np.asfortranarray(f4), version=(2, 0)),
    "valid_fortran_u1_2x1x3": npy(np.asfortranarray(np.arange(6, dtype=np.uint8).reshape(2, 1, 3))),
    "valid_fortran_empty_2x0x3": by_hand(dict_text("'<f4'", "True", "(2, 0, 3)")),
    "valid_double_quotes": by_hand('{"descr": "<f4", "fortran_order": False, "shape": (2,)}', bytes(8)),
    "valid_reordered_keys": by_hand("{'shape':(2,),'descr':'|u1','fortran_order':False}", b"\x01\x02"),
    "valid_bool_byte_2": by_hand(dict_text("'|b1'", "False", "(2,)"), b"\x02\x00"),
}

good = npy(f4)
malformed = {
    "bad_empty": b"",
    "bad_magic": b"PK\x03\x04" + good[4:],
    "bad_version_4": good[:6] + b"\x04\x00" + good[8:],
    "bad_version_1_1": good[:6] + b"\x01\x01" + good[8:],
    "bad_cut_in_version": good[:7],
    "bad_cut_in_length": good[:9],
    "bad_header_past_end": good[:60],
    "bad_v2_huge_length": b"\x93NUMPY\x02\x00\xff\xff\xff\x7f{}",
    "bad_truncated_data": good[:-4],
    "bad_trailing_data": good + b"\x00\x00\x00\x00",
    "bad_fortran_truncated": npy(np.asfortranarray(f4))[:-4],
    "bad_fortran_trailing": npy(np.asfortranarray(f4)) + b"\x00\x00\x00\x00",
    "bad_object_pickle": npy(np.array([1, "a"], dtype=object)),
    "bad_structured": npy(np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")])),
    "bad_unicode": npy(np.array(["ab", "c"])),
    "bad_complex": npy(np.array([1 + 2j], dtype=np.complex64)),
    "bad_not_a_dict": by_hand("[1, 2, 3]\n", bytes(24)),
    "bad_unterminated_string": by_hand("{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3)}\n", bytes(24)),
    "bad_unterminated_tuple": by_hand("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3}\n", bytes(24)),
    "bad_unclosed_dict": by_hand("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3),\n", bytes(24)),
    "bad_missing_shape": by_hand("{'descr': '<f4', 'fortran_order': False}\n", bytes(24)),
    "bad_duplicate_key": by_hand("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", bytes(24)),
    "bad_extra_key": by_hand("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", bytes(24)),
    "bad_order_not_bool": by_hand(dict_text(order="0"), bytes(24)),
    "bad_shape_not_tuple": by_hand(dict_text(shape="(6)"), bytes(24)),
    "bad_shape_negative": by_hand(dict_text(shape="(-2, 3)"), bytes(24)),
    "bad_shape_overflow": by_hand(dict_text(shape="(4294967296, 4294967296)"), bytes(24)),
    "bad_shape_too_long_int": by_hand(dict_text(shape="(18446744073709551616,)"), bytes(24)),
    "bad_shape_huge_no_data": by_hand(dict_text(shape="(1000000000, 1000)"), bytes(24)),
    "bad_descr_not_string": by_hand(dict_text(descr="5"), bytes(24)),
    "bad_text_after_dict": by_hand("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} x\n", bytes(24)),
    "bad_backslash": by_hand(dict_text(descr="'<f\\x34'"), bytes(24)),
}

os.makedirs(OUT, exist_ok=True)
for old in os.listdir(OUT):
    os.remove(os.path.join(OUT, old))
for name, data in {**valid, **malformed}.items():
    with open(os.path.join(OUT, name + ".npy"), "wb") as f:
        f.write(data)
print("wrote %d files to %s" % (len(valid) + len(malformed), OUT))
