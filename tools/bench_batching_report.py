"""Tables of tools/bench_batching.sh from its JSON files: medians over rounds."""
import json
import os
import statistics
import sys

out, rounds = sys.argv[1], int(sys.argv[2])
med = statistics.median


def load(name):
    rs = [f"{out}/{name}.{r}.json" for r in range(1, rounds + 1)]
    return [json.load(open(p)) for p in rs if os.path.exists(p)]


g, s, sp = load("pos.gpt2"), load("pos.smol"), load("pos.smolbf16")
gb, sb = load("pos.gpt2.before"), load("pos.smol.before")
before_cols = " | GPT-2, before | SmolLM2, before" if gb and sb else ""
bf16_col = " | SmolLM2-135M BF16, `--bf16-products`" if sp else ""
print("| positions n | GPT-2-124M F16: forward / decode step | SmolLM2-135M BF16: forward / decode step" + bf16_col +
      before_cols + " |")
print("|---|---|---" + ("|---" if sp else "") + ("|---|---" if before_cols else "") + "|")
step_g = [x["positions"][0]["forward_ms"] / x["positions"][0]["decode_steps"] for x in g]
step_s = [x["positions"][0]["forward_ms"] / x["positions"][0]["decode_steps"] for x in s]
step_p = [x["positions"][0]["forward_ms"] / x["positions"][0]["decode_steps"] for x in sp]
print(f"| 1 | 1.00 ({med(step_g):.1f} ms) | 1.00 ({med(step_s):.1f} ms)" +
      (f" | 1.00 ({med(step_p):.1f} ms)" if sp else "") + (" | 1.00 | 1.00" if before_cols else "") + " |")


def cell(runs, i):
    r = [x["positions"][i]["decode_steps"] for x in runs]
    return f"{med(r):.2f} ({min(r):.2f}–{max(r):.2f})"


for i, row in enumerate(g[0]["positions"]):
    extra = (f" | {cell(sp, i)}" if sp else "") + (f" | {cell(gb, i)} | {cell(sb, i)}" if before_cols else "")
    print(f"| {row['n']} | {cell(g, i)} | {cell(s, i)}{extra} |")
print(f"\n(medians over {len(g)} rounds, range in brackets; {g[0]['threads']} threads; "
      "each forward after a cached prefix of 64 tokens, all n logits computed)\n")

# The physics: bytes a step reads, FLOPs per position, and where the extra
# positions' multiply-adds start to cost as much as the reads.
print("| model | weights read per step | FLOPs per position | decode step | decode GB/s | "
      "extra ms per extra position (n = 1 -> 16) | n where compute = reads |")
print("|---|---|---|---|---|---|---|")
for name, label, pos in (("gpt2", "GPT-2-124M F16", g), ("smol", "SmolLM2-135M BF16", s)):
    pre = load(f"pre.{name}.after")
    if not pre:
        continue
    row = pre[0]["rows"][0]
    step = med(x["positions"][0]["forward_ms"] / x["positions"][0]["decode_steps"] for x in pos)
    ms16 = med(x["positions"][-1]["forward_ms"] for x in pos)
    n16 = pos[0]["positions"][-1]["n"]
    extra = (ms16 - step) / (n16 - 1)
    gbps = med(x["rows"][0]["decode_gb_per_s"] for x in pre)
    print(f"| {label} | {row['decode_read_bytes'] / 1e6:.0f} MB | {row['kv_flops'] / 1e6:.0f} MFLOP | "
          f"{step:.1f} ms | {gbps:.1f} | {extra:.2f} ms ({row['kv_flops'] / extra / 1e6:.0f} GFLOP/s) | "
          f"{step / extra:.1f} |")
