#!/usr/bin/python3
"""Hugging Face checkpoint -> GGUF, following the rules of llama.cpp's
convert_hf_to_gguf.py (written from its description, no code shared), for
kvscope's GGUF loader tests. Uses numpy_gguf.py's writer and quantizers and
the NumPy references numpy_ref.py (GPT-2) and numpy_ref_llama.py.

  convert --model DIR --out FILE [--type F32|F16|BF16|Q8_0|Q4_K] [--output-copy]
  suite --out DIR     the test files, listed in DIR/suite.json

The converter's rules
  names     llama.cpp's: token_embd, position_embd (gpt2), blk.N.attn_norm,
            attn_q / attn_k / attn_v (+ .bias for qwen2), attn_qkv (gpt2),
            attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down, output_norm, output
  dims      ggml order, the row length first: a PyTorch (out, in) weight is [in, out]
  gpt2      the Conv1D weights (stored (in, out)) are transposed to (out, in);
            --output-copy writes output.weight as a copy of token_embd (older converters)
  llama     q_proj and k_proj rows permuted by head (LlamaModel.permute: each
            head's rows [first half; second half] interleaved), k_proj by n_kv_head
  qwen2     not permuted; q/k/v biases
  tied      a tied lm_head is left out
  types     1-D tensors F32; 2-D tensors at --type
  tokenizer tokenizer.ggml.model "gpt2": tokens in vocab.json form, token_type
            (CONTROL for special added tokens, USER_DEFINED for other added
            ones, UNUSED for ids missing from the vocab), merges "a b",
            tokenizer.ggml.pre from the pre-tokenizer's rules, bos/eos ids,
            add_bos_token when the post-processor puts a token first

Suite (DIR/suite.json)
  "models": per GGUF file: its name, the file, the safetensors folder it came
    from ("safetensors", loaded by kvscope for equal logits), and for
    quantized types "reference": a folder with the weights as the GGUF
    stores them, decoded to float64 and written F32 in Hugging Face layout,
    and its ref.json (the NumPy forward, greedy steps).
  "tokenizers": per pre-tokenizer: a tokenizer.json and the GGUF holding
    the same tokenizer; "corpus": texts to encode with both.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_gguf as G  # noqa: E402
import numpy_ref as base  # noqa: E402
import numpy_ref_llama as ref_llama  # noqa: E402

CONTROL, USER_DEFINED, UNUSED, NORMAL = 3, 4, 5, 1
LLAMA3_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
QWEN2_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
               "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")

# ---- tensors ------------------------------------------------------------------------


def read_weights(model_dir):
    """{name: float64 array} of a single-file or sharded safetensors checkpoint."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if not os.path.exists(index):
        return base.read_safetensors(os.path.join(model_dir, "model.safetensors"))
    with open(index) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    w = {}
    for name in files:
        w.update(base.read_safetensors(os.path.join(model_dir, name)))
    return w


