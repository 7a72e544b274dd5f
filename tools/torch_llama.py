#!/usr/bin/python3
"""PyTorch Llama-architecture reference (Llama, Mistral, Qwen2) with its own KV
cache, for kvscope's speed comparison (tools/torch_bench.py bench picks it for
a folder whose config.json names one of these model types).

Run with Debian's interpreter (/usr/bin/python3, python3-torch CPU). Written
from Hugging Face's modeling_llama conventions, not from kvscope's engine:
RMSNorm, rotary embeddings in the rotate-half convention with linear / llama3
rope_scaling, grouped-query attention (query head h reads K/V head
h // (n_head / n_kv_head)), Qwen2's q/k/v biases, Mistral's sliding window,
SwiGLU MLP, tied or untied head.

Weights are read from the safetensors bytes and computed in float32 by
default (BF16/F16 widened once at load, as torch's CPU kernels are fastest in
f32); `--dtype bf16` keeps the matrices in bfloat16 for torch's own BF16
kernels. For speed the reference stacks q/k/v into one matrix and gate/up into
another (one GEMV each per token), the layout a tuned implementation uses.

Modes
  check  [--threads N]
         Against tools/numpy_ref_llama.py's float64 forward on random small
         checkpoints (GQA 1/3/4, tied and untied, llama3 and linear scaling,
         Qwen2 biases, a Mistral window, sharded, F32/F16/BF16): logits of a
         prefill and of 12 cached decode steps agree within 1e-4, and a NO
         CACHE forward agrees with the cached one. Exit status 1 on failure.
"""

import argparse
import json
import math
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

LLAMA_TYPES = ("llama", "mistral", "qwen2")


