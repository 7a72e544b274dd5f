#!/usr/bin/python3
"""Writes the seed corpora under tests/fuzz/corpus/<target>/ (checked in;
rerun after changing this file). Small valid and near-valid inputs:

  safetensors      tiny real checkpoints from tools/numpy_ref.py (F32, F16,
                   BF16, with/without prefix and buffers) and hand-made
                   headers (mixed dtypes, special half floats, scalars,
                   zero-size tensors, overlaps, bad lengths)
  config           Hugging Face GPT-2 config.json variants
  tokenizer_files  vocab.json + NUL + merges.txt
  tokenizer_text   text samples (UTF-8 and not)
  cli              argument lists, NUL-separated
  gguf             tools/numpy_gguf.py's small files (every value and tensor
                   type; alignment 64), an empty v3 header, a v2 header

Run with Debian's interpreter: /usr/bin/python3 tests/fuzz/make_corpus.py
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CORPUS = os.path.join(HERE, "corpus")


def bytes_to_unicode():
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()


def entry(bs):
    return "".join(B2U[b] for b in bs)


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- safetensors --------------------------------------------------------------


def safetensors(tensors, metadata=None, header_len_delta=0, raw_header=None):
    """tensors: list of (name, dtype, shape, payload bytes, offsets or None)."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, payload, offsets in tensors:
        if offsets is None:
            offsets = [len(data), len(data) + len(payload)]
            data += payload
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": offsets}
    h = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h) + header_len_delta) + h + data


def make_safetensors():
    tmp = tempfile.mkdtemp()
    try:
        variants = [
            ("tiny_f32_prefix.safetensors", []),
            ("tiny_f16_noprefix_buffers.safetensors", ["--dtype", "F16", "--no-prefix", "--buffers"]),
            ("tiny_bf16_untied.safetensors", ["--dtype", "BF16", "--untied"]),
        ]
        for name, extra in variants:
            out = os.path.join(tmp, name)
            subprocess.run([sys.executable, os.path.join(ROOT, "tools", "numpy_ref.py"), "make", "--out", out,
                            "--layers", "1", "--heads", "1", "--embd", "2", "--ctx", "2", "--vocab", "257",
                            "--seed", "3"] + extra, check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(out, "model.safetensors"), "rb") as f:
                write("safetensors", name, f.read())
    finally:
        shutil.rmtree(tmp)

    # Half floats: +0, -0, 1, -2, max, min subnormal, largest subnormal, inf, -inf, nan.
    halves = struct.pack("<10H", 0x0000, 0x8000, 0x3C00, 0xC000, 0x7BFF, 0x0001, 0x03FF, 0x7C00, 0xFC00, 0x7E00)
    mixed = [
        ("a.f32", "F32", [2], struct.pack("<2f", 1.5, -0.25), None),
        ("b.f16", "F16", [2, 5], halves, None),
        ("c.bf16", "BF16", [2], struct.pack("<2H", 0x3F80, 0xFF80), None),
        ("d.f64", "F64", [1], struct.pack("<d", 3.0), None),
        ("e.i32", "I32", [1], struct.pack("<i", -7), None),
        ("f.bool", "BOOL", [3], b"\x01\x00\x01", None),
        ("g.scalar", "F32", [], struct.pack("<f", 2.0), None),
        ("h.empty", "F32", [0, 4], b"", None),
    ]
    write("safetensors", "mixed_dtypes.safetensors", safetensors(mixed, metadata={"format": "pt"}))
    write("safetensors", "empty_header.safetensors", safetensors([]))
    write("safetensors", "metadata_only.safetensors", safetensors([], metadata={"k": "v"}))
    # Near-valid: each should be refused with a clear error.
    write("safetensors", "header_len_past_end.safetensors", safetensors(mixed[:1], header_len_delta=100))
    write("safetensors", "truncated.safetensors", safetensors(mixed[:2])[:-3])
    write("safetensors", "unknown_dtype.safetensors", safetensors([("x", "F128", [1], b"\0" * 16, None)]))
    write("safetensors", "shape_mismatch.safetensors", safetensors([("x", "F32", [3], b"\0" * 8, None)]))
    write("safetensors", "overlap.safetensors",
          safetensors([("x", "F32", [2], b"\0" * 8, [0, 8]), ("y", "F32", [1], b"", [4, 8])]) + b"\0" * 8)
    # Overlap hidden behind an empty tensor that sorts between the two.
    write("safetensors", "overlap_behind_empty.safetensors",
          safetensors([("x", "F32", [4], b"", [0, 16]), ("y", "F32", [0], b"", [4, 4]),
                       ("z", "F32", [1], b"", [8, 12])]) + b"\0" * 16)
    write("safetensors", "negative_offset.safetensors",
          safetensors([("x", "F32", [1], b"", [-4, 0])]) + b"\0" * 4)
    write("safetensors", "not_json.safetensors", safetensors([], raw_header=b"{\"x\": [1, 2"))
    write("safetensors", "short.safetensors", b"\x02\x00\x00")