def permute(w, n_head):
    """LlamaModel.permute: rows of each head reordered so [x1; x2] halves interleave."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gpt2_tensors(cfg, w):
    """[(gguf name, array as written, undo)]: undo(array) gives the HF tensor back."""
    w = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in w.items()}
    ident = (lambda a: a)
    out = [("token_embd.weight", w["wte.weight"], ident, "wte.weight"),
           ("position_embd.weight", w["wpe.weight"], ident, "wpe.weight")]
    for i in range(cfg["n_layer"]):
        h, b = "h.%d." % i, "blk.%d." % i
        for hf, gg in (("ln_1", "attn_norm"), ("attn.c_attn", "attn_qkv"), ("attn.c_proj", "attn_output"),
                       ("ln_2", "ffn_norm"), ("mlp.c_fc", "ffn_up"), ("mlp.c_proj", "ffn_down")):
            conv = hf not in ("ln_1", "ln_2")
            out.append((b + gg + ".weight", w[h + hf + ".weight"].T if conv else w[h + hf + ".weight"],
                        (lambda a: a.T) if conv else ident, h + hf + ".weight"))
            out.append((b + gg + ".bias", w[h + hf + ".bias"], ident, h + hf + ".bias"))
    out += [("output_norm.weight", w["ln_f.weight"], ident, "ln_f.weight"),
            ("output_norm.bias", w["ln_f.bias"], ident, "ln_f.bias")]
    if "lm_head.weight" in w:
        out.append(("output.weight", w["lm_head.weight"], ident, "lm_head.weight"))
    return out


def llama_tensors(cfg, w):
    arch = "qwen2" if cfg["model_type"] == "qwen2" else "llama"
    H = cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads", H)
    ident = (lambda a: a)
    out = [("token_embd.weight", w["model.embed_tokens.weight"], ident, "model.embed_tokens.weight")]
    names = [("input_layernorm.weight", "attn_norm.weight"), ("self_attn.q_proj.weight", "attn_q.weight"),
             ("self_attn.k_proj.weight", "attn_k.weight"), ("self_attn.v_proj.weight", "attn_v.weight"),
             ("self_attn.q_proj.bias", "attn_q.bias"), ("self_attn.k_proj.bias", "attn_k.bias"),
             ("self_attn.v_proj.bias", "attn_v.bias"), ("self_attn.o_proj.weight", "attn_output.weight"),
             ("post_attention_layernorm.weight", "ffn_norm.weight"), ("mlp.gate_proj.weight", "ffn_gate.weight"),
             ("mlp.up_proj.weight", "ffn_up.weight"), ("mlp.down_proj.weight", "ffn_down.weight")]
    for i in range(cfg["num_hidden_layers"]):
        p, b = "model.layers.%d." % i, "blk.%d." % i
        for hf, gg in names:
            if p + hf not in w:
                continue
            a, undo = w[p + hf], ident
            if arch == "llama" and hf in ("self_attn.q_proj.weight", "self_attn.k_proj.weight"):
                n = H if "q_proj" in hf else Hkv
                a, undo = permute(a, n), (lambda x, n=n: unpermute(x, n))
            out.append((b + gg, a, undo, p + hf))
    out.append(("output_norm.weight", w["model.norm.weight"], ident, "model.norm.weight"))
    if not cfg.get("tie_word_embeddings", False) and "lm_head.weight" in w:
        out.append(("output.weight", w["lm_head.weight"], ident, "lm_head.weight"))
    return arch, out


# ---- metadata -----------------------------------------------------------------------


def hparams(wr, arch, cfg):
    k = lambda key, t, v: wr.add(arch + "." + key, t, v)  # noqa: E731
    if arch == "gpt2":
        k("block_count", G.U32, cfg["n_layer"])
        k("context_length", G.U32, cfg["n_positions"])
        k("embedding_length", G.U32, cfg["n_embd"])
        k("feed_forward_length", G.U32, 4 * cfg["n_embd"])
        k("attention.head_count", G.U32, cfg["n_head"])
        k("attention.layer_norm_epsilon", G.F32, cfg.get("layer_norm_epsilon", 1e-5))
        return
    H = cfg["num_attention_heads"]
    k("block_count", G.U32, cfg["num_hidden_layers"])
    k("context_length", G.U32, cfg["max_position_embeddings"])
    k("embedding_length", G.U32, cfg["hidden_size"])
    k("feed_forward_length", G.U32, cfg["intermediate_size"])
    k("attention.head_count", G.U32, H)
    k("attention.head_count_kv", G.U32, cfg.get("num_key_value_heads", H))
    k("attention.layer_norm_rms_epsilon", G.F32, cfg["rms_norm_eps"])
    k("rope.freq_base", G.F32, cfg.get("rope_theta", 10000.0))
    if cfg.get("head_dim"):
        k("attention.key_length", G.U32, cfg["head_dim"])
        k("attention.value_length", G.U32, cfg["head_dim"])
    rs = cfg.get("rope_scaling")
    if rs and (rs.get("type") or rs.get("rope_type")) == "linear":
        k("rope.scaling.type", G.STRING, "linear")
        k("rope.scaling.factor", G.F32, rs["factor"])


def detect_pre(tj):
    """llama.cpp's name for a tokenizer.json's pre-tokenizer rules."""
    pre = tj.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre])
    regexes = [s["pattern"].get("Regex") for s in steps if s.get("type") == "Split"]
    if LLAMA3_REGEX in regexes:
        return "llama-bpe"
    if QWEN2_REGEX in regexes:
        return "qwen2"
    if any(s.get("type") == "Digits" for s in steps):
        return "smollm"
    return "gpt-2"


def read_tokenizer(model_dir):
    """(tokens, types, merges, pre, add_bos) of a tokenizer.json or vocab.json + merges.txt."""
    tj_path = os.path.join(model_dir, "tokenizer.json")
    if os.path.exists(tj_path):
        with open(tj_path, encoding="utf-8") as f:
            tj = json.load(f)
        vocab, added = tj["model"]["vocab"], tj.get("added_tokens", [])
        merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"].get("merges", [])]
        pp = tj.get("post_processor") or {}
        add_bos = pp.get("type") == "TemplateProcessing" and "SpecialToken" in pp["single"][0]
        pre = detect_pre(tj)
    else:
        with open(os.path.join(model_dir, "vocab.json"), encoding="utf-8") as f:
            vocab = json.load(f)
        with open(os.path.join(model_dir, "merges.txt"), encoding="utf-8") as f:
            merges = [ln.rstrip("\n") for ln in f if ln.strip() and not ln.startswith("#version")]
        # GPT-2's tokenizer adds <|endoftext|> as its special token.
        added = [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>", "special": True}]
        add_bos, pre = False, "gpt-2"
    n = max(list(vocab.values()) + [a["id"] for a in added]) + 1
    tokens, types = ["[PAD%d]" % i for i in range(n)], [UNUSED] * n
    for t, i in vocab.items():
        tokens[i], types[i] = t, NORMAL
    for a in added:
        tokens[a["id"]], types[a["id"]] = a["content"], CONTROL if a.get("special") else USER_DEFINED
    return tokens, types, merges, pre, add_bos


def tokenizer_meta(wr, model_dir, cfg, pre=None, chat_template=None):
    tokens, types, merges, detected, add_bos = read_tokenizer(model_dir)
    wr.add("tokenizer.ggml.model", G.STRING, "gpt2")
    wr.add("tokenizer.ggml.pre", G.STRING, pre or detected)
    wr.add("tokenizer.ggml.tokens", G.ARRAY, tokens, G.STRING)
    wr.add("tokenizer.ggml.token_type", G.ARRAY, types, G.I32)
    wr.add("tokenizer.ggml.merges", G.ARRAY, merges, G.STRING)
    eos = cfg.get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) else eos
    if cfg.get("bos_token_id") is not None:
        wr.add("tokenizer.ggml.bos_token_id", G.U32, cfg["bos_token_id"])
    if eos is not None:
        wr.add("tokenizer.ggml.eos_token_id", G.U32, eos)
    wr.add("tokenizer.ggml.add_bos_token", G.BOOL, 1 if add_bos else 0)
    if chat_template:
        wr.add("tokenizer.chat_template", G.STRING, chat_template)


# ---- the converter --------------------------------------------------------------------


def convert(model_dir, out_path, qtype="F32", output_copy=False, ref_dir=None, bad=None):
    """Writes out_path; with ref_dir, also the weights as stored, decoded, in HF layout (F32).
    bad: {"drop": [names], "replace": {name: array}, "types": {name: tname}, "meta": {key: (type, value)},
    "extra": [(name, array)]} makes a broken file for the refusal tests."""
    bad = bad or {}
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    w = read_weights(model_dir)
    if cfg["model_type"] == "gpt2":
        arch, tensors = "gpt2", gpt2_tensors(cfg, w)
        if output_copy and not any(t[0] == "output.weight" for t in tensors):
            tensors.append(("output.weight", tensors[0][1], tensors[0][2], None))
    else:
        arch, tensors = llama_tensors(cfg, w)
    wr = G.Writer()
    wr.add("general.architecture", G.STRING, arch)
    wr.add("general.name", G.STRING, os.path.basename(os.path.normpath(model_dir)))
    hparams(wr, arch, cfg)
    tokenizer_meta(wr, model_dir, cfg)
    for key, (t, v) in bad.get("meta", {}).items():
        wr.kv = [e for e in wr.kv if e[0] != key] + [(key, t, None, v)]
    rng = np.random.default_rng(0)
    stored = {}
    for name, a, undo, hf_name in tensors + [(n, a, None, None) for n, a in bad.get("extra", [])]:
        if name in bad.get("drop", []):
            continue
        a = bad.get("replace", {}).get(name, a)
        tname = bad.get("types", {}).get(name, qtype if a.ndim == 2 else "F32")
        data = G.quantize(tname, np.ascontiguousarray(a).reshape(-1), rng)
        wr.add_tensor(name, list(reversed(a.shape)), tname, data)
        if hf_name:
            stored[hf_name] = undo(G.dequantize(tname, data, a.size).reshape(a.shape))
    raw, _, _ = wr.build()
    with open(out_path, "wb") as f:
        f.write(raw)
    if ref_dir:
        write_reference_checkpoint(model_dir, ref_dir, stored)
    return cfg


def write_reference_checkpoint(model_dir, ref_dir, stored):
    os.makedirs(ref_dir, exist_ok=True)
    base.write_safetensors(os.path.join(ref_dir, "model.safetensors"),
                           [(n, a.astype(np.float32), "F32") for n, a in stored.items()], metadata={"format": "pt"})
    for f in ("config.json", "tokenizer.json", "vocab.json", "merges.txt"):
        if os.path.exists(os.path.join(model_dir, f)):
            shutil.copy(os.path.join(model_dir, f), os.path.join(ref_dir, f))


def reference(ref_dir, n_prompt, n_steps, seed):
    """The NumPy float64 forward's greedy steps on the decoded weights, a prompt clear of ties."""
    with open(os.path.join(ref_dir, "config.json")) as f:
        gpt2 = json.load(f)["model_type"] == "gpt2"
    cfg, w = (base if gpt2 else ref_llama).load_model(ref_dir)
    rng = np.random.default_rng(seed)
    for _ in range(40):
        prompt = [int(t) for t in rng.integers(0, cfg["vocab_size"] - 1, size=n_prompt)]
        ref = (base if gpt2 else ref_llama).greedy_reference(cfg, w, prompt, n_steps)
        if ref["min_margin"] >= 2e-3:
            break
    with open(os.path.join(ref_dir, "ref.json"), "w") as f:
        json.dump({k: ref[k] for k in ("prompt", "n_steps", "tokens", "min_margin")} |
                  {"logits": [s["logits"] for s in ref["steps"]]}, f)


