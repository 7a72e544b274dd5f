#!/usr/bin/python3
"""Independent NumPy (float64) reference for kvscope's Llama-architecture
engine (Llama, Mistral, Qwen2), written from Hugging Face's modeling_llama /
modeling_mistral / modeling_qwen2 conventions; shares only the safetensors
and tokenizer helpers with numpy_ref.py.

Run with Debian's interpreter (/usr/bin/python3, python3-numpy); no torch.

Modes
  make   --out DIR [options]   one random checkpoint in Hugging Face layout:
         config.json, model.safetensors (or shards model-0000N-of-0000M
         .safetensors + model.safetensors.index.json), tokenizer.json (a
         byte-level BPE learnt from numpy_ref's built-in text).
  ref    --model DIR --prompt 1,2,3 [--steps N] --out FILE
         prefill + N greedy steps of the float64 forward, JSON as numpy_ref.py
         writes it, with k and v of shape (layer, R, n_kv_head * head_dim)
         (K after RoPE, as a cache holds it).
  evref  --model DIR --kv-evict tova|h2o --kv-budget N [--kv-dtype D] --out FILE
         numpy_ref.py's eviction-by-score reference with this forward.
  suite  --out DIR   the checkpoints the C++ tests use (GQA ratios 1, 2, 3, 4;
         tied and untied; rope_scaling llama3 and linear; Qwen2 biases; a
         Mistral sliding window; explicit head_dim; sharded and single-file;
         F32, F16, BF16), each with ref.json, plus DIR/suite.json.

The forward
  x = embed[ids]; per layer:
    h = RMSNorm(x) * g            RMSNorm(x) = x / sqrt(mean(x^2) + eps)
    q = h Wq^T (+ bq), k = h Wk^T (+ bk), v = h Wv^T (+ bv)
    q, k rotated by RoPE, rotate-half convention: x cos + rotate_half(x) sin,
      rotate_half([x1, x2]) = [-x2, x1], angle = pos * inv_freq[i mod hd/2],
      inv_freq = theta^(-2i/hd), rescaled by rope_scaling (linear: / factor;
      llama3: long wavelengths / factor, short kept, smooth blend between)
    query head h reads K/V head h // (n_head / n_kv_head); causal mask, and
      with a sliding window W a query at i sees only j > i - W
    x += softmax(q k^T / sqrt(hd)) v Wo^T
    x += (silu(h2 Wgate^T) * (h2 Wup^T)) Wdown^T,  h2 = RMSNorm(x) * g2
  logits = RMSNorm(x) * g_final @ head^T   (head = embed when tied)
"""

import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_ref as base  # noqa: E402  (safetensors + tokenizer helpers)


# ----------------------------------------------------------------------------
# tokenizer.json (byte-level BPE, as SmolLM2's layout)
# ----------------------------------------------------------------------------


def write_tokenizer_json(out_dir, vocab_size, synthetic=False):
    vocab, merges = base.tokenizer_files(vocab_size, synthetic=synthetic)
    eot = vocab.pop("<|endoftext|>")
    tj = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": eot, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": ["%s %s" % (a, b) for a, b in merges]},
    }
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    return eot


# ----------------------------------------------------------------------------
# Random checkpoints
# ----------------------------------------------------------------------------