# ---- config.json ------------------------------------------------------------------


def deep(levels):
    return "[" * levels + "1" + "]" * levels


def make_config():
    gpt2 = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
            "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
            "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "vocab_size": 50257}
    write("config", "gpt2.json", json.dumps(gpt2, indent=2))
    medium = dict(gpt2, n_embd=1024, n_head=16, n_layer=24)
    write("config", "gpt2_medium.json", json.dumps(medium, indent=2))
    with open(os.path.join(ROOT, "tests", "fuzz", "micro-model", "config.json"), "rb") as f:
        write("config", "micro.json", f.read())
    n_ctx_only = {k: v for k, v in gpt2.items() if k != "n_positions"}
    write("config", "n_ctx_only.json", json.dumps(n_ctx_only))
    write("config", "deep_value.json", '{"n_layer": ' + deep(1500) + "}")
    write("config", "minimal.json", '{"n_layer":1,"n_head":1,"n_embd":4,"n_positions":2,"vocab_size":257}')
    write("config", "nulls.json", '{"n_layer":2,"n_head":2,"n_embd":8,"n_positions":4,"vocab_size":300,'
          '"bos_token_id":null,"eos_token_id":null,"n_inner":null}')
    write("config", "pytorch_tanh.json", json.dumps(dict(gpt2, activation_function="gelu_pytorch_tanh")))
    # Near-valid.
    write("config", "bad_gelu.json", json.dumps(dict(gpt2, activation_function="gelu")))
    write("config", "not_divisible.json", json.dumps(dict(gpt2, n_head=7)))
    write("config", "float_layers.json", json.dumps(dict(gpt2, n_layer=12.0)))
    write("config", "eps_tiny.json", json.dumps(gpt2).replace("1e-05", "1e-50"))
    write("config", "eps_huge.json", json.dumps(gpt2).replace("1e-05", "1e300"))
    write("config", "eps_overflow.json", json.dumps(gpt2).replace("1e-05", "1e999"))
    write("config", "big_ints.json", json.dumps(dict(gpt2, vocab_size=18446744073709551615, n_layer=-1)))
    write("config", "eos_too_big.json", json.dumps(dict(gpt2, eos_token_id=50257)))
    write("config", "array.json", "[1, 2, 3]")
    write("config", "truncated.json", json.dumps(gpt2)[:40])


# ---- vocab.json + merges.txt --------------------------------------------------------


def make_tokenizer_files():
    with open(os.path.join(ROOT, "tests", "fuzz", "micro-model", "vocab.json"), "rb") as f:
        vocab = f.read()
    with open(os.path.join(ROOT, "tests", "fuzz", "micro-model", "merges.txt"), "rb") as f:
        merges = f.read()
    write("tokenizer_files", "micro", vocab + b"\0" + merges)
    v = {entry([b]): b for b in range(256)}
    base = json.dumps(v, ensure_ascii=False).encode()
    write("tokenizer_files", "bytes_only", base + b"\0")
    write("tokenizer_files", "bytes_only_ascii_escaped", json.dumps(v).encode() + b"\0#version: 0.2\n")
    v2 = dict(v)
    merges = [(b" ", b" "), (b"  ", b"  "), (b"a", b"b"), (b"ab", b"c"), (b"\xe2", b"\x80"), (b"\xe2\x80", b"\x99"),
              (b"a", b"b")]
    for a, b in merges:
        v2.setdefault(entry(a + b), len(v2))
    v2["<|endoftext|>"] = len(v2)
    lines = "#version: 0.2\n" + "".join(entry(a) + " " + entry(b) + "\n" for a, b in merges)
    write("tokenizer_files", "merges_lf", json.dumps(v2, ensure_ascii=False).encode() + b"\0" + lines.encode())
    write("tokenizer_files", "merges_crlf_tabs",
          json.dumps(v2, ensure_ascii=False).encode() + b"\0" + lines.replace("\n", "\r\n").replace(" ", "\t").encode())
    # Sparse ids (gaps), a non-table character entry, and near-valid ones.
    v3 = dict(v)
    v3["\u00e9\u4e2d"] = 1000
    v3["\u0000"] = 300
    write("tokenizer_files", "sparse_ids", json.dumps(v3).encode() + b"\0")
    v4 = dict(v)
    del v4[entry([0x41])]
    write("tokenizer_files", "missing_byte", json.dumps(v4).encode() + b"\0")
    write("tokenizer_files", "merge_unknown",
          base + b"\0" + (entry(b"q") + " " + entry(b"z") + "\n").encode())
    write("tokenizer_files", "merge_three_parts", base + b"\0a b c\n")
    write("tokenizer_files", "dup_id", json.dumps(dict(v, extra=5)).encode() + b"\0")
    write("tokenizer_files", "negative_id", json.dumps(dict(v, extra=-1)).encode() + b"\0")
    write("tokenizer_files", "not_object", b"[1,2]\0")