# ---- the suite ------------------------------------------------------------------------

GPT2 = dict(n_layer=2, n_head=2, n_embd=32, n_positions=64, vocab_size=297)
LLAMA = dict(model_type="llama", n_layer=2, n_head=4, n_kv_head=2, n_embd=32, n_inner=64, tied=False)
QWEN2 = dict(model_type="qwen2", n_layer=2, n_head=4, n_kv_head=1, n_embd=32, n_inner=64, tied=True,
             rope_theta=1000000.0)
# Q4_K's rows are multiples of 256 weights; smaller weights keep the f32 logits of the wider model within 1e-4.
WIDE = dict(n_layer=1, n_embd=256, n_inner=256, std=0.15)

# name, family, checkpoint options, GGUF type, write output.weight as a copy (gpt2)
MODELS = [
    ("gpt2.F32", "gpt2", dict(GPT2, dtype="F32"), "F32", False),
    ("gpt2.F16", "gpt2", dict(GPT2, dtype="F16"), "F16", True),
    ("gpt2.Q8_0", "gpt2", dict(GPT2, dtype="F32"), "Q8_0", False),
    ("gpt2.Q4_K", "gpt2", dict(GPT2, n_layer=1, n_embd=256, n_head=4, dtype="F32"), "Q4_K", False),
    ("llama.F32", "llama", dict(LLAMA, dtype="F32"), "F32", False),
    ("llama.F16", "llama", dict(LLAMA, dtype="F16"), "F16", False),
    ("llama.Q8_0", "llama", dict(LLAMA, dtype="F32"), "Q8_0", False),
    ("llama.Q4_K", "llama", dict(LLAMA, **WIDE, dtype="F32"), "Q4_K", False),
    ("llama.BF16", "llama", dict(LLAMA, dtype="BF16"), "BF16", False),
    ("qwen2.F32", "qwen2", dict(QWEN2, dtype="F32"), "F32", False),
    ("qwen2.F16", "qwen2", dict(QWEN2, dtype="F16"), "F16", False),
    ("qwen2.Q8_0", "qwen2", dict(QWEN2, dtype="F32"), "Q8_0", False),
    ("qwen2.Q4_K", "qwen2", dict(QWEN2, **WIDE, dtype="F32"), "Q4_K", False),
]