# The products alone, at one core's measured rate for that weight type and n
# (kvscope bench --kernels, weights in cache) times the threads: a floor for
# the forward however well the read overlaps them, in decode steps.
kern = load("kernels")
if kern:
    def rate(kernel, n):
        return med(r["gmacs"] for k in kern for r in k["rows"] if r["kernel"] == kernel and r["n"] == n) * 1e9

    def linear_macs(name):
        # A position's multiply-adds in the matrix products alone: the decode
        # FLOPs at T = 128 and 512 (the prefill rows) less attention's share,
        # which grows linearly with T, so extrapolated to T = 0; halved.
        f = {r["T"]: r["kv_flops"] for r in load(f"pre.{name}.after")[0]["rows"]}
        return (f[128] - 128 * (f[512] - f[128]) / 384) / 2

    print()
    cols = [("GPT-2-124M F16", "gpt2", g, "f16 weights"), ("SmolLM2-135M BF16", "smol", s, "bf16 weights")]
    dot_rows = any(r["kernel"] == "bf16 dot products" for r in kern[0]["rows"])
    if sp and dot_rows:
        cols.append(("SmolLM2-135M BF16, `--bf16-products`", "smol", sp, "bf16 dot products"))
    print("| positions n | " + " | ".join(f"{c[0]}: measured / products alone" for c in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    macs = {name: linear_macs(name) for _, name, _, _ in cols}
    for i, row in enumerate(g[0]["positions"]):
        n, cells = row["n"], []
        for label, name, runs, kernel in cols:
            step = med(x["positions"][0]["forward_ms"] / x["positions"][0]["decode_steps"] for x in runs) / 1e3
            floor = n * macs[name] / (runs[0]["threads"] * rate(kernel, n)) / step
            cells.append(f"{med(x['positions'][i]['decode_steps'] for x in runs):.2f} / {floor:.2f}")
        print(f"| {n} | " + " | ".join(cells) + " |")
    peak = med(k["fma_peak_gmacs"] for k in kern)
    dot = med(k["bf16_dot_peak_gmacs"] for k in kern)
    print(f"\n(one core: f32 FMA peak {peak:.1f} GMAC/s, bf16 dot product peak {dot:.1f}; at 8 positions the f32 "
          f"panels run at {rate('f32 weights', 8) / 1e9:.1f}, the f16 ones at {rate('f16 weights', 8) / 1e9:.1f}, "
          f"the bf16 ones at {rate('bf16 weights', 8) / 1e9:.1f}, "
          f"the dot products at {rate('bf16 dot products', 8) / 1e9 if dot_rows else 0:.1f})\n")
bw = [x["read_bandwidth_gb_per_s"] for x in load("pre.gpt2.after")]
if bw:
    print(f"\n(memory read bandwidth measured by kvscope bench: median {med(bw):.1f} GB/s)\n")

print("| model | T | prefill tok/s now | before | now / before |")
print("|---|---|---|---|---|")
for name, label in (("gpt2", "GPT-2-124M F16"), ("smol", "SmolLM2-135M BF16")):
    after, before = load(f"pre.{name}.after"), load(f"pre.{name}.before")
    for i, row in enumerate(after[0]["rows"]):
        a = [x["rows"][i]["prefill_tokens_per_s"] for x in after]
        if before:
            b = [x["rows"][i]["prefill_tokens_per_s"] for x in before]
            ratios = [x / y for x, y in zip(a, b)]
            print(f"| {label} | {row['T']} | {med(a):.0f} | {med(b):.0f} | {med(ratios):.2f}x "
                  f"({min(ratios):.2f}–{max(ratios):.2f}) |")
        else:
            print(f"| {label} | {row['T']} | {med(a):.0f} | – | – |")

# Prefill beside PyTorch's (the better of its f32 and bf16 paths per round).
if load("torch.gpt2.f32"):
    print("\n| model | T | kvscope prefill tok/s | PyTorch prefill tok/s (its best path) | kvscope / PyTorch |")
    print("|---|---|---|---|---|")
    for name, torch, label in (("gpt2f32", "gpt2f32", "GPT-2-124M F32"), ("gpt2", "gpt2", "GPT-2-124M F16"),
                               ("smol", "smol", "SmolLM2-135M BF16"),
                               ("smolbf16", "smol", "SmolLM2-135M BF16, `--bf16-products`")):
        ks, tf, tb = load(f"pre.{name}.after"), load(f"torch.{torch}.f32"), load(f"torch.{torch}.bf16")
        if not ks or not tf:
            continue
        for i, row in enumerate(ks[0]["rows"]):
            k = [x["rows"][i]["prefill_tokens_per_s"] for x in ks]
            t = [max(x["rows"][i]["prefill_tokens_per_s"] for x in group if x) for group in
                 zip(tf, tb or [None] * len(tf))]
            best = "bf16" if tb and med(y["rows"][i]["prefill_tokens_per_s"] for y in tb) > med(
                y["rows"][i]["prefill_tokens_per_s"] for y in tf) else "f32"
            ratios = [x / y for x, y in zip(k, t)]
            print(f"| {label} | {row['T']} | {med(k):.0f} | {med(t):.0f} ({best}) | {med(ratios):.2f}x "
                  f"({min(ratios):.2f}–{max(ratios):.2f}) |")
    print(f"\n(PyTorch {tf[0]['torch']} on CPU, tools/torch_bench.py, {tf[0]['threads']} threads, the better of "
          "OpenMP's active and passive waiting; one forward over the whole prompt)")

print("\n| speculative K=4, 124M F16 target / 2-layer draft | α | cost ratio c | verify / decode step v | "
      "plain tok/s | speculative tok/s | measured speed-up | Leviathan (1-α^5)/((1-α)(4c+1)) | "
      "with the verify's cost (1-α^5)/((1-α)(4c+v)) |")
print("|---|---|---|---|---|---|---|---|---|")
for tag in ("before", "after"):
    rs = load(f"spec.{tag}")
    if not rs:
        continue

    def pred(r, verify):
        a, c, k = r["alpha_tested"], r["cost_ratio"], r["k"]
        gain = k + 1 if a >= 1 else (1 - a ** (k + 1)) / (1 - a)
        return gain / (k * c + verify)

    v = [r["target_verify_ms"] / r["target_forward_ms"] for r in rs]
    m = lambda key: med(r[key] for r in rs)  # noqa: E731
    print(f"| {'now' if tag == 'after' else 'before'} | {m('alpha_tested'):.2f} | {m('cost_ratio'):.3f} | "
          f"{med(v):.2f} | {med(r['plain']['tokens_per_s'] for r in rs):.1f} | {m('tokens_per_s'):.1f} | "
          f"{m('speedup'):.2f}x | {med(pred(r, 1.0) for r in rs):.2f}x | "
          f"{med(pred(r, x) for r, x in zip(rs, v)):.2f}x |")