# ---- text ---------------------------------------------------------------------------


def make_text():
    samples = {
        "ascii": "The quick brown fox jumps over the lazy dog.",
        "contractions": "I'm sure you'll see they've said it's what we'd do, isn't it? 'S 'T",
        "numbers": "1234567890 3.14159 1,000,000 12th 0x1F",
        "whitespace": "a  b   c\t\td\n\n\ne \r\n f\u00a0g\u3000h\u2028i   ",
        "emoji": "\U0001F600\U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467 \u2764\ufe0f",
        "cjk": "\u4e2d\u6587\u6587\u672c \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \ud55c\uad6d\uc5b4",
        "combining": "e\u0301 a\u0308 \u0915\u094d\u0937 Z\u0351\u036b\u0343\u036a",
        "code": "def f(x):\n    return {'a': [x ** 2 for x in range(10)]}  # comment\n",
        "long_run": "a" * 200 + " " + "\u00e9" * 60 + " " * 70 + "9" * 80,
        "specials": "<|endoftext|> hello<|endoftext|>",
    }
    for name, text in samples.items():
        write("tokenizer_text", name, text)
    write("tokenizer_text", "invalid_bytes", b"ok \xe2\x80 \xff\xfe\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 end")
    write("tokenizer_text", "nul_and_controls", b"a\x00b\x01\x1f\x7f c")


# ---- command line --------------------------------------------------------------------


def make_cli():
    cmds = {
        "generate": ["generate", "--prompt", "Hello"],
        "generate_json": ["generate", "--prompt", "the cat", "--max-new", "4", "--json"],
        "generate_nocache": ["generate", "--prompt", "ab", "--no-cache", "--greedy", "--max-new", "20"],
        "generate_sampling": ["generate", "--prompt", "x", "--temperature", "0.7", "--top-k", "5", "--top-p", "0.9",
                              "--repetition-penalty", "1.3", "--seed", "42", "--stop", "e", "--stop", "."],
        "generate_conflict": ["generate", "--prompt", "x", "--greedy", "--temperature", "0.5"],
        "generate_empty_prompt": ["generate", "--prompt", ""],
        "generate_long_prompt": ["generate", "--prompt", "one two three four five six seven eight nine"],
        "generate_bad_model": ["generate", "--model", "/nonexistent", "--prompt", "x"],
        "generate_bad_number": ["generate", "--prompt", "x", "--max-new", "-3"],
        "tokenize": ["tokenize", "--text", "caf\u00e9 \U0001F600"],
        "tokenize_json": ["tokenize", "--text", "a b", "--json"],
        "inspect": ["inspect"],
        "inspect_json": ["inspect", "--json"],
        "bench": ["bench", "--lengths", "2", "4", "--reps", "1"],
        "bench_bad_length": ["bench", "--lengths", "100"],
        "render": ["render", "--prompt", "x", "--out", "a.png", "--layer", "0", "--head", "mean",
                   "--camera", "top", "--width", "64", "--height", "64", "--steps", "2"],
        "render_bad_layer": ["render", "--prompt", "x", "--out", "a.png", "--layer", "one"],
        "gui": ["--no-cache", "--max-new", "5", "--prompt", "hi", "--demo-frames", "3"],
        "gui_soak": ["--soak-rounds", "2", "--model", "/nonexistent"],
        "render_bench": ["render", "--prompt", "x", "--bench", "--presentation", "--heatmaps"],
        "render_video": ["render", "--prompt", "x", "--video", "v.mp4", "--frames", "f"],
        "help": ["--help"],
        "sub_help": ["generate", "--help"],
        "version": ["--version"],
        "unknown_flag": ["--frobnicate"],
        "unknown_sub": ["train"],
        "equals_syntax": ["generate", "--prompt=hi", "--max-new=2"],
        "empty": [],
    }
    for name, args in cmds.items():
        write("cli", name, "\0".join(args))