def make(family, opts, out_dir, seed):
    opts = dict(opts)
    if family == "gpt2":
        base.make_checkpoint(out_dir, opts.pop("n_layer"), opts.pop("n_head"), opts.pop("n_embd"),
                             opts.pop("n_positions"), opts.pop("vocab_size"), seed=seed, **opts)
    else:
        ref_llama.make_checkpoint(out_dir, seed=seed, **opts)


def nan_at(a, i):
    a = a.copy()
    a.reshape(-1)[i] = np.nan
    return a


def bad_files(out_dir, llama_dir):
    """Broken copies of the llama file, one fault each, and what the refusal must name."""
    q = np.zeros((32, 32))
    cases = {
        "missing": (dict(drop=["blk.1.ffn_up.weight"]), ["missing tensor \"blk.1.ffn_up.weight\"", "[32, 64]"]),
        "shape": (dict(replace={"blk.0.attn_k.weight": q}), ["\"blk.0.attn_k.weight\"", "[32, 32]", "[32, 16]"]),
        "norm_type": (dict(types={"blk.0.attn_norm.weight": "Q8_0"}),
                      ["\"blk.0.attn_norm.weight\"", "Q8_0", "expected F32, F16 or BF16"]),
        "arch": (dict(meta={"general.architecture": (G.STRING, "falcon")}), ["general.architecture", "falcon"]),
        "pre": (dict(meta={"tokenizer.ggml.pre": (G.STRING, "deepseek-llm")}), ["tokenizer.ggml.pre", "deepseek-llm"]),
        "tokenizer_model": (dict(meta={"tokenizer.ggml.model": (G.STRING, "bert")}),
                            ["tokenizer.ggml.model", "\"bert\""]),
        "rope_freqs": (dict(extra=[("rope_freqs.weight", np.ones(4))]), ["rope_freqs.weight", "not supported"]),
        "nan_norm": (dict(replace={"blk.1.ffn_norm.weight": nan_at(np.ones(32), 5)}),
                     ["\"blk.1.ffn_norm.weight\"", "NaN at element 5"]),
        "nan_block": (dict(replace={"blk.0.attn_v.weight": nan_at(np.ones((16, 32)), 40)},
                           types={"blk.0.attn_v.weight": "Q8_0"}), ["\"blk.0.attn_v.weight\"", "NaN", "row 1"]),
    }
    out = []
    for name, (fault, needles) in cases.items():
        path = os.path.join(out_dir, "bad_%s.gguf" % name)
        convert(llama_dir, path, "F32", bad=fault)
        out.append({"name": name, "gguf": os.path.basename(path), "needles": needles})
    return out


