#!/usr/bin/python3
"""Evaluate an exported model (greedy samples, capital accuracy, name reuse, copy heads) and write
its model card README.md, loss_curve.png and samples.json into assets/models/<name>/.
All numbers come from the exported f16 weights (export.load_exported), computed in f32.
"""
import argparse
import csv
import json
import os
import random

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before numpy/torch load libgomp
import numpy as np  # noqa: E402
import torch  # noqa: E402

import bpe  # noqa: E402
import export  # noqa: E402
import make_data  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PRESETS = [("story", "Once upon a time", 120), ("fact", "The capital of France is", 12), ("code", "def ", 100)]


@torch.no_grad()
def greedy(model, tok, prompt, max_new, stop=None):
    """Greedy decoding, full recompute each step, stops at eos / max_new / context full / stop string."""
    ids = tok.encode(prompt)
    new = []
    n_pos = model.cfg["n_positions"]
    reason = "max_new"
    for _ in range(max_new):
        if len(ids) >= n_pos:
            reason = "context_full"
            break
        logits = model(torch.tensor([ids]))[0, -1]
        t = int(torch.argmax(logits))
        if t == tok.eos:
            reason = "eos"
            break
        ids.append(t)
        new.append(t)
        if stop and stop(tok.decode(new)):
            reason = "stop"
            break
    return new, reason


def capital_accuracy(model, tok, countries):
    rows, ok = [], 0
    cands = [c for c in countries if c["capital"]]
    for c in cands:
        # capitals may contain "." (St. George's, Washington D.C.): decode until the text is one character
        # longer than " " + capital, then require that exact prefix followed by ".", " ", newline or end
        k = len(c["capital"]) + 2
        new, _ = greedy(model, tok, f"The capital of {c['name']} is", 24, stop=lambda s: len(s) >= k or "\n" in s)
        out = tok.decode(new)
        good = out.startswith(" " + c["capital"]) and out[k - 1:k] in (".", " ", "\n", "")
        ok += good
        rows.append((c["name"], c["capital"], out, good))
    return ok / len(cands), len(cands), rows


def name_reuse(model, tok, n=60, seed=7):
    """Prompt introduces a name; success if the greedy continuation uses that name again.
    Names from the training pool and names never seen in training are reported separately."""
    rng = random.Random(seed)
    novel_f = ["Zelda", "Priya", "Ayla", "Freya", "Noor", "Sienna", "Talia", "Beatrix", "Esme", "Marisol"]
    novel_m = ["Rafael", "Kofi", "Anton", "Diego", "Hamish", "Jasper", "Mateo", "Quentin", "Soren", "Tobias"]
    res = {}
    for kind, pf, pm in [("training-pool names", make_data.GIRLS, make_data.BOYS), ("unseen names", novel_f, novel_m)]:
        hits, ex = 0, []
        for i in range(n if kind.startswith("training") else len(novel_f) + len(novel_m)):
            if kind.startswith("training"):
                sex = rng.choice("fm")
                name = rng.choice(pf if sex == "f" else pm)
            else:
                sex = "f" if i < len(novel_f) else "m"
                name = (novel_f + novel_m)[i]
            kid = "little girl" if sex == "f" else "little boy"
            prompt = f"Once upon a time, there was a {kid} named {name}."
            new, _ = greedy(model, tok, prompt, 60)
            out = tok.decode(new)
            hit = name in out
            hits += hit
            if len(ex) < 2:
                ex.append((prompt, out))
        total = n if kind.startswith("training") else len(novel_f) + len(novel_m)
        res[kind] = dict(rate=hits / total, hits=hits, total=total, examples=ex)
    return res