def make_saved_files():
    """Saved views and settings files: valid ones, ones made with a bigger model, near-misses."""
    view = {"kvscope_view": 1,
            "camera": {"target": [1.5, 0, -2], "distance": 20, "yaw": 0.3, "pitch": 0.25, "fov_y": 0.7,
                       "preset": ""},
            "step": 12, "prompt": "Once upon a time", "model": "", "max_new": 64, "cache": "kv_cache",
            "sampler": {"greedy": False, "temperature": 0.8, "top_k": 40, "top_p": 0.95,
                        "repetition_penalty": 1.2, "seed": 18446744073709551615},
            "attention": {"layer": 1, "head": 0, "min_weight": 0.05},
            "text_scale": 1.25, "presentation": True, "predict": False}
    write("saved_files", "view_valid.json", json.dumps(view))
    big = dict(view, step=4095, attention={"layer": 4095, "head": 4095, "min_weight": 0})
    write("saved_files", "view_other_model.json", json.dumps(big))
    write("saved_files", "view_preset_camera.json",
          json.dumps(dict(view, camera={"preset": "follow"}, cache="no_cache")))
    for name, patch in [("view_bad_version", {"kvscope_view": 2}), ("view_bad_cache", {"cache": "paged"}),
                        ("view_negative_step", {"step": -1}), ("view_huge_number", {"text_scale": 1e300}),
                        ("view_bad_seed", {"sampler": {"seed": -5}}),
                        ("view_target_strings", {"camera": {"target": ["a", 0, 0]}})]:
        write("saved_files", name + ".json", json.dumps(dict(view, **patch)))
    write("saved_files", "view_number_overflow.json", '{"kvscope_view": 1, "step": 1e999}')
    settings = {"window_width": 1600, "window_height": 900, "window_maximized": False, "preset": 3,
                "custom_prompt": "The KV cache", "speed": 2, "fastest": False, "max_new": 0, "layer": 11,
                "head": 11, "min_weight": 0.02, "beams": True, "greedy": True, "temperature": 1,
                "top_k": 0, "top_p": 1, "repetition_penalty": 1, "seed": 0, "model_dir_input": "",
                "camera": "front", "labels": True, "legend": True, "hud": True, "grid": True,
                "text_scale": 1, "colour_blind": False, "kv_context": 100000, "kv_dtype": 1,
                "bottom_tab": 2, "view_path": "lesson.json"}
    write("saved_files", "settings_valid.json", json.dumps(settings))
    write("saved_files", "settings_out_of_range.json",
          json.dumps(dict(settings, window_width=-5, preset=99, speed=1e30, temperature=0, top_p=0,
                          repetition_penalty=-1, kv_dtype=9, bottom_tab=-3, text_scale=0)))
    write("saved_files", "settings_wrong_types.json",
          json.dumps(dict(settings, speed="fast", layer=[1], camera=7, seed=-1)))
    write("saved_files", "not_an_object.json", "[1, 2, 3]")
    write("saved_files", "cut.json", json.dumps(settings)[:40])
    # Values nested past the readers' depth limit where an error message
    # quotes them (deep enough to matter, short enough for -max_len 4096).
    write("saved_files", "settings_deep_sampler.json", '{"sampler": ' + deep(1500) + "}")
    write("saved_files", "view_deep_camera.json", '{"kvscope_view": 1, "camera": ' + deep(1500) + "}")
    write("saved_files", "view_deep_target.json", '{"kvscope_view": 1, "camera": {"target": [' + deep(12) + ", 0, 0]}}")


def make_gguf():
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "numpy_gguf.py"), "suite", "--out", tmp],
                       check=True)
        for name in ["all_types.gguf", "aligned64.gguf"]:
            with open(os.path.join(tmp, name), "rb") as f:
                write("gguf", name, f.read())
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 0)
    write("gguf", "empty_v3.gguf", header)
    write("gguf", "v2_refused.gguf", b"GGUF" + struct.pack("<IQQ", 2, 0, 0))


if __name__ == "__main__":
    make_safetensors()
    make_config()
    make_tokenizer_files()
    make_text()
    make_cli()
    make_saved_files()
    make_gguf()
    for t in sorted(os.listdir(CORPUS)):
        print(t, len(os.listdir(os.path.join(CORPUS, t))))
