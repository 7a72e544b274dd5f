#!/usr/bin/python3
"""Independent checks of `kvscope quantize`'s GGUF files, for tests/test_quantize.cpp.

  suite --out DIR    random Hugging Face checkpoints (numpy_gguf_convert.py's
                     shapes: GPT-2, Llama with grouped-query attention, Qwen2
                     with biases, and 256-wide ones whose rows fit the K-quants),
                     listed in DIR/suite.json
  check --model DIR --gguf FILE --type T --ref DIR --out REPORT.json
                     reads FILE with numpy_gguf.py's reader and compares it with
                     what llama.cpp's converter + llama-quantize (--pure) write
                     for the checkpoint DIR at type T: metadata, tensor names,
                     dims, types (1-D F32; llama-quantize's fallback for rows that
                     do not fit the blocks), offsets and alignment, and each
                     tensor's bytes: F32/F16/BF16, Q8_0, Q4_0 and Q5_0 byte for
                     byte against NumPy's quantization by llama.cpp's reference
                     rules (float32 arithmetic); Q4_K and Q6_K (fitted by a search)
                     decoded and within the error of numpy_gguf.py's plain
                     quantizer of the same format. Then writes REF: the decoded
                     weights in Hugging Face layout and ref.json, the NumPy
                     float64 forward's greedy steps over them.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_gguf as G  # noqa: E402
import numpy_gguf_convert as C  # noqa: E402

FILE_TYPE = {"F16": 1, "BF16": 32, "Q8_0": 7, "Q4_0": 2, "Q4_K": 14, "Q6_K": 18}

CHECKPOINTS = [
    ("gpt2", "gpt2", dict(C.GPT2, dtype="F32")),
    ("gpt2_wide", "gpt2", dict(C.GPT2, n_layer=1, n_embd=256, n_head=4, dtype="F32")),
    ("llama", "llama", dict(C.LLAMA, dtype="F32")),
    ("llama_wide", "llama", dict(C.LLAMA, **C.WIDE, dtype="F32")),
    ("qwen2", "qwen2", dict(C.QWEN2, dtype="F32")),
]


def suite(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for k, (name, family, opts) in enumerate(CHECKPOINTS):
        C.make(family, opts, os.path.join(out_dir, name), seed=500 + k)
    with open(os.path.join(out_dir, "suite.json"), "w") as f:
        json.dump({"checkpoints": [c[0] for c in CHECKPOINTS]}, f)


# ---- llama.cpp's reference rules (quantize_row_*_ref), in float32 -------------------


def roundf(v):
    """C's roundf: halves away from zero (v float32, exact in float64)."""
    v = v.astype(np.float64)
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def ref_q8_0(x):
    x = x.astype(np.float32).reshape(-1, 32)
    d = np.abs(x).max(axis=1) / np.float32(127)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), np.float32(0)).astype(np.float32)
    q = roundf(x * inv[:, None]).astype(np.int8)
    return np.concatenate([G.half_bytes(d), q.view(np.uint8)], axis=1).tobytes()


def ref_qx_0(x, bits):
    """Q4_0 / Q5_0: d = m / -2^(bits-1), m the value of largest magnitude (the first), q = min(top, trunc(x/d + half + 0.5))."""
    x = x.astype(np.float32).reshape(-1, 32)
    half, top = 1 << (bits - 1), (1 << bits) - 1
    m = x[np.arange(x.shape[0]), np.abs(x).argmax(axis=1)]
    d = (m / np.float32(-half)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), np.float32(0)).astype(np.float32)
    v = (x * inv[:, None]).astype(np.float32) + np.float32(half + 0.5)
    q = np.minimum(top, np.trunc(v.astype(np.float64))).astype(np.int64)
    parts = [G.half_bytes(d)] + ([G.bits32_pack(q >> 4)] if bits == 5 else []) + [G.nibbles_pack(q & 15)]
    return np.concatenate(parts, axis=1).tobytes()


EXACT = {"Q8_0": ref_q8_0, "Q4_0": lambda x: ref_qx_0(x, 4), "Q5_0": lambda x: ref_qx_0(x, 5)}


def written_type(qtype, name, a):
    """The type llama.cpp's tools give tensor `name` (array a) at file type qtype."""
    if a.ndim == 1:
        return "F32"
    if name == "position_embd.weight":  # never quantized; the converter writes it at a float outtype
        return qtype if qtype in ("F16", "BF16") else "F32"
    t, row = qtype, a.shape[1]
    if t in ("Q4_K", "Q6_K") and row % 256:
        t = {"Q4_K": "Q5_0", "Q6_K": "Q8_0"}[t]
    return t if row % G.TYPES[t][1] == 0 else "F16"


