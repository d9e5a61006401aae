#!/usr/bin/python3
"""A .safetensors reader and writer written from the format specification
(huggingface/safetensors, README "Format"), with numpy only, to check
dimsum's checkpoints against an implementation that shares no code with it.

    safetensors_interop.py check <file>   read a file dimsum wrote, check it
    safetensors_interop.py write <file>   write a file for dimsum to load

The format: 8 bytes N (unsigned little-endian), N bytes of JSON header
{"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets":
[begin, end]}}, then the data buffer; offsets are relative to the buffer,
data is little-endian C order, and the tensors tile the buffer exactly.

The module is tests/unit/io_safetensors_interop.cpp's: embed (vocab=4,
d_model=3) F32 and blocks.{0,1}.W (nheads=2, d_model=3) F32, blocks.{0,1}.b
(d_model=3) F64. Element i (C order) of tensor `name` is
((7 i + 3 len(name) + 5 salt) mod 17) / 4 - 2, with salt 0 in files dimsum
writes and 1 in files this script writes: exact in float32.
"""

import json
import struct
import sys

import numpy as np

MODULE = {
    "embed": ("F32", (4, 3), "vocab d_model"),
    "blocks.0.W": ("F32", (2, 3), "nheads d_model"),
    "blocks.0.b": ("F64", (3,), "d_model"),
    "blocks.1.W": ("F32", (2, 3), "nheads d_model"),
    "blocks.1.b": ("F64", (3,), "d_model"),
}
NUMPY = {"F32": "<f4", "F64": "<f8"}


def pattern(name, shape, salt):
    i = np.arange(int(np.prod(shape)), dtype=np.int64)
    return (((7 * i + 3 * len(name) + 5 * salt) % 17) / 4.0 - 2.0).reshape(shape)


def fail(message):
    print("safetensors_interop: " + message)
    sys.exit(1)


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        fail("file shorter than 8 bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        fail("header length past the end of the file")
    header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    buffer = raw[8 + n :]
    metadata = header.pop("__metadata__", {})
    tensors, spans = {}, []
    for name, info in header.items():
        if set(info) != {"dtype", "shape", "data_offsets"}:
            fail("tensor %s: fields %s" % (name, sorted(info)))
        begin, end = info["data_offsets"]
        dtype = np.dtype(NUMPY[info["dtype"]])
        if end - begin != dtype.itemsize * int(np.prod(info["shape"])):
            fail("tensor %s: offsets do not match the shape" % name)
        spans.append((begin, end))
        tensors[name] = (info["dtype"], np.frombuffer(buffer[begin:end], dtype=dtype).reshape(info["shape"]))
    at = 0
    for begin, end in sorted(spans):
        if begin != at:
            fail("offsets do not tile the buffer")
        at = end
    if at != len(buffer):
        fail("trailing bytes after the tensors")
    return metadata, tensors


def check(path):
    metadata, tensors = read(path)
    if set(tensors) != set(MODULE):
        fail("names %s, expected %s" % (sorted(tensors), sorted(MODULE)))
    for name, (dtype, shape, dims) in MODULE.items():
        got_dtype, array = tensors[name]
        if got_dtype != dtype or array.shape != shape:
            fail("%s: %s %s, expected %s %s" % (name, got_dtype, array.shape, dtype, shape))
        if not np.array_equal(array, pattern(name, shape, 0)):
            fail("%s: values %s, expected %s" % (name, array.ravel(), pattern(name, shape, 0).ravel()))
        if metadata.get("dimsum.dims." + name) != dims:
            fail("%s: dims %r in the metadata, expected %r" % (name, metadata.get("dimsum.dims." + name), dims))
    if metadata.get("written_by") != "dimsum":
        fail("user metadata lost: %r" % metadata)
    print("safetensors_interop: %s read correctly" % path)


def write(path):
    # The buffer holds the tensors in reverse name order, and the header
    # lists them in yet another order, to show dimsum relies on neither.
    names = sorted(MODULE, reverse=True)
    header, chunks, at = {"__metadata__": {"written_by": "numpy"}}, [], 0
    for name in names:
        dtype, shape, dims = MODULE[name]
        data = pattern(name, shape, 1).astype(NUMPY[dtype]).tobytes(order="C")
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + len(data)]}
        header["__metadata__"]["dimsum.dims." + name] = dims
        chunks.append(data)
        at += len(data)
    text = json.dumps(dict(sorted(header.items(), key=lambda kv: len(kv[0])))).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)
    print("safetensors_interop: wrote %s" % path)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("check", "write"):
        fail("usage: safetensors_interop.py check|write <file>")
    (check if sys.argv[1] == "check" else write)(sys.argv[2])