CORPUS = [
    "Hello world! It's a test, isn't it? We'll see, they'd say: I'M SURE you've DONE it.",
    "Digits 0123456789 and 3.14159, 2026-12-02, 1,000,000 and x=42;y=7",
    "  leading spaces,   several   between,\ttabs\t\there\n\nnew lines\r\n and trailing   ",
    "Unicode: caf\u00e9 na\u00efve \u00fcber Stra\u00dfe, \u4e2d\u6587\u6587\u672c, \u65e5\u672c\u8a9e, "
    "\u0440\u0443\u0441\u0441\u043a\u0438\u0439, \u03b1\u03b2\u03b3, emoji \U0001F600\U0001F680 and e\u0301 (combining)",
    "Special tokens inside text: <|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n",
    "glued<|endoftext|>words and a<tool>b and <tool> alone, <|im_end|><|im_end|>",
    "code: def f(x):\n    return x ** 2  # comment\n\tif (a && b) { c++; }",
    "",
    " ",
    "\u00a0non-breaking\u2003em space\u3000ideographic",
]


def tokenizers(out_dir):
    vocab, merges = base.tokenizer_files(500)
    eot = vocab["<|endoftext|>"]
    added = [{"id": eot, "content": "<|endoftext|>", "special": True}]
    for content, special in (("<|im_start|>", True), ("<|im_end|>", True), ("<tool>", False),
                             ("<|begin_of_text|>", True)):
        added.append({"id": len(vocab) + len(added) - 1, "content": content, "special": special})
    for a in added:
        a.update({"single_word": False, "lstrip": False, "rstrip": False, "normalized": False})
    bos = added[-1]["id"]
    bl = lambda regex: {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,  # noqa: E731
                        "use_regex": regex}
    split = lambda r: {"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False}  # noqa
    variants = {
        "gpt-2": (None, bl(True), False),
        "smollm": (None, {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                                                bl(True)]}, False),
        "qwen2": ({"type": "NFC"}, {"type": "Sequence", "pretokenizers": [split(QWEN2_REGEX), bl(False)]}, False),
        "llama-bpe": (None, {"type": "Sequence", "pretokenizers": [split(LLAMA3_REGEX), bl(False)]}, True),
    }
    out = []
    for pre, (norm, pretok, llama3) in variants.items():
        d = os.path.join(out_dir, "tok_" + pre)
        os.makedirs(d, exist_ok=True)
        tj = {"version": "1.0", "added_tokens": added, "normalizer": norm, "pre_tokenizer": pretok,
              "post_processor": None, "decoder": bl(True),
              "model": {"type": "BPE", "byte_fallback": False, "ignore_merges": llama3,
                        "vocab": {k: v for k, v in vocab.items() if k != "<|endoftext|>"},
                        "merges": ["%s %s" % m for m in merges]}}
        if llama3:
            tj["post_processor"] = {"type": "TemplateProcessing",
                                    "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                               {"Sequence": {"id": "A", "type_id": 0}}],
                                    "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>",
                                                                             "ids": [bos],
                                                                             "tokens": ["<|begin_of_text|>"]}}}
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False)
        wr = G.Writer()
        wr.add("general.architecture", G.STRING, "llama")
        tokenizer_meta(wr, d, {"bos_token_id": bos, "eos_token_id": eot},
                       chat_template="{{ bos_token }}{% for m in messages %}{{ m['content'] }}{{ eos_token }}"
                                     "{% endfor %}")
        with open(os.path.join(out_dir, "tok_%s.gguf" % pre), "wb") as f:
            f.write(wr.build()[0])
        out.append({"pre": pre, "json": "tok_%s/tokenizer.json" % pre, "gguf": "tok_%s.gguf" % pre, "bos": bos,
                    "add_bos": llama3, "specials": ["<|im_start|>", "<tool>"]})
    return out + [spm_tokenizer(out_dir)]