@torch.no_grad()
def copy_heads(model, tok, val_path, T):
    """For each repeated name in the validation stories (a name token from the training pool that
    already occurred earlier in the same window), measure per (layer, head) the attention weight
    that the query predicting it (the token just before the repeat) puts on all earlier occurrences
    of that name. Returns (L, H) mean weights and the number of events."""
    name_ids = set()
    for nm in make_data.GIRLS + make_data.BOYS:
        ids = tok.encode(" " + nm)
        if len(ids) == 1:
            name_ids.add(ids[0])
    stream = export.val_stream(tok, val_path)
    L, H = model.cfg["n_layer"], model.cfg["n_head"]
    acc, n = np.zeros((L, H)), 0
    for i in range(0, len(stream) - 1, T):
        w = stream[i:i + T]
        _, atts = model(torch.tensor([w]), return_attn=True)
        A = torch.stack([a[0] for a in atts]).numpy()  # (L, H, T, T)
        for p in range(1, len(w)):
            t = w[p]
            if t in name_ids:
                prev = [j for j in range(p) if w[j] == t]
                if prev:
                    acc += A[:, :, p - 1, prev].sum(-1)
                    n += 1
    return acc / max(n, 1), n


@torch.no_grad()
def example_attention(model, tok, prompt_ids, new_ids, li, hi):
    """In a greedy sample, find the first step that writes a name already written earlier and report
    head (li, hi)'s weight from the writing query to the earlier occurrence(s)."""
    ids = prompt_ids + new_ids
    name_ids = set()
    for nm in make_data.GIRLS + make_data.BOYS:
        x = tok.encode(" " + nm)
        if len(x) == 1:
            name_ids.add(x[0])
    _, atts = model(torch.tensor([ids]), return_attn=True)
    A = atts[li][0, hi].numpy()
    for p in range(len(prompt_ids), len(ids)):
        if ids[p] in name_ids:
            prev = [j for j in range(p) if ids[j] == ids[p]]
            if prev:
                return dict(position=p, token=tok.decode([ids[p]]), query_position=p - 1,
                            query_token=tok.decode([ids[p - 1]]), earlier_positions=prev,
                            weight=float(A[p - 1, prev].sum()))
    return None