def make_checkpoint(out_dir, model_type="llama", n_layer=2, n_head=4, n_kv_head=2, n_embd=32, head_dim=None,
                    n_inner=64, ctx=64, vocab_size=300, dtype="F32", tied=True, shards=1, rope_theta=10000.0,
                    rope_scaling=None, sliding_window=None, eps=1e-6, seed=0, std=0.3, synthetic_vocab=False):
    """Writes a random checkpoint in HF layout; returns n_params (a tied head counted once)."""
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    hd = head_dim or n_embd // n_head
    d, q, kv = n_embd, n_head * hd, n_kv_head * hd

    def normal(*shape, s=std):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(s)).astype(np.float32)

    bias = model_type == "qwen2"
    t = [("model.embed_tokens.weight", normal(vocab_size, d, s=1.0))]
    for i in range(n_layer):
        p = "model.layers.%d." % i
        t += [(p + "input_layernorm.weight", 1.0 + normal(d, s=0.1)),
              (p + "self_attn.q_proj.weight", normal(q, d)),
              (p + "self_attn.k_proj.weight", normal(kv, d)),
              (p + "self_attn.v_proj.weight", normal(kv, d))]
        if bias:
            t += [(p + "self_attn.q_proj.bias", normal(q, s=0.1)),
                  (p + "self_attn.k_proj.bias", normal(kv, s=0.1)),
                  (p + "self_attn.v_proj.bias", normal(kv, s=0.1))]
        t += [(p + "self_attn.o_proj.weight", normal(d, q)),
              (p + "post_attention_layernorm.weight", 1.0 + normal(d, s=0.1)),
              (p + "mlp.gate_proj.weight", normal(n_inner, d)),
              (p + "mlp.up_proj.weight", normal(n_inner, d)),
              (p + "mlp.down_proj.weight", normal(d, n_inner, s=std / 2))]
    t.append(("model.norm.weight", 1.0 + normal(d, s=0.1)))
    if not tied:
        t.append(("lm_head.weight", normal(vocab_size, d)))
    n_params = sum(int(np.prod(a.shape)) for _, a in t)
    tensors = [(n, a, dtype) for n, a in t]
    if shards == 1:
        base.write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, metadata={"format": "pt"})
    else:
        weight_map, total = {}, 0
        per = -(-len(tensors) // shards)
        for s in range(shards):
            name = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
            part = tensors[s * per:(s + 1) * per]
            base.write_safetensors(os.path.join(out_dir, name), part, metadata={"format": "pt"})
            for n, a, dt in part:
                weight_map[n] = name
                total += int(np.prod(a.shape)) * (4 if dt == "F32" else 2)
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    eot = write_tokenizer_json(out_dir, vocab_size, synthetic_vocab)
    arch = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}[model_type]
    cfg = {
        "architectures": [arch], "model_type": model_type, "hidden_act": "silu",
        "hidden_size": d, "intermediate_size": n_inner, "num_hidden_layers": n_layer,
        "num_attention_heads": n_head, "num_key_value_heads": n_kv_head,
        "max_position_embeddings": ctx, "rms_norm_eps": eps, "rope_theta": rope_theta,
        "rope_scaling": rope_scaling, "tie_word_embeddings": tied, "vocab_size": vocab_size,
        "bos_token_id": eot, "eos_token_id": [eot],
        "torch_dtype": {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype],
    }
    if head_dim:
        cfg["head_dim"] = head_dim
    if model_type == "mistral":
        cfg["sliding_window"] = sliding_window
    if model_type == "qwen2":
        cfg["use_sliding_window"] = False
        cfg["sliding_window"] = ctx
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return n_params


# ----------------------------------------------------------------------------
# The float64 forward
# ----------------------------------------------------------------------------


