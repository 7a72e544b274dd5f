#!/usr/bin/env python3
"""Independent GGUF v3 writer and float64 dequantizer, written from the format's
description (ggml's docs/gguf.md and the block layouts of ggml-common.h), for
kvscope's GGUF tests. It shares no code with kvscope's C++ reader.

  numpy_gguf.py suite --out DIR     writes the test files and DIR/suite.json
  numpy_gguf.py dump FILE           prints a file's metadata and tensors (its own reader)

The suite's files hold metadata of every value type (scalars and arrays) and
tensors of every type kvscope reads, quantized from random data by plain
quantizers below (a block needs only valid contents, not the best ones), and
tensors of random block bytes (every bit pattern of the quants and packed
scales). suite.json lists, per file, what a reader must find: each metadata
value, each tensor's dims (ggml order), type, offset and byte count, the byte
positions of the header's fields (the C++ tests corrupt them), and the file
NAME.TENSOR.f64 holding the tensor decoded in float64 (little-endian).
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

# ---- value types -----------------------------------------------------------------

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
TYPE_NAMES = ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"]
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
              U64: "<Q", I64: "<q", F64: "<d"}

# ---- tensor types: ggml id, weights per block, bytes per block ---------------------

TYPES = {
    "F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22),
    "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176),
    "Q6_K": (14, 256, 210), "BF16": (30, 1, 2),
}


def f16(x):
    return np.asarray(x, dtype=np.float64).astype(np.float16)


def half_bytes(x):
    """(n,) float -> (n, 2) uint8: little-endian binary16."""
    return f16(x).reshape(-1, 1).view(np.uint8).reshape(-1, 2)


def half_values(b):
    """(n, 2) uint8 -> (n,) float64."""
    return np.ascontiguousarray(b).view("<f2").reshape(-1).astype(np.float64)


def bf16_bits(x):
    """float32 -> bfloat16 bits, rounded to nearest even."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def nibbles_pack(q):
    """(nb, 32) ints 0..15 -> (nb, 16) bytes: weight j low nibble, j + 16 high."""
    return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)


def nibbles_unpack(b):
    return np.concatenate([b & 15, b >> 4], axis=1).astype(np.int64)