def expected_meta(model_dir, cfg, arch, qtype):
    wr = G.Writer()
    C.hparams(wr, arch, cfg)
    meta = {k: v for k, _, _, v in wr.kv}
    meta.update({"general.architecture": arch, "general.alignment": 32, "general.quantization_version": 2,
                 "general.file_type": FILE_TYPE[qtype]})
    tokens, types, merges, pre, add_bos = C.read_tokenizer(model_dir)
    vocab = cfg.get("vocab_size")
    tokens += ["[PAD%d]" % i for i in range(len(tokens), vocab)]
    types += [C.UNUSED] * (vocab - len(types))
    meta.update({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": tokens,
                 "tokenizer.ggml.token_type": types, "tokenizer.ggml.merges": merges,
                 "tokenizer.ggml.add_bos_token": int(add_bos)})
    for key in ("bos_token_id", "eos_token_id"):
        v = cfg.get(key)
        v = v[0] if isinstance(v, list) else v  # the converter writes the first of a list
        if v is not None:
            meta["tokenizer.ggml." + key] = v
    return meta


def check(model_dir, gguf, qtype, ref_dir, out):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    w = C.read_weights(model_dir)
    if cfg["model_type"] == "gpt2":
        arch, tensors = "gpt2", C.gpt2_tensors(cfg, w)
    else:
        arch, tensors = C.llama_tensors(cfg, w)
    with open(gguf, "rb") as f:
        raw = f.read()
    meta, infos, data = G.read_gguf(raw)
    problems = []
    for key, want in expected_meta(model_dir, cfg, arch, qtype).items():
        got = meta.get(key)
        same = (got is not None and np.float32(got) == np.float32(want)) if isinstance(want, float) else got == want
        if not same:
            problems.append("metadata %s: found %r, expected %r" % (key, str(got)[:80], str(want)[:80]))
    if [t[0] for t in infos] != [t[0] for t in tensors]:
        problems.append("tensor names %s, expected %s" % ([t[0] for t in infos], [t[0] for t in tensors]))
    if data % 32:
        problems.append("data section at %d, not a multiple of 32" % data)
    offset, stored, types = 0, {}, {}
    for (name, a, undo, hf_name), (gname, dims, tname, off) in zip(tensors, infos):
        want_t = written_type(qtype, name, a)
        types[name] = tname
        n, (_, bs, nb) = a.size, G.TYPES[tname]
        if tname != want_t or dims != list(reversed(a.shape)) or off != offset:
            problems.append("%s: %s %s at %d, expected %s %s at %d" % (name, tname, dims, off, want_t,
                                                                      list(reversed(a.shape)), offset))
            continue
        blob = raw[data + off:data + off + n // bs * nb]
        offset += (len(blob) + 31) // 32 * 32
        flat = np.ascontiguousarray(a).reshape(-1)
        if tname in ("F32", "F16", "BF16"):
            if blob != G.quantize(tname, flat, None):
                problems.append("%s: %s bytes differ from NumPy's" % (name, tname))
        elif tname in EXACT:
            if blob != EXACT[tname](flat):
                problems.append("%s: %s bytes differ from llama.cpp's reference rule in NumPy" % (name, tname))
        else:
            err = np.abs(G.dequantize(tname, blob, n) - flat)
            plain = np.abs(G.dequantize(tname, G.quantize(tname, flat, np.random.default_rng(0)), n) - flat)
            rms, prms = np.sqrt((err ** 2).mean()), np.sqrt((plain ** 2).mean())
            if not (rms <= 1.05 * prms and err.max() <= 2 * plain.max()):
                problems.append("%s: %s error rms %.3g max %.3g, NumPy's plain quantizer rms %.3g max %.3g"
                                % (name, tname, rms, err.max(), prms, plain.max()))
        stored[hf_name] = undo(G.dequantize(tname, blob, n).reshape(a.shape))
    if len(raw) != data + offset:
        problems.append("file size %d, expected %d" % (len(raw), data + offset))
    if not problems:
        C.write_reference_checkpoint(model_dir, ref_dir, stored)
        C.reference(ref_dir, 6, 8, seed=1)
    with open(out, "w") as f:
        json.dump({"problems": problems, "types": types}, f, indent=1)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("suite")
    s.add_argument("--out", required=True)
    c = sub.add_parser("check")
    for flag in ("--model", "--gguf", "--type", "--ref", "--out"):
        c.add_argument(flag, required=True)
    a = p.parse_args(argv)
    if a.cmd == "suite":
        suite(a.out)
    else:
        check(a.model, a.gguf, a.type, a.ref, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