def load_model(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    index = os.path.join(model_dir, "model.safetensors.index.json")
    w = {}
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        for name in files:
            w.update(base.read_safetensors(os.path.join(model_dir, name)))
    else:
        w = base.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    if cfg.get("tie_word_embeddings", False) or "lm_head.weight" not in w:
        w["lm_head.weight"] = w["model.embed_tokens.weight"]
    return cfg, w


def rms_norm(x, g, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def inv_freq(cfg):
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    inv = 1.0 / (float(cfg.get("rope_theta", 10000.0)) ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    rs = cfg.get("rope_scaling")
    kind = (rs or {}).get("rope_type", (rs or {}).get("type", "default"))
    if kind == "linear":
        inv = inv / rs["factor"]
    elif kind == "llama3":
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        inv = np.where(medium, smoothed, scaled)
    return inv


def rope(x, positions, inv):
    """x (T, heads, hd), rotate-half convention."""
    ang = positions[:, None] * inv[None, :]            # (T, hd/2)
    cos = np.concatenate([np.cos(ang), np.cos(ang)], -1)[:, None, :]
    sin = np.concatenate([np.sin(ang), np.sin(ang)], -1)[:, None, :]
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * cos + rot * sin


def silu(x):
    return x / (1.0 + np.exp(-x))


def bf16_inputs(x):
    """x rounded to bfloat16 (to nearest even, through float32): what kvscope's
    --bf16-products does to the inputs of every matrix product."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def forward(cfg, w, ids, bf16=False):
    """Full causal forward. Returns logits (T, V), attention (layer, head, T, T),
    k and v (layer, T, n_kv_head * hd), k after RoPE. bf16: every matrix
    product's inputs rounded to bfloat16 first (the weights are the file's)."""
    def mm(x, name):
        return (bf16_inputs(x) if bf16 else x) @ w[name].T

    T = len(ids)
    H, Hkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim") or cfg["hidden_size"] // H
    eps = cfg.get("rms_norm_eps", 1e-6)
    window = cfg.get("sliding_window") if cfg["model_type"] == "mistral" else None
    inv = inv_freq(cfg)
    pos = np.arange(T, dtype=np.float64)
    i_idx, j_idx = np.arange(T)[:, None], np.arange(T)[None, :]
    mask = j_idx > i_idx
    if window:
        mask |= j_idx <= i_idx - window
    x = w["model.embed_tokens.weight"][ids]
    attn, ks, vs = [], [], []
    for layer in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % layer
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        proj = {}
        for n in ("q", "k", "v"):
            proj[n] = mm(h, p + "self_attn.%s_proj.weight" % n)
            if p + "self_attn.%s_proj.bias" % n in w:
                proj[n] = proj[n] + w[p + "self_attn.%s_proj.bias" % n]
        q = rope(proj["q"].reshape(T, H, hd), pos, inv)
        k = rope(proj["k"].reshape(T, Hkv, hd), pos, inv)
        v = proj["v"].reshape(T, Hkv, hd)
        ks.append(k.reshape(T, Hkv * hd))
        vs.append(v.reshape(T, Hkv * hd))
        group = H // Hkv
        a_l, o = [], np.zeros((T, H * hd))
        for head in range(H):
            g = head // group
            s = q[:, head, :] @ k[:, g, :].T / math.sqrt(hd)
            s[mask] = -np.inf
            a = base.softmax(s)
            a_l.append(a)
            o[:, head * hd:(head + 1) * hd] = a @ v[:, g, :]
        attn.append(np.array(a_l))
        x = x + mm(o, p + "self_attn.o_proj.weight")
        h2 = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        m = silu(mm(h2, p + "mlp.gate_proj.weight")) * mm(h2, p + "mlp.up_proj.weight")
        x = x + mm(m, p + "mlp.down_proj.weight")
    logits = mm(rms_norm(x, w["model.norm.weight"], eps), "lm_head.weight")
    return logits, np.array(attn), np.array(ks), np.array(vs)


def greedy_reference(cfg, w, prompt, n_steps, n_top=20, bf16=False):
    tokens, steps = list(prompt), []
    for s in range(n_steps + 1):
        logits, attn, ks, vs = forward(cfg, w, tokens, bf16)
        T = len(tokens)
        last = logits[-1]
        probs = base.softmax(last)
        order = np.argsort(-last, kind="stable")
        tok = int(order[0])
        rows = T if s == 0 else 1
        steps.append({
            "index": s, "seq_len": T, "token": tok, "prob": float(probs[tok]),
            "margin": float(last[order[0]] - last[order[1]]),
            "top": [[int(t), float(probs[t])] for t in order[:n_top]],
            "logits": last.tolist(), "n_rows": rows,
            "attn": attn[:, :, T - rows:, :].reshape(-1).tolist(),
            "k": ks[:, T - rows:, :].reshape(-1).tolist(),
            "v": vs[:, T - rows:, :].reshape(-1).tolist(),
        })
        tokens.append(tok)
    return {"config": cfg, "prompt": list(prompt), "n_steps": n_steps,
            "min_margin": min(st["margin"] for st in steps), "tokens": tokens, "steps": steps}


def llama_arch(cfg, w):
    """The Llama-family pieces for numpy_ref.evict_greedy (eviction by score)."""
    H, Hkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim") or cfg["hidden_size"] // H
    eps, inv = cfg.get("rms_norm_eps", 1e-6), inv_freq(cfg)

    def qkv(layer, x, pos):
        p, n = "model.layers.%d." % layer, x.shape[0]
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        proj = {}
        for name in ("q", "k", "v"):
            proj[name] = h @ w[p + "self_attn.%s_proj.weight" % name].T
            if p + "self_attn.%s_proj.bias" % name in w:
                proj[name] = proj[name] + w[p + "self_attn.%s_proj.bias" % name]
        posf = pos.astype(np.float64)
        return (rope(proj["q"].reshape(n, H, hd), posf, inv), rope(proj["k"].reshape(n, Hkv, hd), posf, inv),
                proj["v"].reshape(n, Hkv, hd))

    def post(layer, x, o):
        p = "model.layers.%d." % layer
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h2 = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        m = silu(h2 @ w[p + "mlp.gate_proj.weight"].T) * (h2 @ w[p + "mlp.up_proj.weight"].T)
        return x + m @ w[p + "mlp.down_proj.weight"].T

    return {"n_layer": cfg["num_hidden_layers"], "qkv": qkv, "post": post,
            "embed": lambda ids, pos: w["model.embed_tokens.weight"][ids],
            "logits": lambda xr: rms_norm(xr, w["model.norm.weight"], eps) @ w["lm_head.weight"].T}


# ----------------------------------------------------------------------------
# The test suite
# ----------------------------------------------------------------------------

LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 16}

# name: make_checkpoint options, prompt length, greedy steps
SUITE = [
    ("llama_gqa1_f32_tied_single", dict(model_type="llama", n_head=4, n_kv_head=4, n_embd=32, dtype="F32",
                                        tied=True, shards=1), 8, 20),
    ("llama_gqa3_bf16_untied_sharded_llama3", dict(model_type="llama", n_head=6, n_kv_head=2, n_embd=48,
                                                   n_inner=96, dtype="BF16", tied=False, shards=3,
                                                   rope_scaling=LLAMA3_SCALING, rope_theta=500000.0), 10, 20),
    ("qwen2_gqa4_f32_bias_sharded", dict(model_type="qwen2", n_head=8, n_kv_head=2, n_embd=64, n_inner=96,
                                         dtype="F32", tied=True, shards=2, rope_theta=1000000.0), 9, 20),
    ("mistral_gqa4_bf16_untied_window", dict(model_type="mistral", n_head=4, n_kv_head=1, n_embd=32,
                                             dtype="BF16", tied=False, sliding_window=8, n_layer=3), 12, 16),
    ("llama_gqa2_f16_headdim_linear", dict(model_type="llama", n_head=4, n_kv_head=2, n_embd=32, head_dim=16,
                                           dtype="F16", tied=True, shards=1,
                                           rope_scaling={"type": "linear", "factor": 2.0}), 7, 20),
    # The reference of --bf16-products: every product's inputs rounded to bf16.
    ("llama_gqa3_bf16_products", dict(model_type="llama", n_head=6, n_kv_head=2, n_embd=48, n_inner=96,
                                      dtype="BF16", tied=False, shards=1, bf16_products=True), 10, 20),
]

MIN_MARGIN = 2e-3


def build_suite(out_dir, only=None):
    os.makedirs(out_dir, exist_ok=True)
    index = []
    for k, (name, opts, n_prompt, n_steps) in enumerate(SUITE):
        if only and name not in only:
            continue
        cdir = os.path.join(out_dir, name)
        opts = dict(opts)
        bf16 = opts.pop("bf16_products", False)
        n_params = make_checkpoint(cdir, seed=200 + k, **opts)
        cfg, w = load_model(cdir)
        V = cfg["vocab_size"]
        rng = np.random.default_rng(2000 + k)
        ref, best = None, -1
        for _ in range(40):
            prompt = [int(t) for t in rng.integers(0, V - 1, size=n_prompt)]
            cand = greedy_reference(cfg, w, prompt, n_steps, bf16=bf16)
            distinct = len(set(cand["tokens"][n_prompt:]))
            if cand["min_margin"] >= MIN_MARGIN and distinct > best:
                ref, best = cand, distinct
                if distinct >= n_steps // 2:
                    break
        if ref is None:
            raise RuntimeError("%s: no prompt with a greedy margin >= %g" % (name, MIN_MARGIN))
        with open(os.path.join(cdir, "ref.json"), "w") as f:
            json.dump(ref, f)
        index.append({"name": name, "dir": name, "dtype": opts["dtype"], "n_params": n_params, "bf16_products": bf16,
                      "prompt": ref["prompt"], "n_steps": n_steps, "config": cfg})
    with open(os.path.join(out_dir, "suite.json"), "w") as f:
        json.dump({"checkpoints": index}, f, indent=1)
    return index


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("make", help="one random checkpoint in HF layout")
    m.add_argument("--out", required=True)
    m.add_argument("--model-type", choices=["llama", "mistral", "qwen2"], default="llama")
    m.add_argument("--layers", type=int, default=2)
    m.add_argument("--heads", type=int, default=4)
    m.add_argument("--kv-heads", type=int, default=2)
    m.add_argument("--embd", type=int, default=32)
    m.add_argument("--head-dim", type=int, default=None)
    m.add_argument("--inner", type=int, default=64)
    m.add_argument("--ctx", type=int, default=64)
    m.add_argument("--vocab", type=int, default=300)
    m.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    m.add_argument("--untied", action="store_true")
    m.add_argument("--shards", type=int, default=1)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--std", type=float, default=0.3)
    m.add_argument("--rope-theta", type=float, default=10000.0)
    m.add_argument("--synthetic-vocab", action="store_true",
                   help="byte-pair merges without a corpus (for large vocabularies)")
    r = sub.add_parser("ref", help="float64 greedy reference for a checkpoint dir")
    r.add_argument("--model", required=True)
    r.add_argument("--prompt", required=True, help="comma-separated token ids")
    r.add_argument("--steps", type=int, default=20)
    r.add_argument("--out", required=True, help="JSON file ('-' = stdout)")
    ev = sub.add_parser("evref", help="greedy reference under eviction by score (TOVA / H2O), per layer")
    base.evict_args(ev)
    s = sub.add_parser("suite", help="the checkpoints + references the C++ tests use")
    s.add_argument("--out", required=True)
    s.add_argument("--only", action="append")
    a = ap.parse_args(argv)
    if a.mode == "make":
        n = make_checkpoint(a.out, model_type=a.model_type, n_layer=a.layers, n_head=a.heads,
                            n_kv_head=a.kv_heads, n_embd=a.embd, head_dim=a.head_dim, n_inner=a.inner,
                            ctx=a.ctx, vocab_size=a.vocab, dtype=a.dtype, tied=not a.untied, shards=a.shards,
                            seed=a.seed, std=a.std, rope_theta=a.rope_theta, synthetic_vocab=a.synthetic_vocab)
        print(json.dumps({"dir": a.out, "n_params": n}))
    elif a.mode == "ref":
        cfg, w = load_model(a.model)
        prompt = [int(t) for t in a.prompt.split(",") if t.strip()]
        if not prompt:
            raise SystemExit("numpy_ref_llama: --prompt needs at least one token id")
        ref = greedy_reference(cfg, w, prompt, a.steps)
        if a.out == "-":
            json.dump(ref, sys.stdout)
        else:
            with open(a.out, "w") as f:
                json.dump(ref, f)
    elif a.mode == "evref":
        cfg, w = load_model(a.model)
        ref = base.evict_reference(llama_arch(cfg, w), cfg["vocab_size"], a.kv_dtype, a.kv_evict, a.kv_budget,
                                   a.n_prompt, a.steps, a.seed, prompt=base.evict_prompt(a))
        with open(a.out, "w") as f:
            json.dump(ref, f)
    else:
        idx = build_suite(a.out, a.only)
        print(json.dumps({"dir": a.out, "checkpoints": [c["name"] for c in idx]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