def bits32_pack(bits):
    """(nb, 32) 0/1 -> (nb, 4) bytes: bit i of a little-endian uint32."""
    v = (bits.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(axis=1).astype("<u4")
    return v.reshape(-1, 1).view(np.uint8).reshape(-1, 4)


def bits32_unpack(b):
    v = np.ascontiguousarray(b).view("<u4").reshape(-1, 1).astype(np.uint64)
    return ((v >> np.arange(32, dtype=np.uint64)) & 1).astype(np.int64)


# ---- quantizers (random data -> valid blocks) ------------------------------------


def quant_q8_0(x):
    x = x.reshape(-1, 32)
    d = half_values(half_bytes(np.abs(x).max(axis=1) / 127))
    q = np.clip(np.round(x / np.where(d == 0, 1, d)[:, None]), -127, 127).astype(np.int8)
    return np.concatenate([half_bytes(d), q.view(np.uint8)], axis=1)


def quant_legacy(x, bits, with_min):
    """Q4_0 / Q5_0 (symmetric, w = d (q - 2^(bits-1))) and Q4_1 / Q5_1 (w = d q + m)."""
    x = x.reshape(-1, 32)
    top = (1 << bits) - 1
    if with_min:
        m = half_values(half_bytes(x.min(axis=1)))
        d = half_values(half_bytes((x.max(axis=1) - m) / top))
        q = np.clip(np.round((x - m[:, None]) / np.where(d == 0, 1, d)[:, None]), 0, top)
        head = [half_bytes(d), half_bytes(m)]
    else:
        half = 1 << (bits - 1)
        d = half_values(half_bytes(np.abs(x).max(axis=1) / (half - 1)))
        q = np.clip(np.round(x / np.where(d == 0, 1, d)[:, None]), -half, half - 1) + half
        head = [half_bytes(d)]
    q = q.astype(np.int64)
    parts = head + ([bits32_pack(q >> 4)] if bits == 5 else []) + [nibbles_pack(q & 15)]
    return np.concatenate(parts, axis=1)


def pack_k_scales(sc, mn):
    """(nb, 8) 6-bit scales and mins -> (nb, 12) bytes (the K-quants' packing)."""
    out = np.zeros((sc.shape[0], 12), dtype=np.int64)
    out[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = mn[:, 0:4] | ((mn[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 15) | ((mn[:, 4:8] & 15) << 4)
    return out.astype(np.uint8)


def unpack_k_scales(s):
    s = s.astype(np.int64)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc, mn


def quant_k45(x, bits):
    """Q4_K / Q5_K: 8 sub-blocks of 32, w = d sc q - dmin m."""
    x = x.reshape(-1, 8, 32)
    top = (1 << bits) - 1
    mins = np.maximum(0, -x.min(axis=2))
    scales = (x.max(axis=2) + mins) / top
    d = half_values(half_bytes(scales.max(axis=1) / 63))
    dmin = half_values(half_bytes(mins.max(axis=1) / 63))
    sc = np.clip(np.ceil(scales / np.where(d == 0, 1, d)[:, None]), 0, 63).astype(np.int64)
    mn = np.clip(np.ceil(mins / np.where(dmin == 0, 1, dmin)[:, None]), 0, 63).astype(np.int64)
    step = d[:, None, None] * sc[:, :, None]
    q = np.round((x + (dmin[:, None] * mn)[:, :, None]) / np.where(step == 0, 1, step))
    q = np.clip(q, 0, top).astype(np.int64)  # (nb, 8, 32)
    low = (q[:, 0::2, :] & 15) | ((q[:, 1::2, :] & 15) << 4)  # (nb, 4, 32): pair p, byte l
    parts = [half_bytes(d), half_bytes(dmin), pack_k_scales(sc, mn)]
    if bits == 5:
        high = ((q >> 4) << np.arange(8)[None, :, None]).sum(axis=1)  # bit k of byte l
        parts.append(high.astype(np.uint8))
    parts.append(low.reshape(-1, 128).astype(np.uint8))
    return np.concatenate(parts, axis=1)


def quant_q6_k(x, rng):
    """Q6_K: 16 sub-blocks of 16, w = d sc (q - 32), sc signed (some negated on purpose)."""
    x = x.reshape(-1, 16, 16)
    sign = np.where(rng.random(x.shape[:2]) < 0.3, -1, 1)
    scales = sign * np.abs(x).max(axis=2) / 31
    d = half_values(half_bytes(np.abs(scales).max(axis=1) / 127))
    sc = np.clip(np.round(scales / np.where(d == 0, 1, d)[:, None]), -128, 127).astype(np.int64)
    step = d[:, None, None] * sc[:, :, None]
    q = np.clip(np.round(x / np.where(step == 0, 1, step)), -32, 31).astype(np.int64) + 32
    q = q.reshape(-1, 2, 4, 32)  # half h, group g, l
    ql = np.zeros((q.shape[0], 2, 64), dtype=np.int64)
    ql[:, :, 0:32] = (q[:, :, 0] & 15) | ((q[:, :, 2] & 15) << 4)
    ql[:, :, 32:64] = (q[:, :, 1] & 15) | ((q[:, :, 3] & 15) << 4)
    qh = sum(((q[:, :, g] >> 4) & 3) << (2 * g) for g in range(4))  # (nb, 2, 32)
    return np.concatenate([ql.reshape(-1, 128).astype(np.uint8), qh.reshape(-1, 64).astype(np.uint8),
                           sc.astype(np.int8).view(np.uint8), half_bytes(d)], axis=1)


def quantize(tname, x, rng):
    """float data (row-major, rows of dims[0]) -> the tensor's bytes."""
    if tname == "F32":
        return x.astype("<f4").tobytes()
    if tname == "F16":
        return f16(x).astype("<f2").tobytes()
    if tname == "BF16":
        return bf16_bits(x).astype("<u2").tobytes()
    blocks = {
        "Q8_0": lambda: quant_q8_0(x), "Q4_0": lambda: quant_legacy(x, 4, False),
        "Q4_1": lambda: quant_legacy(x, 4, True), "Q5_0": lambda: quant_legacy(x, 5, False),
        "Q5_1": lambda: quant_legacy(x, 5, True), "Q4_K": lambda: quant_k45(x, 4),
        "Q5_K": lambda: quant_k45(x, 5), "Q6_K": lambda: quant_q6_k(x, rng),
    }[tname]()
    assert blocks.shape[1] == TYPES[tname][2], (tname, blocks.shape)
    return blocks.tobytes()


def random_blocks(tname, n_blocks, rng):
    """Random block bytes whose f16 scale fields hold finite values (any quants and packed scales)."""
    _, _, nbytes = TYPES[tname]
    b = rng.integers(0, 256, size=(n_blocks, nbytes), dtype=np.uint8)
    halves = {"Q8_0": [0], "Q4_0": [0], "Q5_0": [0], "Q4_1": [0, 2], "Q5_1": [0, 2], "Q4_K": [0, 2],
              "Q5_K": [0, 2], "Q6_K": [208]}[tname]
    for at in halves:
        b[:, at:at + 2] = half_bytes(rng.uniform(-2, 2, n_blocks) * 2.0 ** rng.integers(-12, 3, n_blocks))
    return b.tobytes()


# ---- dequantizers (float64, from the layouts) -------------------------------------


def dequantize(tname, raw, n):
    if tname == "F32":
        return np.frombuffer(raw, "<f4", n).astype(np.float64)
    if tname == "F16":
        return np.frombuffer(raw, "<f2", n).astype(np.float64)
    if tname == "BF16":
        bits = np.frombuffer(raw, "<u2", n).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64)
    _, bs, nbytes = TYPES[tname]
    b = np.frombuffer(raw, np.uint8, n // bs * nbytes).reshape(-1, nbytes)
    return DEQUANT[tname](b).reshape(-1)


def dq_q8_0(b):
    return half_values(b[:, 0:2])[:, None] * b[:, 2:].view(np.int8).astype(np.float64)


def dq_legacy(b, bits, with_min):
    d = half_values(b[:, 0:2])[:, None]
    at = 4 if with_min else 2
    q = nibbles_unpack(b[:, at + (4 if bits == 5 else 0):])
    if bits == 5:
        q = q | (bits32_unpack(b[:, at:at + 4]) << 4)
    if with_min:
        return d * q + half_values(b[:, 2:4])[:, None]
    return d * (q - (1 << (bits - 1)))


def dq_k45(b, bits):
    d = half_values(b[:, 0:2])
    dmin = half_values(b[:, 2:4])
    sc, mn = unpack_k_scales(b[:, 4:16])
    qs = b[:, 48:] if bits == 5 else b[:, 16:]
    pairs = qs.reshape(-1, 4, 32).astype(np.int64)
    q = np.stack([pairs & 15, pairs >> 4], axis=2).reshape(-1, 8, 32)  # sub-block 2p low, 2p+1 high
    if bits == 5:
        qh = b[:, 16:48].astype(np.int64)
        q = q | (((qh[:, None, :] >> np.arange(8)[None, :, None]) & 1) << 4)
    w = (d[:, None] * sc)[:, :, None] * q - (dmin[:, None] * mn)[:, :, None]
    return w.reshape(-1, 256)


def dq_q6_k(b):
    ql = b[:, 0:128].astype(np.int64).reshape(-1, 2, 64)
    qh = b[:, 128:192].astype(np.int64).reshape(-1, 2, 32)
    sc = b[:, 192:208].view(np.int8).astype(np.float64)
    d = half_values(b[:, 208:210])
    groups = []
    for g in range(4):
        src = ql[:, :, 32 * (g % 2):32 * (g % 2) + 32]
        nib = src & 15 if g < 2 else src >> 4
        groups.append(nib | (((qh >> (2 * g)) & 3) << 4))
    q = np.stack(groups, axis=2).reshape(-1, 256)  # index 128 h + 32 g + l
    return d[:, None] * np.repeat(sc, 16, axis=1) * (q - 32)


DEQUANT = {
    "Q8_0": dq_q8_0, "Q4_0": lambda b: dq_legacy(b, 4, False), "Q4_1": lambda b: dq_legacy(b, 4, True),
    "Q5_0": lambda b: dq_legacy(b, 5, False), "Q5_1": lambda b: dq_legacy(b, 5, True),
    "Q4_K": lambda b: dq_k45(b, 4), "Q5_K": lambda b: dq_k45(b, 5), "Q6_K": dq_q6_k,
}


# ---- the writer -------------------------------------------------------------------


class Writer:
    """Builds a GGUF v3 file, recording where each header field lies."""

    def __init__(self, alignment=32):
        self.alignment = alignment
        self.kv = []  # (key, type, elem_type or None, values)
        self.tensors = []  # (name, dims, tname, bytes)

    def add(self, key, vtype, value, elem=None):
        self.kv.append((key, vtype, elem, value))

    def add_tensor(self, name, dims, tname, data):
        self.tensors.append((name, list(dims), tname, data))

    def build(self):
        out = bytearray()
        layout = {"kv": [], "tensors": []}

        def put(fmt, v):
            at = len(out)
            out.extend(struct.pack(fmt, v))
            return at

        def put_str(s):
            b = s.encode("utf-8") if isinstance(s, str) else s
            at = put("<Q", len(b))
            out.extend(b)
            return at

        out.extend(b"GGUF")
        put("<I", 3)
        put("<Q", len(self.tensors))
        put("<Q", len(self.kv))
        for key, vtype, elem, value in self.kv:
            rec = {"key": key, "key_at": put_str(key), "type_at": put("<I", vtype)}
            if vtype == ARRAY:
                rec["elem_type_at"] = put("<I", elem)
                rec["count_at"] = put("<Q", len(value))
                items, t = value, elem
            else:
                items, t = [value], vtype
            rec["value_at"] = len(out)
            for v in items:
                put_str(v) if t == STRING else put(SCALAR_FMT[t], v)
            layout["kv"].append(rec)
        offset = 0
        offsets = []
        for name, dims, tname, data in self.tensors:
            rec = {"name": name, "name_at": put_str(name), "n_dims_at": put("<I", len(dims)), "dims_at": len(out)}
            for d in dims:
                put("<Q", d)
            rec["type_at"] = put("<I", TYPES[tname][0])
            rec["offset_at"] = put("<Q", offset)
            offsets.append(offset)
            offset += (len(data) + self.alignment - 1) // self.alignment * self.alignment
            layout["tensors"].append(rec)
        data_offset = (len(out) + self.alignment - 1) // self.alignment * self.alignment
        out.extend(b"\0" * (data_offset - len(out)))
        for (name, dims, tname, data), off in zip(self.tensors, offsets):
            out.extend(b"\0" * (data_offset + off - len(out)))
            out.extend(data)
        layout["data_offset"] = data_offset
        return bytes(out), offsets, layout


# ---- the reader (its own, for `dump` and to check the writer) -----------------------


def read_gguf(raw):
    pos = 0

    def get(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, raw, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def get_str():
        nonlocal pos
        n = get("<Q")
        s = raw[pos:pos + n]
        pos += n
        return s.decode("utf-8")

    def get_val(t):
        return get_str() if t == STRING else get(SCALAR_FMT[t])

    assert raw[:4] == b"GGUF"
    pos = 4
    assert get("<I") == 3
    n_t, n_kv = get("<Q"), get("<Q")
    meta = {}
    for _ in range(n_kv):
        key = get_str()
        t = get("<I")
        if t == ARRAY:
            et, n = get("<I"), get("<Q")
            meta[key] = [get_val(et) for _ in range(n)]
        else:
            meta[key] = get_val(t)
    align = meta.get("general.alignment", 32)
    tensors = []
    ids = {v[0]: k for k, v in TYPES.items()}
    for _ in range(n_t):
        name = get_str()
        dims = [get("<Q") for _ in range(get("<I"))]
        tensors.append((name, dims, ids[get("<I")], get("<Q")))
    data = (pos + align - 1) // align * align
    return meta, tensors, data


# ---- the suite ----------------------------------------------------------------------

# Every scalar type at its edges; f32 values are those a float32 holds.
SCALARS = [
    ("test.u8", U8, 255), ("test.i8", I8, -128), ("test.u16", U16, 65535), ("test.i16", I16, -32768),
    ("test.u32", U32, 4294967295), ("test.i32", I32, -2147483648), ("test.f32", F32, 0.1),
    ("test.bool_true", BOOL, 1), ("test.bool_false", BOOL, 0), ("test.string", STRING, "h\u00e9llo \u2713"),
    ("test.empty_string", STRING, ""), ("test.u64", U64, 2**64 - 1), ("test.i64", I64, -2**63),
    ("test.f64", F64, 3.141592653589793),
]
ARRAYS = [
    ("test.arr_u8", U8, [0, 1, 255]), ("test.arr_i8", I8, [-128, 0, 127]), ("test.arr_u16", U16, [0, 65535]),
    ("test.arr_i16", I16, [-32768, 32767]), ("test.arr_u32", U32, [7, 4294967295]),
    ("test.arr_i32", I32, [-2147483648, 2147483647]), ("test.arr_f32", F32, [1.5, -0.25, 1e-20]),
    ("test.arr_bool", BOOL, [1, 0, 1]), ("test.arr_string", STRING, ["a", "", "\u00fc\u00df", "<|eot|>"]),
    ("test.arr_u64", U64, [0, 2**64 - 1]), ("test.arr_i64", I64, [-2**63, 2**63 - 1]),
    ("test.arr_f64", F64, [2.5, -1e300]), ("test.arr_empty", I32, []),
]
# Shapes in ggml order (dims[0] = row length): rows that are one block, several
# blocks, several rows, 3-D and 4-D.
SHAPES = {
    "F32": [7, 3], "F16": [5, 2], "BF16": [3, 4], "Q8_0": [64, 3], "Q4_0": [32, 2, 2], "Q4_1": [96],
    "Q5_0": [64, 2], "Q5_1": [32, 3], "Q4_K": [512, 2], "Q5_K": [256, 3], "Q6_K": [256, 2, 2],
}


def stored(vtype, v):
    """A metadata value as a reader returns it (f32 rounded to float32)."""
    return float(np.float32(v)) if vtype == F32 else v


def write_file(out_dir, fname, writer, rng_data, record):
    raw, offsets, layout = writer.build()
    with open(os.path.join(out_dir, fname), "wb") as f:
        f.write(raw)
    meta, tensors, data_offset = read_gguf(raw)  # the writer's output reads back
    assert data_offset == layout["data_offset"]
    entry = {"file": fname, "alignment": writer.alignment, "data_offset": data_offset, "size": len(raw),
             "layout": layout, "metadata": [], "tensors": []}
    for key, vtype, elem, value in writer.kv:
        is_array = vtype == ARRAY
        t = elem if is_array else vtype
        vals = value if is_array else [value]
        if t != STRING and len(vals) > 64:
            vals = None  # (large arrays: count only)
        elif t == STRING and len(vals) > 64:
            vals = None
        entry["metadata"].append({"key": key, "type": TYPE_NAMES[t], "array": is_array,
                                  "count": len(value) if is_array else 1,
                                  "values": None if vals is None else [stored(t, v) for v in vals]})
    for (name, dims, tname, data), off in zip(writer.tensors, offsets):
        n = int(np.prod(dims))
        ref = dequantize(tname, data, n)
        ref_file = f"{fname}.{name}.f64"
        ref.astype("<f8").tofile(os.path.join(out_dir, ref_file))
        entry["tensors"].append({"name": name, "dims": dims, "type": tname, "type_id": TYPES[tname][0],
                                 "offset": off, "n_bytes": len(data), "ref": ref_file})
        if name in rng_data:  # quantized from data: the decoded values follow it
            x = rng_data[name]
            _, bs, _ = TYPES[tname]
            span = np.abs(x.reshape(-1, bs)).max(axis=1) if bs > 1 else np.abs(x)
            err = np.abs(ref - x).reshape(-1, bs).max(axis=1)
            limit = {1: 0.01, 32: 0.13, 256: 0.13}[bs] * np.maximum(span, 1e-3)
            assert np.all(err <= limit), (fname, name, float((err / np.maximum(span, 1e-3)).max()))
    record.append(entry)


def suite(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(1234)
    files = []

    # 1. every value type and every tensor type, default alignment (no general.alignment).
    w = Writer(32)
    w.add("general.architecture", STRING, "llama")
    for key, t, v in SCALARS:
        w.add(key, t, v)
    for key, t, v in ARRAYS:
        w.add(key, ARRAY, v, elem=t)
    w.add("test.dup_a", U8, 1)  # equal-length keys and names the tests make collide
    w.add("test.dup_b", U8, 2)
    data = {}
    for tname, dims in SHAPES.items():
        x = rng.normal(0, 1, int(np.prod(dims))) * rng.choice([1.0, 0.02, 30.0])
        if tname.endswith("_1") or tname.endswith("_K"):
            x = x + rng.normal(0, 0.5)  # not centred: the mins matter
        name = "q." + tname
        data[name] = x
        w.add_tensor(name, dims, tname, quantize(tname, x, rng))
    for tname in SHAPES:
        if TYPES[tname][1] > 1:
            n_blocks = 3 if TYPES[tname][1] == 256 else 5
            w.add_tensor("r." + tname, [TYPES[tname][1], n_blocks], tname, random_blocks(tname, n_blocks, rng))
    w.add_tensor("q.F32_4d", [2, 3, 2, 2], "F32", rng.normal(0, 1, 24).astype("<f4").tobytes())
    w.add_tensor("q.empty", [0, 4], "F32", b"")
    write_file(out_dir, "all_types.gguf", w, data, files)

    # 2. general.alignment 64: offsets and the data section on 64-byte boundaries.
    w = Writer(64)
    w.add("general.architecture", STRING, "gpt2")
    w.add("general.alignment", U32, 64)
    for i, tname in enumerate(["Q8_0", "F16", "Q6_K"]):
        n = TYPES[tname][1] * 2 if TYPES[tname][1] > 1 else 3
        x = rng.normal(0, 1, n * 2)
        data[f"a.{i}"] = x
        w.add_tensor(f"a.{i}", [n, 2], tname, quantize(tname, x, rng))
    write_file(out_dir, "aligned64.gguf", w, data, files)

    # 3. a header larger than a reader's read window (a vocabulary of 200 000
    # strings, one string of 5 MiB), so that its fields cross window edges.
    w = Writer(32)
    w.add("general.architecture", STRING, "qwen2")
    tokens = [f"tok{i:06d}_" + "x" * (i % 17) for i in range(200_000)]
    w.add("tokenizer.ggml.tokens", ARRAY, tokens, elem=STRING)
    w.add("test.long_string", STRING, "ab" * (5 << 19))
    w.add("tokenizer.ggml.scores", ARRAY, [float(i % 100) / 4 for i in range(200_000)], elem=F32)
    x = rng.normal(0, 1, 256 * 2)
    data["big.0"] = x
    w.add_tensor("big.0", [256, 2], "Q4_K", quantize("Q4_K", x, rng))
    write_file(out_dir, "big_header.gguf", w, data, files)
    files[-1]["spot_strings"] = {str(i): tokens[i] for i in [0, 1, 99_999, 150_001, 199_999]}

    # 4. hyperparameters of each architecture kvscope runs, as llama.cpp's
    # converter names them; "config" is what they say in kvscope's terms.
    for arch, untied in [("gpt2", False), ("llama", True), ("qwen2", False)]:
        w = Writer(32)
        w.add("general.architecture", STRING, arch)
        n_embd, vocab = 16, 24
        meta = {"block_count": (U32, 3), "embedding_length": (U32, n_embd), "attention.head_count": (U32, 4),
                "context_length": (U32, 64 if arch == "gpt2" else 32768)}
        if arch == "gpt2":
            meta["attention.layer_norm_epsilon"] = (F32, 1e-5)
            meta["feed_forward_length"] = (U32, 4 * n_embd)
        else:
            meta.update({"attention.head_count_kv": (U32, 2), "feed_forward_length": (U32, 40),
                         "attention.layer_norm_rms_epsilon": (F32, 1e-6), "rope.freq_base": (F32, 500000.0),
                         "attention.key_length": (U32, 4)})
        for k, (t, v) in meta.items():
            w.add(f"{arch}.{k}", t, v)
        w.add("tokenizer.ggml.tokens", ARRAY, [f"t{i}" for i in range(vocab)], elem=STRING)
        w.add("tokenizer.ggml.bos_token_id", U32, 1)
        w.add("tokenizer.ggml.eos_token_id", U32, 2)
        w.add_tensor("token_embd.weight", [n_embd, vocab], "F32", rng.normal(0, 1, n_embd * vocab).astype("<f4").tobytes())
        if untied:
            w.add_tensor("output.weight", [n_embd, vocab], "F16", f16(rng.normal(0, 1, n_embd * vocab)).tobytes())
        write_file(out_dir, f"{arch}_config.gguf", w, data, files)
        files[-1]["config"] = {
            "n_layer": 3, "n_embd": n_embd, "n_head": 4, "n_kv_head": 4 if arch == "gpt2" else 2,
            "head_dim": 4, "n_inner": 4 * n_embd if arch == "gpt2" else 40, "vocab_size": vocab,
            "max_position_embeddings": meta["context_length"][1], "bos": 1, "eos": 2,
            "eps": float(np.float32(meta.get("attention.layer_norm_epsilon", meta.get(
                "attention.layer_norm_rms_epsilon", (F32, 0)))[1])),
            "rope_theta": 500000.0, "tie": not untied, "qkv_bias": arch == "qwen2"}

    types = [{"name": k, "id": v[0], "block_size": v[1], "block_bytes": v[2]} for k, v in TYPES.items()]
    with open(os.path.join(out_dir, "suite.json"), "w") as f:
        json.dump({"files": files, "types": types}, f)


def dump(path):
    with open(path, "rb") as f:
        raw = f.read()
    meta, tensors, data = read_gguf(raw)
    for k, v in meta.items():
        s = repr(v)
        print(f"{k} = {s[:100]}")
    for name, dims, tname, off in tensors:
        print(f"{name} {dims} {tname} offset {off}")
    print(f"data section at byte {data}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("suite")
    s.add_argument("--out", required=True)
    d = sub.add_parser("dump")
    d.add_argument("file")
    a = p.parse_args()
    if a.cmd == "suite":
        suite(a.out)
    else:
        dump(a.file)


if __name__ == "__main__":
    sys.exit(main())