def loss_plot(phases, path, title):
    """phases: list of (run_dir, token_offset, stop_step or None); curves are concatenated."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows, tok = [], []
    for run_dir, off, stop in phases:
        for r in csv.DictReader(open(os.path.join(run_dir, "log.csv"))):
            if stop is not None and int(r["step"]) > stop:
                continue
            rows.append(r)
            tok.append((float(r["tokens"]) + off) / 1e6)
    tok = np.array(tok)
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    for run_dir, off, stop in phases[1:]:
        ax.axvline(off / 1e6, color="gray", ls="--", lw=0.8)
    tr = [(t, float(r["train_loss"])) for t, r in zip(tok, rows) if r["train_loss"]]
    if tr:
        ax.plot(*zip(*tr), label="train (EMA)", color="black")
    for p, c in [("stories", "tab:blue"), ("facts", "tab:green"), ("code", "tab:orange")]:
        ax.plot(tok, [float(r["val_" + p]) for r in rows], label=f"val {p}", color=c, marker=".")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("loss (nats/token)")
    ax.set_ylim(0, 8.5)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default="kvscope-tiny")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--draft", action="store_true", help="short card for the draft model")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    out = os.path.join(ROOT, "assets", "models", a.name)
    run = os.path.join(WORK, "runs", a.name)
    cfg, W, model = export.load_exported(out)
    tok = bpe.Tokenizer(os.path.join(out, "vocab.json"), os.path.join(out, "merges.txt"))
    metrics = json.load(open(os.path.join(out, "metrics.json")))
    done = json.load(open(os.path.join(run, "done.json")))
    cmd = open(os.path.join(run, "train_cmd.txt")).read().strip()
    args = torch.load(os.path.join(run, "ckpt.pt"), map_location="cpu")["args"]
    nparams = sum(int(np.prod(v.shape)) for v in W.values())
    phases = [(run, 0, None)]
    p1 = None
    if args.get("init_from"):
        p1_dir = os.path.dirname(os.path.join(HERE, args["init_from"]))
        p1 = dict(done=json.load(open(os.path.join(p1_dir, "done.json"))),
                  cmd=open(os.path.join(p1_dir, "train_cmd.txt")).read().strip(),
                  args=torch.load(os.path.join(p1_dir, "ckpt.pt"), map_location="cpu")["args"])
        phases = [(p1_dir, 0, p1["done"]["steps"]), (run, p1["done"]["tokens"], None)]
    loss_plot(phases, os.path.join(out, "loss_curve.png"), f"{a.name} ({nparams/1e6:.2f}M params)")

    samples = {}
    for key, prompt, n in PRESETS:
        new, reason = greedy(model, tok, prompt, n)
        samples[key] = dict(prompt=prompt, prompt_ids=tok.encode(prompt), new_ids=new,
                            text=tok.decode(new), reason=reason, max_new=n)
        print(f"--- {key}: {prompt!r} ->\n{tok.decode(new)}\n", flush=True)
    countries = json.load(open(os.path.join(WORK, "data", "countries.json")))
    acc, ncap, rows = capital_accuracy(model, tok, countries)
    print(f"capital accuracy {acc:.3f} over {ncap}", flush=True)
    france = [r for r in rows if r[0] == "France"][0]
    reuse = name_reuse(model, tok)
    print({k: v["rate"] for k, v in reuse.items()}, flush=True)
    heads, nev = copy_heads(model, tok, os.path.join(ROOT, "assets/models/kvscope-tiny/val/stories.txt"),
                            cfg["n_positions"])
    li, hi = np.unravel_index(np.argmax(heads), heads.shape)
    ex = example_attention(model, tok, samples["story"]["prompt_ids"], samples["story"]["new_ids"], li, hi)
    print(f"best copy head layer {li} head {hi}: {heads[li, hi]:.3f} over {nev} events; example {ex}", flush=True)

    evals = dict(capital_accuracy=acc, capital_total=ncap, capital_correct=int(round(acc * ncap)),
                 name_reuse={k: {kk: vv for kk, vv in v.items() if kk != "examples"} for k, v in reuse.items()},
                 copy_heads=dict(mean_weight_on_earlier_occurrence=heads.round(4).tolist(), events=nev,
                                 best_layer=int(li), best_head=int(hi), best_weight=float(heads[li, hi]),
                                 story_sample_example=ex),
                 capital_rows=[dict(country=r[0], capital=r[1], output=r[2], correct=bool(r[3])) for r in rows])
    with open(os.path.join(out, "samples.json"), "w") as f:
        json.dump(dict(note="greedy generations of the torch reference with the exported f16 weights "
                            "(f32 compute, full recompute, no special tokens added to the prompt)",
                       presets=samples, evals=evals), f, indent=1, ensure_ascii=False)

    m = metrics["parts"]
    L = []
    w = L.append
    title = "kvscope-tiny" if not a.draft else "kvscope-draft"
    w(f"# {title}\n")
    if a.draft:
        w("The draft model for speculative decoding: same tokenizer (vocab.json / merges.txt identical to "
          "`kvscope-tiny`), same data and pipeline, smaller network. See `../kvscope-tiny/README.md` for the "
          "data, licences and protocols.\n")
    else:
        w("A small GPT-2 trained by kvscope's own pipeline (`tools/train/`) on openly licensed data, so the app "
          "works offline on first launch and its attention patterns are worth watching. Standard Hugging Face "
          "GPT-2 layout (`config.json`, `model.safetensors`, `vocab.json`, `merges.txt`): any GPT-2 loader reads it.\n")
    w("## Architecture\n")
    w(f"| | |\n|---|---|\n| architecture | GPT-2 (GPT2LMHeadModel: pre-LN, gelu_new, learned positions, tied LM head) |\n"
      f"| layers / heads / width | {cfg['n_layer']} / {cfg['n_head']} / {cfg['n_embd']} |\n"
      f"| context (n_positions) | {cfg['n_positions']} |\n| vocabulary | {cfg['vocab_size']} (256 bytes + "
      f"{cfg['vocab_size']-257} merges + `<|endoftext|>` = id {cfg['eos_token_id']}) |\n"
      f"| parameters | {nparams:,} (LM head tied to `wte`, not stored) |\n"
      f"| weights | F16 in `model.safetensors` ({os.path.getsize(os.path.join(out, 'model.safetensors'))/1e6:.2f} MB) |\n")
    w("## Training\n")
    nice = 15 if a.draft else 10
    if p1:
        pa = p1["args"]
        w(f"- commands (run by `tools/train/build_model.sh`, after `make_data.py --seed 1234` and "
          f"`train_bpe.py --seed 1234 --merges 3000`), in `tools/train`:\n"
          f"  1. `nice -n 10 {p1['cmd']}`\n  2. `nice -n 10 {cmd}`")
        w(f"- phase 1: seed {pa['seed']}; AdamW (betas 0.9/0.95, weight decay {pa['wd']} on matrices), peak LR "
          f"{pa['lr']}, {pa['warmup']} warm-up steps, cosine schedule over {pa['steps']} steps to {pa['min_lr_frac']}x, "
          f"stopped after {p1['done']['steps']} steps; batch {pa['batch']} x {pa['n_positions']} tokens = "
          f"{p1['done']['tokens']/1e6:.2f}M tokens; mix (stories, facts, code) {pa['mix']}; "
          f"{p1['done']['wall_s']/60:.1f} min. After phase 1 the model wrote fluent story text but copied no "
          f"names (loss on a repeated name = loss on a first mention, ~5.1 nats; no copy head), so:")
        w(f"- phase 2 (from the phase-1 weights, fresh optimizer): {args['copy_frac']*100:.0f}% of the batch rows are "
          f"*repeated passages* (a random 12-64-token story passage repeated to fill the window after an eos), "
          f"which makes copy/induction heads form; the rest is the normal mix {args['mix']}.")
    w(f"- {'phase 2: ' if p1 else ''}seed {args['seed']}; AdamW (betas 0.9/0.95, weight decay {args['wd']} on matrices), peak LR {args['lr']}, "
      f"{args['warmup']} warm-up steps, cosine decay to {args['min_lr_frac']}x; gradient clip 1.0; "
      f"batch {args['batch']} x {args['n_positions']} tokens; {done['steps']} steps = {done['tokens']/1e6:.1f}M tokens")
    w(f"- mix (stories, facts, code sampling weights) {args['mix']}; the last {args['final_frac']*100:.0f}% of steps "
      f"use the facts-heavy mix {args['final_mix']}. A quarter of the windows start exactly at a document's first "
      f"token (no eos before it) so prompts at position 0 look like training data.")
    tot_wall = done["wall_s"] + (p1["done"]["wall_s"] if p1 else 0)
    tot_tok = done["tokens"] + (p1["done"]["tokens"] if p1 else 0)
    w(f"- {'total ' if p1 else ''}wall time {tot_wall/60:.1f} min, {tot_tok/1e6:.2f}M training tokens, on 2 shared CPU cores (torch {torch.__version__} CPU, "
      f"OpenBLAS-OpenMP, {args['threads']} thread(s), nice {nice}, OMP_WAIT_POLICY=PASSIVE, other jobs compiling "
      f"on the same cores the whole time)")
    w("- reproducibility: data, tokenizer, initialisation and batch order are fully determined by the seed; "
      "multi-threaded float reductions in torch/OpenBLAS are not bit-deterministic, so a rerun gives the same "
      "numbers to about the second decimal, not bit-identical weights.\n")
    w("![loss curve](loss_curve.png)\n")
    w("## Validation (exported F16 weights, computed in float32)\n")
    w("| part | loss (nats/token) | bits/byte | predicted tokens |\n|---|---|---|---|")
    for p in ["stories", "facts", "code"]:
        w(f"| {p} | {m[p]['loss']:.4f} | {m[p]['bits_per_byte']:.4f} | {m[p]['predicted_tokens']} |")
    w(f"\nThe same numbers are in `metrics.json`. Protocol (the C++ test reproduces it within 0.01):\n")
    w("```\n" + metrics["protocol"] + "\n```\n")
    w("The validation slices are in `val/` (held-out: stories and fact documents generated from separate random "
      "streams; code = whole stdlib files never trained on: " + ", ".join(make_data.CODE_VAL_FILES) + "). "
      "The facts slice is new text about the same countries, so it measures recall of trained facts, not "
      "generalisation.\n")
    if not a.draft:
        w("## Quality checks (greedy decoding)\n")
        w(f"- **Capitals**: \"The capital of X is\" answered correctly for **{evals['capital_correct']}/{ncap} "
          f"countries ({acc*100:.1f}%)** of `countries-list` that have a capital (France -> `{france[2].strip()}`). "
          f"The per-country answers are in `samples.json`.")
        for k, v in reuse.items():
            w(f"- **Name reuse ({k})**: prompt \"Once upon a time, there was a little girl/boy named NAME.\", "
              f"60 new tokens: the name is used again in {v['hits']}/{v['total']} ({v['rate']*100:.0f}%) continuations.")
        w(f"- **Copy head**: over {nev} repeated names in the validation stories, layer {li} head {hi} (0-based) "
          f"puts on average **{heads[li, hi]:.2f}** of its attention, at the position that predicts the repeated "
          f"name, on the earlier occurrence(s) of that name. Per-head means (rows = layers, columns = heads):\n")
        w("```\n" + "\n".join("L%d  " % l + "  ".join(f"{x:.2f}" for x in heads[l]) for l in range(len(heads))) + "\n```")
        if ex:
            w(f"  In the story sample below, when the model writes `{ex['token']}` at position {ex['position']} "
              f"(query token `{ex['query_token']}` at position {ex['query_position']}), layer {li} head {hi} puts "
              f"{ex['weight']:.2f} of its attention on the earlier `{ex['token']}` at position(s) "
              f"{ex['earlier_positions']}.\n")
    if a.draft:
        w(f"Capitals answered correctly (greedy): {evals['capital_correct']}/{ncap}; best copy head: layer {li} "
          f"head {hi}, mean weight {heads[li, hi]:.2f} on the earlier occurrence of a repeated name.\n")
    w("## Greedy samples for the app's presets\n")
    w("Generated by the PyTorch reference (`tools/train/make_card.py`) from the exported weights, greedy, "
      "no tokens added before the prompt; ids are in `samples.json` for cross-checking the C++ engine.\n")
    for key, prompt, n in PRESETS:
        s = samples[key]
        w(f"**{key}** — prompt `{prompt!r}`, {len(s['new_ids'])} new tokens (stop: {s['reason']}):\n")
        w("```text\n" + prompt + s["text"] + "\n```\n")
    if not a.draft:
        code_loss = m["code"]["loss"]
        w("## Limitations (measured, not hidden)\n")
        w("- Stories copy the *hero's* name very reliably (the copy head above), but greedy stories tend to "
          "over-copy: the friend is often never introduced and both speakers get the hero's name "
          "(`asked Luke ... said Luke`), and sentences repeat.")
        w(f"- Names outside the training pool (multi-token, e.g. `Zelda` = 3 tokens) are not copied "
          f"(0/20 above): the model swaps in a training name.")
        w(f"- Code is weak: validation loss {code_loss:.2f} nats/token. Output has Python's shape (`def`, `self`, "
          f"indentation, parentheses) but degenerates into repetition within a line or two. Code was ~19% of "
          f"about 10M training tokens, far too little for a 1.8M-parameter model to learn Python.")
        w("- The fact slice measures recall of trained facts; facts are not generalised.\n")
        w("## Data and licences\n")
        w("See `../PROVENANCE.md`. In short: stories are generated by `tools/train/make_data.py` (project-authored, "
          "same licence as kvscope); facts are sentences built from the npm package `countries-list` 3.4.1 "
          "(MIT, (c) 2014 Annexare Studio); code is the Python 3.11 standard library as shipped by Debian "
          "(`/usr/lib/python3.11/*.py`, PSF License). BPE trained on word counts of a sample of the mix "
          "(3000 merges).\n")
        w("## Rebuild\n")
        w("`tools/train/build_model.sh` (data -> tokenizer -> train main + draft -> export -> cards). Throughput is "
          "about 6000 tokens/s for this model on 2 idle cores (about 35 min for both models); with other jobs "
          "on the cores it was 1700-2400 tokens/s here (the wall times above).\n")
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    print("wrote", os.path.join(out, "README.md"))


if __name__ == "__main__":
    main()