SPM = "\u2581"


def spm_pieces(n_merged):
    """A SentencePiece-style BPE vocabulary learnt from numpy_ref's text (words
    with U+2581 in front): (tokens, scores, types). <unk>, <s>, </s>, the 256
    byte pieces <0xNN>, the merged pieces in learning order (score -order),
    then the single characters (lowest scores), as Llama-2's model lists them."""
    counts = {}
    for w in base.CORPUS.split():
        key = tuple(SPM + w)
        counts[key] = counts.get(key, 0) + 1
    chars = sorted({c for w in counts for c in w})
    merged = []
    while len(merged) < n_merged:
        best = base.best_pair(counts)
        if best is None:
            break
        merged.append(best[0] + best[1])
        counts = base.merge_counts(counts, best)
    merged = [m for k, m in enumerate(merged) if m not in merged[:k] and m not in chars]
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + merged + chars
    scores = [0.0] * 259 + [-float(k) for k in range(len(merged))] + [-1e6 - k for k in range(len(chars))]
    types = [2, 3, 3] + [6] * 256 + [NORMAL] * (len(merged) + len(chars))
    return tokens, scores, types


def spm_merges(tokens, scores):
    """Hugging Face's SentencePieceExtractor: every split of a piece into two
    pieces, each piece's by (id of l, id of r), all by the piece's score, highest first."""
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for piece, score in zip(tokens, scores):
        local = [(piece[:k], piece[k:], score) for k in range(1, len(piece))
                 if piece[:k] in vocab and piece[k:] in vocab]
        merges += sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]]))
    return [[a, b] for a, b, _ in sorted(merges, key=lambda m: m[2], reverse=True)]


