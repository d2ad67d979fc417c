#!/usr/bin/env python3
"""Reads a safetensors file the way the reference implementation does
(huggingface/safetensors: 8-byte little-endian header length, UTF-8 JSON,
data offsets that tile the data section exactly) using only json and
struct, checks the layout rules, and prints a canonical dump:

  meta KEY=VALUE                        metadata, sorted by key
  tensor NAME DTYPE [d0,d1,...] v...    header order; F32 as 8 hex digits of
                                        its bits, BF16 as 4, I32 decimal,
                                        BOOL 0/1

When the `safetensors` package (with numpy) is importable, the file is also
loaded with safetensors.numpy.load_file and compared with this reading.
Exit status: 0 ok, 1 the file breaks a rule (message on stderr).
"""
import json
import struct
import sys

SIZES = {"F32": 4, "I32": 4, "BOOL": 1, "BF16": 2}
FORMATS = {"F32": "<I", "I32": "<i", "BOOL": "<B", "BF16": "<H"}


def fail(msg):
    sys.stderr.write("read_safetensors.py: %s\n" % msg)
    sys.exit(1)


def pairs_no_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            fail("duplicate key %r" % k)
        seen[k] = v
    return seen


def parse(path):
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        fail("file shorter than 8 bytes")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > 100_000_000:
        fail("header too large")
    if 8 + n > len(buf):
        fail("header length %d larger than the file" % n)
    if n % 8 != 0:
        fail("header length %d is not a multiple of 8" % n)
    raw = buf[8 : 8 + n]
    text = raw.decode("utf-8")  # raises on invalid UTF-8
    stripped = text.rstrip(" ")
    if not stripped.endswith("}") or len(text) - len(stripped) >= 8:
        fail("header padding is not at most 7 trailing spaces after the JSON")
    if not text.startswith("{"):
        fail("header does not start with '{'")
    header = json.loads(text, object_pairs_hook=pairs_no_duplicates)
    meta = header.pop("__metadata__", None) or {}
    for k, v in meta.items():
        if not isinstance(v, str):
            fail("metadata value for %r is not a string" % k)
    data = buf[8 + n :]
    tensors = []
    for name, info in header.items():
        dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in SIZES:
            fail("tensor %r: unexpected dtype %r" % (name, dtype))
        count = 1
        for d in shape:
            count *= d
        if count * SIZES[dtype] != end - begin:
            fail("tensor %r: shape %r and dtype %s do not match offsets [%d, %d]" % (name, shape, dtype, begin, end))
        tensors.append((name, dtype, shape, begin, end))
    # The reference (Metadata::validate) sorts by offsets and requires them
    # to start at 0, be contiguous, and end exactly at the end of the file.
    pos = 0
    for name, _, _, begin, end in sorted(tensors, key=lambda t: (t[3], t[4])):
        if begin != pos or end < begin:
            fail("tensor %r: invalid offsets [%d, %d] (expected to start at %d)" % (name, begin, end, pos))
        pos = end
    if pos != len(data):
        fail("the tensors cover %d bytes but the data section has %d" % (pos, len(data)))
    values = {}
    for name, dtype, shape, begin, end in tensors:
        size = SIZES[dtype]
        fmt = FORMATS[dtype]
        vals = [struct.unpack(fmt, data[i : i + size])[0] for i in range(begin, end, size)]
        if dtype == "BOOL":
            if any(v not in (0, 1) for v in vals):
                fail("tensor %r: BOOL bytes must be 0 or 1" % name)
        values[name] = vals
    return meta, tensors, values


def dump(meta, tensors, values):
    lines = []
    for k in sorted(meta, key=lambda s: s.encode("utf-8")):
        lines.append("meta %s=%s" % (k, meta[k]))
    for name, dtype, shape, _, _ in tensors:
        parts = ["tensor", name, dtype, "[" + ",".join(str(d) for d in shape) + "]"]
        for v in values[name]:
            parts.append("%08x" % v if dtype == "F32" else "%04x" % v if dtype == "BF16" else str(v))
        lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"


def compare_with_safetensors(path, meta, tensors, values):
    try:
        import numpy as np
        from safetensors import safe_open
        from safetensors.numpy import load_file
    except ImportError:
        sys.stderr.write("read_safetensors.py: safetensors/numpy not installed; checked with json+struct only\n")
        return
    loaded = load_file(path)
    if set(loaded) != {t[0] for t in tensors}:
        fail("safetensors reads names %r" % sorted(loaded))
    for name, dtype, shape, _, _ in tensors:
        arr = loaded[name]
        if list(arr.shape) != list(shape):
            fail("safetensors: %r has shape %r" % (name, arr.shape))
        if dtype == "BF16":  # numpy has no bfloat16: the bits as uint16 when it hands them over
            if arr.dtype.itemsize != 2:
                fail("safetensors: %r has dtype %r" % (name, arr.dtype))
            got = [int(x) for x in np.ascontiguousarray(arr).view("<u2").ravel()]
        elif dtype == "F32":
            got = [int(x) for x in np.ascontiguousarray(arr, dtype="<f4").view("<u4").ravel()]
        else:
            got = [int(x) for x in arr.ravel()]
        if got != values[name]:
            fail("safetensors: %r has different values" % name)
    with safe_open(path, framework="np") as f:
        if (f.metadata() or {}) != meta:
            fail("safetensors: metadata %r" % f.metadata())
    sys.stderr.write("read_safetensors.py: safetensors.numpy agrees\n")


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: read_safetensors.py FILE.safetensors\n")
        sys.exit(2)
    meta, tensors, values = parse(sys.argv[1])
    compare_with_safetensors(sys.argv[1], meta, tensors, values)
    sys.stdout.buffer.write(dump(meta, tensors, values).encode("utf-8"))


if __name__ == "__main__":
    main()
