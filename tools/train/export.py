#!/usr/bin/python3
"""Export a trained run to a Hugging Face GPT-2 directory and measure its validation loss.

assets/models/<name>/: config.json, model.safetensors (F16, written by hand), vocab.json, merges.txt,
metrics.json (validation loss computed with the EXPORTED f16-rounded weights, read back from the file).

Validation protocol (must match the C++ test; also written into metrics.json and the model card):
  for each part (stories, facts, code, stdlib, english, handwritten_story): read val/<part>.txt (UTF-8), split it on the literal
  "<|endoftext|>", encode every document separately with the BPE (plain GPT-2 encoding, no special
  tokens inside), build the stream [eos] d1 [eos] d2 [eos] ... dN [eos], cut it into consecutive
  non-overlapping windows of n_positions tokens starting at index 0 (the last window keeps its
  remainder if it has >= 2 tokens), run each window as its own sequence from position 0 and take
  the cross-entropy (natural log) of every token in the window after its first, given its prefix.
  loss = sum of those nats / number of predicted tokens (all windows pooled).
  bits_per_byte = sum of nats / ln 2 / sum of the UTF-8 byte lengths of the predicted tokens
  (eos counts 0 bytes).
"""
import argparse
import json
import math
import os
import shutil
import struct

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before numpy/torch load libgomp
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import bpe
from model import GPT2

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PARTS = ["stories", "facts", "code", "stdlib", "english"]


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: np.ndarray (float16/float32)}. Format: u64 LE header length, JSON header
    {name: {dtype, shape, data_offsets [begin, end) relative to the data section}}, header padded
    with spaces to a multiple of 8, then the raw little-endian data."""
    dmap = {np.dtype(np.float16): "F16", np.dtype(np.float32): "F32"}
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dmap[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """Independent reader (numpy only) used to verify the file and to load the exported weights."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = {"F16": "<f2", "F32": "<f4"}[info["dtype"]]
        s, e = info["data_offsets"]
        out[name] = np.frombuffer(data[s:e], dtype=dt).reshape(info["shape"])
    return header, out


def val_stream(tok, path):
    text = open(path, encoding="utf-8").read()
    ids = [tok.eos]
    for d in text.split(bpe.EOT):
        ids.extend(tok.encode(d))
        ids.append(tok.eos)
    return ids


@torch.no_grad()
def val_metrics(model, tok, path, T):
    ids = val_stream(tok, path)
    tot, n, nbytes, nwin = 0.0, 0, 0, 0
    model.eval()
    for i in range(0, len(ids), T):
        w = ids[i:i + T]
        if len(w) < 2:
            continue
        nwin += 1
        x = torch.tensor([w])
        logits = model(x[:, :-1]).double()
        tot += F.cross_entropy(logits[0], x[0, 1:], reduction="sum").item()
        n += len(w) - 1
        nbytes += sum(0 if t == tok.eos else tok.token_nbytes(t) for t in w[1:])
    return dict(loss=tot / n, bits_per_byte=tot / math.log(2) / nbytes, predicted_tokens=n,
                predicted_bytes=nbytes, stream_tokens=len(ids), windows=nwin)


def numpy_forward(cfg, W, ids):
    """Independent NumPy GPT-2 forward (HF semantics) from the safetensors arrays; returns logits."""
    g = lambda k: W["transformer." + k].astype(np.float32)
    d, H, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    T = len(ids)

    def ln(x, p):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + eps) * g(p + ".weight") + g(p + ".bias")

    x = g("wte.weight")[ids] + g("wpe.weight")[:T]
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        h = ln(x, p + "ln_1")
        qkv = h @ g(p + "attn.c_attn.weight") + g(p + "attn.c_attn.bias")
        q, k, v = np.split(qkv, 3, axis=-1)
        hd = d // H
        q = q.reshape(T, H, hd).transpose(1, 0, 2)
        k = k.reshape(T, H, hd).transpose(1, 0, 2)
        v = v.reshape(T, H, hd).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(T, d)
        x = x + a @ g(p + "attn.c_proj.weight") + g(p + "attn.c_proj.bias")
        h = ln(x, p + "ln_2")
        f = h @ g(p + "mlp.c_fc.weight") + g(p + "mlp.c_fc.bias")
        f = 0.5 * f * (1 + np.tanh(math.sqrt(2 / math.pi) * (f + 0.044715 * f ** 3)))
        x = x + f @ g(p + "mlp.c_proj.weight") + g(p + "mlp.c_proj.bias")
    x = ln(x, "ln_f")
    return x @ g("wte.weight").T