def spm_tokenizer(out_dir):
    """TinyLlama's (Llama-2's) tokenizer.json layout on spm_pieces, and the GGUF of the same vocabulary."""
    tokens, scores, types = spm_pieces(200)
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in range(3)]
    tj = {"version": "1.0", "added_tokens": added,
          "normalizer": {"type": "Sequence", "normalizers": [
              {"type": "Prepend", "prepend": SPM}, {"type": "Replace", "pattern": {"String": " "}, "content": SPM}]},
          "pre_tokenizer": None,
          "post_processor": {"type": "TemplateProcessing",
                             "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}}],
                             "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
          "decoder": {"type": "Sequence", "decoders": [
              {"type": "Replace", "pattern": {"String": SPM}, "content": " "}, {"type": "ByteFallback"},
              {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
          "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                    "vocab": {t: i for i, t in enumerate(tokens)}, "merges": spm_merges(tokens, scores)}}
    d = os.path.join(out_dir, "tok_llama")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    wr = G.Writer()
    wr.add("general.architecture", G.STRING, "llama")
    wr.add("tokenizer.ggml.model", G.STRING, "llama")
    wr.add("tokenizer.ggml.tokens", G.ARRAY, tokens, G.STRING)
    wr.add("tokenizer.ggml.scores", G.ARRAY, scores, G.F32)
    wr.add("tokenizer.ggml.token_type", G.ARRAY, types, G.I32)
    wr.add("tokenizer.ggml.bos_token_id", G.U32, 1)
    wr.add("tokenizer.ggml.eos_token_id", G.U32, 2)
    wr.add("tokenizer.ggml.unknown_token_id", G.U32, 0)
    wr.add("tokenizer.ggml.add_bos_token", G.BOOL, 1)
    with open(os.path.join(out_dir, "tok_llama.gguf"), "wb") as f:
        f.write(wr.build()[0])
    return {"pre": "llama (SentencePiece)", "json": "tok_llama/tokenizer.json", "gguf": "tok_llama.gguf", "bos": 1,
            "add_bos": True, "specials": ["<s>", "</s>", "<unk>"]}


def suite(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    models = []
    for k, (name, family, opts, qtype, output_copy) in enumerate(MODELS):
        src = os.path.join(out_dir, "hf_" + name.replace(".", "_"))
        make(family, opts, src, seed=300 + 10 * ["gpt2", "llama", "qwen2"].index(family) + (opts["n_embd"] > 32))
        entry = {"name": name, "family": family, "type": qtype, "gguf": name + ".gguf",
                 "safetensors": os.path.basename(src), "output_copy": output_copy}
        quantized = qtype not in ("F32", "F16", "BF16")
        ref_dir = os.path.join(out_dir, "ref_" + name.replace(".", "_")) if quantized else None
        convert(src, os.path.join(out_dir, name + ".gguf"), qtype, output_copy, ref_dir)
        if quantized:
            reference(ref_dir, 6, 8, seed=k)
            entry["reference"] = os.path.basename(ref_dir)
        models.append(entry)
    llama_f32 = os.path.join(out_dir, "hf_llama_F32")
    index = {"models": models, "bad": bad_files(out_dir, llama_f32), "tokenizers": tokenizers(out_dir),
             "corpus": CORPUS}
    with open(os.path.join(out_dir, "suite.json"), "w") as f:
        json.dump(index, f, indent=1)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert")
    c.add_argument("--model", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--type", default="F32", choices=sorted(G.TYPES))
    c.add_argument("--output-copy", action="store_true")
    s = sub.add_parser("suite")
    s.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.cmd == "convert":
        convert(a.model, a.out, a.type, a.output_copy)
    else:
        suite(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