def read_weights(model_dir, reader):
    """{name: ndarray} over model.safetensors or the shards its index names."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if not os.path.exists(index):
        return reader(os.path.join(model_dir, "model.safetensors"))
    with open(index) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    w = {}
    for name in files:
        w.update(reader(os.path.join(model_dir, name)))
    return w


def rope_inv_freq(cfg, hd):
    """inv_freq (hd/2) in float64, rescaled as config.json's rope_scaling says."""
    i = torch.arange(0, hd, 2, dtype=torch.float64)
    inv = 1.0 / (float(cfg.get("rope_theta", 10000.0)) ** (i / hd))
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "linear":
        return inv / float(rs["factor"])
    if kind == "llama3":
        factor, lo, hi = float(rs["factor"]), float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
        orig = float(rs["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        out = inv.clone()
        long_ = wavelen > orig / lo  # low frequencies: slowed down by factor
        out[long_] = inv[long_] / factor
        mid = (wavelen <= orig / lo) & (wavelen >= orig / hi)  # blended
        s = (orig / wavelen[mid] - lo) / (hi - lo)
        out[mid] = (1 - s) * inv[mid] / factor + s * inv[mid]
        return out
    if kind != "default":
        raise ValueError("rope_scaling type %r is not implemented here" % kind)
    return inv


class TorchLlama:
    """Llama-architecture forward in PyTorch with its own KV cache."""

    def __init__(self, model_dir, dtype="f32"):
        import torch_bench  # safetensors reader (F32/F16/BF16 -> f32)

        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = c = json.load(f)
        if c.get("model_type") not in LLAMA_TYPES:
            raise ValueError("model_type %r is not one of %s" % (c.get("model_type"), LLAMA_TYPES))
        self.dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
        raw = read_weights(model_dir, torch_bench.load_safetensors_f32)
        w = {n: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)) for n, a in raw.items()}
        self.L, self.d = c["num_hidden_layers"], c["hidden_size"]
        self.H = c["num_attention_heads"]
        self.Hkv = c.get("num_key_value_heads") or self.H
        self.hd = c.get("head_dim") or self.d // self.H
        self.n_ctx = c["max_position_embeddings"]
        self.eps = float(c.get("rms_norm_eps", 1e-6))
        self.window = c.get("sliding_window") if c["model_type"] == "mistral" else None
        if c["model_type"] == "qwen2" and c.get("use_sliding_window"):
            self.window = c.get("sliding_window")
        self.inv = rope_inv_freq(c, self.hd)
        mat = lambda t: t.to(self.dtype).contiguous()  # noqa: E731
        self.embed = w["model.embed_tokens.weight"]  # (V, d), f32 rows gathered per token
        self.head = mat(w.get("lm_head.weight", w["model.embed_tokens.weight"]))
        if c.get("tie_word_embeddings", False):
            self.head = mat(w["model.embed_tokens.weight"])
        self.norm = w["model.norm.weight"]
        self.layers = []
        q, kv = self.H * self.hd, self.Hkv * self.hd
        for i in range(self.L):
            p = "model.layers.%d." % i
            a = p + "self_attn."
            bias = None
            if a + "q_proj.bias" in w:
                bias = torch.cat([w[a + "q_proj.bias"], w[a + "k_proj.bias"], w[a + "v_proj.bias"]])
            self.layers.append({
                "ln1": w[p + "input_layernorm.weight"], "ln2": w[p + "post_attention_layernorm.weight"],
                "qkv": mat(torch.cat([w[a + "q_proj.weight"], w[a + "k_proj.weight"], w[a + "v_proj.weight"]])),
                "qkv_b": bias, "o": mat(w[a + "o_proj.weight"]),
                "gate_up": mat(torch.cat([w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"]])),
                "down": mat(w[p + "mlp.down_proj.weight"]),
            })
        self.split = (q, kv, kv)
        self.inner = c["intermediate_size"]

    def new_cache(self, capacity=None):
        """K (after RoPE) and V of every layer: (layer, kv_head, capacity, head_dim) each, plus the fill."""
        cap = min(capacity or self.n_ctx, self.n_ctx)
        shape = (self.L, self.Hkv, cap, self.hd)
        return {"k": torch.zeros(shape), "v": torch.zeros(shape), "n": 0}

    def rms(self, x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * g

    def linear(self, x, w, b=None):
        """x (n, in) f32 -> (n, out) f32 with w (out, in)."""
        if w.dtype != x.dtype:
            y = F.linear(x.to(w.dtype), w).float()
            return y if b is None else y + b
        if x.shape[0] == 1:
            y = torch.mv(w, x[0]).unsqueeze(0)
            return y if b is None else y + b
        return F.linear(x, w, b)

    def rotate(self, x, pos0):
        """x (n, heads, hd) at positions pos0.. -> rotated, rotate-half convention."""
        n = x.shape[0]
        ang = (torch.arange(pos0, pos0 + n, dtype=torch.float64)[:, None] * self.inv[None, :])
        cos = torch.cat([ang.cos(), ang.cos()], -1).float()[:, None, :]
        sin = torch.cat([ang.sin(), ang.sin()], -1).float()[:, None, :]
        half = self.hd // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rot * sin

    def attend(self, q, K, V, pos0):
        """q (n, H, hd); K, V (Hkv, T, hd) -> (n, H * hd). Each K/V head serves a group of query heads."""
        n, T, g = q.shape[0], K.shape[1], self.H // self.Hkv
        qg = q.transpose(0, 1).reshape(self.Hkv, g * n, self.hd)  # (Hkv, g*n, hd), no copy of K/V
        s = torch.matmul(qg, K.transpose(1, 2)) / math.sqrt(self.hd)  # (Hkv, g*n, T)
        if n > 1 or self.window:
            i = torch.arange(pos0, pos0 + n)[:, None]
            j = torch.arange(T)[None, :]
            hide = j > i
            if self.window:
                hide = hide | (j <= i - self.window)
            s = s.view(self.Hkv, g, n, T).masked_fill(hide, float("-inf")).view(self.Hkv, g * n, T)
        o = torch.matmul(torch.softmax(s, dim=-1), V)  # (Hkv, g*n, hd)
        return o.view(self.H, n, self.hd).transpose(0, 1).reshape(n, self.H * self.hd)

    def forward(self, ids, cache=None):
        """Runs the new tokens `ids`. With a cache they follow its cache["n"]
        positions and their K/V are appended; without, they are the whole
        sequence. Returns the logits of the last position (V), f32."""
        pos0 = cache["n"] if cache is not None else 0
        n = len(ids)
        T = pos0 + n
        if cache is not None and T > cache["k"].shape[2]:
            raise ValueError("sequence of %d exceeds the cache's %d positions" % (T, cache["k"].shape[2]))
        x = self.embed[torch.tensor(ids, dtype=torch.long)]  # (n, d)
        for li, lw in enumerate(self.layers):
            h = self.rms(x, lw["ln1"])
            q, k, v = self.linear(h, lw["qkv"], lw["qkv_b"]).split(self.split, dim=1)
            q = self.rotate(q.view(n, self.H, self.hd), pos0)
            k = self.rotate(k.view(n, self.Hkv, self.hd), pos0).transpose(0, 1)  # (Hkv, n, hd)
            v = v.view(n, self.Hkv, self.hd).transpose(0, 1)
            if cache is not None:
                cache["k"][li, :, pos0:T] = k
                cache["v"][li, :, pos0:T] = v
                K, V = cache["k"][li, :, :T], cache["v"][li, :, :T]
            else:
                K, V = k, v
            x = x + self.linear(self.attend(q, K, V, pos0), lw["o"])
            gu = self.linear(self.rms(x, lw["ln2"]), lw["gate_up"])
            x = x + self.linear(F.silu(gu[:, :self.inner]) * gu[:, self.inner:], lw["down"])
        if cache is not None:
            cache["n"] = T
        last = self.rms(x[-1:], self.norm)
        return self.linear(last, self.head)[0]  # LM head for the last position only


# ----------------------------------------------------------------------------
# check
# ----------------------------------------------------------------------------


def check(threads):
    import numpy_ref_llama as ref

    torch.set_num_threads(threads)
    ok, results = True, []
    with tempfile.TemporaryDirectory(prefix="torch_llama_check_") as tmp, torch.inference_mode():
        for k, (name, opts, n_prompt, _) in enumerate(ref.SUITE):
            cdir = os.path.join(tmp, name)
            ref.make_checkpoint(cdir, seed=300 + k, **opts)
            cfg, w = ref.load_model(cdir)
            prompt = [int(t) for t in np.random.default_rng(k).integers(0, cfg["vocab_size"] - 1, size=n_prompt)]
            want = ref.greedy_reference(cfg, w, prompt, 12, n_top=1)
            m = TorchLlama(cdir)
            cache = m.new_cache()
            worst = worst_nc = 0.0
            tokens = list(prompt)
            for s, st in enumerate(want["steps"]):
                got = m.forward(tokens if s == 0 else tokens[-1:], cache).double().numpy()
                worst = max(worst, float(np.max(np.abs(got - np.array(st["logits"])))))
                nc = m.forward(tokens, None).double().numpy()
                worst_nc = max(worst_nc, float(np.max(np.abs(nc - got))))
                tokens.append(st["token"])
            good = worst <= 1e-4 and worst_nc <= 1e-4
            ok = ok and good
            results.append({"checkpoint": name, "max_abs_logit_diff_vs_numpy": worst,
                            "max_abs_diff_no_cache_vs_cache": worst_nc, "ok": good})
    return ok, {"check": "torch Llama vs numpy float64", "tolerance": 1e-4, "results": results, "ok": ok}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("check")
    c.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    ok, report = check(a.threads)
    print(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