def load_exported(model_dir):
    """torch GPT2 holding exactly the exported (f16-rounded) weights, computing in f32."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    _, W = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    model = GPT2(cfg)
    sd = {k: torch.from_numpy(v.astype(np.float32)) for k, v in W.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected and not missing, (missing, unexpected)
    model.eval()
    return cfg, W, model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="kvscope-tiny", help="work/runs/<run>")
    ap.add_argument("--out", default=None, help="default assets/models/<run>")
    ap.add_argument("--ckpt", default=None, help="default work/runs/<run>/ckpt.pt")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default=WORK, help="the training work folder (runs/<run>, tok/)")
    ap.add_argument("--val-src", default=os.path.join(HERE, "val"),
                    help="validation slices, copied into <out>/val/ with the hand-written story")
    ap.add_argument("--val-dir", default=None,
                    help="score these slices instead of copying (the draft uses the main model's)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    out = a.out or os.path.join(ROOT, "assets", "models", a.run)
    os.makedirs(out, exist_ok=True)
    run = os.path.join(a.work, "runs", a.run)
    # ckpt.pt (latest weights) or, in a run restored from resume/, the resumable state.pt (same weights)
    path = a.ckpt or os.path.join(run, "ckpt.pt")
    if not a.ckpt and not os.path.exists(path):
        path = os.path.join(run, "state.pt")
    ck = torch.load(path, map_location="cpu")
    cfg = ck["cfg"]
    tensors = {k: v.detach().float().numpy().astype(np.float16) for k, v in ck["model"].items()}
    write_safetensors(os.path.join(out, "model.safetensors"), tensors, metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for fn in ["vocab.json", "merges.txt"]:
        shutil.copyfile(os.path.join(a.work, "tok", fn), os.path.join(out, fn))

    # verify: read back, compare to checkpoint, and check torch vs independent numpy forward
    cfg2, W, model = load_exported(out)
    for k, v in tensors.items():
        assert np.array_equal(W[k], v), k
    tok = bpe.Tokenizer(os.path.join(out, "vocab.json"), os.path.join(out, "merges.txt"))
    ids = tok.encode("Once upon a time, there was a little girl named Lily. Lily")
    with torch.no_grad():
        lt = model(torch.tensor([ids]))[0].numpy()
    ln = numpy_forward(cfg2, W, ids)
    maxdiff = float(np.abs(lt - ln).max())
    print(f"torch vs numpy forward max abs diff {maxdiff:.2e}")
    assert maxdiff < 1e-3

    if a.val_dir:
        valdir = a.val_dir
    else:
        valdir = os.path.join(out, "val")
        os.makedirs(valdir, exist_ok=True)
        for p in PARTS:
            shutil.copyfile(os.path.join(a.val_src, f"{p}.txt"), os.path.join(valdir, f"{p}.txt"))
        shutil.copyfile(os.path.join(HERE, "heldout", "story.txt"), os.path.join(valdir, "handwritten_story.txt"))
    metrics = {"protocol": __doc__.split("Validation protocol")[1].split("\n", 1)[1].strip(),
               "weights": "exported model.safetensors (F16), computed in float32 (loss summed in float64)",
               "n_positions": cfg["n_positions"], "val_dir": os.path.relpath(valdir, ROOT), "parts": {}}
    for p in PARTS + ["handwritten_story"]:
        m = val_metrics(model, tok, os.path.join(valdir, f"{p}.txt"), cfg["n_positions"])
        metrics["parts"][p] = m
        print(f"{p}: loss {m['loss']:.4f} nats/token, {m['bits_per_byte']:.4f} bits/byte, "
              f"{m['predicted_tokens']} predicted tokens")
    tl = sum(metrics["parts"][p]["loss"] * metrics["parts"][p]["predicted_tokens"] for p in PARTS)
    tn = sum(metrics["parts"][p]["predicted_tokens"] for p in PARTS)
    metrics["all_parts_pooled_loss"] = tl / tn
    metrics["numpy_vs_torch_max_abs_logit_diff"] = maxdiff
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=2)
    print("wrote", out)


if __name__ == "__main__":
    main()
