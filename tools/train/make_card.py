#!/usr/bin/python3
"""Evaluate an exported model and write its model card: README.md, loss_curve.png, samples.json and
eval.json into assets/models/<name>/. Every number comes from the exported F16 weights (computed in
float32) by evaluate.py's held-out checks; nothing is typed in by hand except the optional notes file
(card_notes.md: observations from reading the samples).
"""
import argparse
import csv
import json
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before numpy/torch load libgomp
import torch  # noqa: E402

import bpe  # noqa: E402
import evaluate  # noqa: E402
import export  # noqa: E402
import make_data  # noqa: E402
import train  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PARTS = evaluate.PARTS
PRESETS = [("story", "Once upon a time", 120), ("fact", "The capital of France is", 12), ("code", "def ", 100)]
V1 = os.path.join(HERE, "heldout", "v1_results.json")  # the previous default model on the same checks


@torch.no_grad()
def greedy_ids(model, tok, prompt, max_new):
    ids = tok.encode(prompt)
    new, reason = [], "max_new"
    for _ in range(max_new):
        if len(ids) >= model.cfg["n_positions"]:
            reason = "context_full"
            break
        t = int(torch.argmax(model(torch.tensor([ids]))[0, -1]))
        if t == tok.eos:
            reason = "eos"
            break
        ids.append(t)
        new.append(t)
    return new, reason


def loss_plot(run, path, title, snapshot_steps):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = list(csv.DictReader(open(os.path.join(run, "log.csv"))))
    tok = [int(r["tokens"]) / 1e6 for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    tr = [(t, float(r["train_loss"])) for t, r in zip(tok, rows) if r["train_loss"]]
    if tr:
        ax.plot(*zip(*tr), label="train (EMA)", color="black")
    colors = ["tab:blue", "tab:green", "tab:orange", "tab:brown", "tab:purple", "tab:red"]
    for p, c in zip(PARTS + ["heldout"], colors):
        ax.plot(tok, [float(r["val_" + p]) for r in rows], label=f"val {p}" if p != "heldout" else
                "hand-written story", color=c, marker=".", lw=1)
    step_tok = {int(r["step"]): int(r["tokens"]) / 1e6 for r in rows}
    for s in snapshot_steps:
        if s in step_tok:
            ax.axvline(step_tok[s], color="gray", ls=":", lw=0.8)
    ax.set_xlabel("training tokens (millions); dotted: shipped checkpoints")
    ax.set_ylabel("loss (nats/token)")
    ax.set_ylim(0, 8.8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)


def mix_parts(mix):
    """The parts a --mix string weighs, in train.py's order (the training-only parts only where weights are given)."""
    return train.TRAIN_PARTS[:len(mix.split(","))]


def training_lines(run, args, draft):
    phases = json.load(open(os.path.join(run, "phases.json")))
    done = json.load(open(os.path.join(run, "done.json")))
    L = [f"- schedule: seed {args['seed']}; AdamW (betas 0.9/0.95, weight decay {args['wd']} on matrices), peak LR "
         f"{args['lr']}, {args['warmup']} warm-up steps, cosine to {args['min_lr_frac']}x over {args['steps']} steps; "
         f"gradient clip 1.0; batch {args['batch']} x {args['n_positions']} tokens; {done['tokens'] / 1e6:.1f}M tokens",
         f"- mix of the last phase ({', '.join(mix_parts(args['mix']))} sampling weights) {args['mix']}; the last "
         f"{args['final_frac'] * 100:.0f}% of steps use {args['final_mix']}. In the last phase "
         f"{args['copy_frac'] * 100:.0f}% of the rows are *repeated passages* (a random 12-64-token passage repeated "
         f"to fill the window, for copy/induction heads); each phase's own settings are in its command below. "
         f"{args['p_doc_start'] * 100:.0f}% of the windows start at a document's first token.",
         f"- trained in {len(phases)} resumable invocation(s) (each writes a checkpoint; `train.py --resume` continues "
         f"exactly: model, optimizer, RNG/data position):"]
    for p in phases:
        cpu = f", {p['cpu_s'] / 60:.0f} CPU-min" if "cpu_s" in p else ""
        L.append(f"  - steps {p['start_step']}-{p['end_step']}: {p['wall_s'] / 60:.1f} min wall{cpu}"
                 f"{' (interrupted, resumed)' if p.get('interrupted') else ''}: `{p['cmd'].split('/usr/bin/python3 ')[-1]}`")
    L.append(f"- total wall time {done['wall_s'] / 60:.0f} min on 2 shared CPU cores (torch {torch.__version__} CPU, "
             f"OpenBLAS-OpenMP, {args['threads']} thread(s), nice {15 if draft else 10}, OMP_WAIT_POLICY=PASSIVE, "
             "other jobs compiling on the same cores)")
    L.append("- reproducibility: data, tokenizer, initialisation and batch order are determined by the seed; "
             "multi-threaded float reductions are not bit-deterministic, so a rerun matches to about the second decimal.\n")
    return L


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default="kvscope-tiny")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "assets", "models"))
    ap.add_argument("--draft", action="store_true", help="short card for the draft model")
    ap.add_argument("--draft-dir", default=None, help="default <models-dir>/kvscope-draft")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    out = os.path.join(a.models_dir, a.name)
    run = os.path.join(WORK, "runs", a.name)
    cfg, W, model = export.load_exported(out)
    tok = bpe.Tokenizer(os.path.join(out, "vocab.json"), os.path.join(out, "merges.txt"))
    metrics = json.load(open(os.path.join(out, "metrics.json")))
    args = torch.load(os.path.join(run, "state.pt"), map_location="cpu")["args"]
    nparams = sum(int(v.size) for v in W.values())
    snaps = [int(x) for x in args.get("snapshot_steps", "").split(",") if x]
    loss_plot(run, os.path.join(out, "loss_curve.png"), f"{a.name} ({nparams / 1e6:.2f}M params)", snaps)

    samples = {}
    for key, prompt, n in PRESETS:
        new, reason = greedy_ids(model, tok, prompt, n)
        samples[key] = dict(prompt=prompt, prompt_ids=tok.encode(prompt), new_ids=new, text=tok.decode(new),
                            reason=reason, max_new=n)
        print(f"--- {key}: {prompt!r} ->\n{tok.decode(new)}\n", flush=True)
    prompts = json.load(open(os.path.join(HERE, "heldout", "prompts.json")))
    valdir = os.path.join(ROOT, metrics["val_dir"])
    ev = dict(names=evaluate.eval_names(model, tok, prompts["names"]),
              code=evaluate.eval_code(model, tok, prompts["code"]),
              capitals=evaluate.eval_capitals(model, tok))
    heads, nev = evaluate.copy_heads(model, tok, os.path.join(valdir, "stories.txt"))
    ev["copy_heads"] = dict(mean_weight=heads, events=nev)
    draft_dir = a.draft_dir or os.path.join(a.models_dir, "kvscope-draft")
    if not a.draft and os.path.isdir(draft_dir):
        _, _, draft = export.load_exported(draft_dir)
        paths = {p: os.path.join(valdir, f"{p}.txt") for p in PARTS + ["handwritten_story"]}
        ev["draft"] = evaluate.eval_draft(model, draft, tok, paths)
    with open(os.path.join(out, "eval.json"), "w") as f:
        json.dump(ev, f, indent=1, ensure_ascii=False)
    with open(os.path.join(out, "samples.json"), "w") as f:
        json.dump(dict(note="greedy generations of the torch reference with the exported f16 weights (f32 compute, "
                            "full recompute, no special tokens added to the prompt)", presets=samples), f, indent=1,
                  ensure_ascii=False)
    v1 = json.load(open(V1)) if os.path.exists(V1) else None

    m = metrics["parts"]
    L = []
    w = L.append
    w(f"# {a.name}\n")
    if a.draft:
        w("The draft model for speculative decoding: same tokenizer (vocab.json / merges.txt identical to "
          "`kvscope-tiny`), same data and pipeline, smaller network. See `../kvscope-tiny/README.md` for the "
          "data, licences and protocols.\n")
    else:
        w("A small GPT-2 trained by kvscope's own pipeline (`tools/train/`) on openly licensed data, so the app works "
          "offline on first launch and its attention patterns are worth watching. Standard Hugging Face GPT-2 layout "
          "(`config.json`, `model.safetensors`, `vocab.json`, `merges.txt`): any GPT-2 loader reads it. Checkpoints of "
          "its own training run are in `../kvscope-tiny-training/` (same tokenizer; `--model` opens each).\n")
    w("## Architecture\n")
    w(f"| | |\n|---|---|\n| architecture | GPT-2 (GPT2LMHeadModel: pre-LN, gelu_new, learned positions, tied LM head) |\n"
      f"| layers / heads / width | {cfg['n_layer']} / {cfg['n_head']} / {cfg['n_embd']} |\n"
      f"| context (n_positions) | {cfg['n_positions']} |\n| vocabulary | {cfg['vocab_size']} (256 bytes + "
      f"{cfg['vocab_size'] - 257} merges + `<|endoftext|>` = id {cfg['eos_token_id']}) |\n"
      f"| parameters | {nparams:,} (LM head tied to `wte`, not stored) |\n"
      f"| weights | F16 in `model.safetensors` ({os.path.getsize(os.path.join(out, 'model.safetensors')) / 1e6:.2f} MB) |\n")
    w("## Training\n")
    L += training_lines(run, args, a.draft)
    w("![loss curve](loss_curve.png)\n")
    w("## Validation (exported F16 weights, computed in float32)\n")
    w("| part | loss (nats/token) | bits/byte | predicted tokens |\n|---|---|---|---|")
    for p in PARTS + ["handwritten_story"]:
        w(f"| {p} | {m[p]['loss']:.4f} | {m[p]['bits_per_byte']:.4f} | {m[p]['predicted_tokens']} |")
    if v1 and not a.draft:
        w(f"\nThe hand-written story (`val/handwritten_story.txt`, written by a person, not by the generator): "
          f"**{m['handwritten_story']['bits_per_byte']:.2f} bits/byte** (v1, the previous default model: "
          f"{v1['story']['bits_per_byte']:.2f}).")
    w("\nThe same numbers are in `metrics.json`. Protocol (the C++ test reproduces it within 0.01):\n")
    w("```\n" + metrics["protocol"] + "\n```\n")
    w("Validation slices in `val/`: stories, facts and code from separate random streams of the generators; stdlib = "
      "whole files never trained on (" + ", ".join(make_data.CODE_VAL_FILES) + "); english = WordNet synsets held "
      "out of training; handwritten_story = a children's story written by hand.\n")
    w("## Held-out checks (greedy decoding; `tools/train/evaluate.py`, all in `eval.json`)\n")
    nm, co, ca = ev["names"], ev["code"], ev["capitals"]
    v1n = f" (v1: {v1['names']['hits']}/{v1['names']['total']})" if v1 else ""
    v1c = f" (v1: {v1['code']['parse_rate'] * 100:.0f}% / {v1['code']['reuse_rate'] * 100:.0f}%)" if v1 else ""
    v1k = f" (v1: {v1['capitals']['correct']}/{v1['capitals']['total']})" if v1 else ""
    w(f"- **Names never seen in training** (hand-written prompts, `tools/train/heldout/prompts.json`, e.g. "
      f"\"{nm['rows'][0]['prompt']}\"): the continuation (60 tokens) uses the name again in "
      f"**{nm['hits']}/{nm['total']}** ({nm['rate'] * 100:.0f}%){v1n}.")
    w(f"- **Code prompts** (hand-written function headers such as `def scale(values, factor):`): the generated body "
      f"parses with `ast` in **{co['parse_rate'] * 100:.0f}%** of {co['total']} samples and uses the prompt's "
      f"parameters in **{co['reuse_rate'] * 100:.0f}%**{v1c}.")
    w(f"- **Capitals**: \"The capital of X is\" right for **{ca['correct']}/{ca['total']}** countries of "
      f"`countries-list` with a capital ({ca['rate'] * 100:.1f}%){v1k}.")
    best = max((x, li, hi) for li, row in enumerate(heads) for hi, x in enumerate(row))
    w(f"- **Copy / induction heads**: over {nev} tokens of repeated names in the validation stories, layer {best[1]} "
      f"head {best[2]} (0-based) puts on average **{best[0]:.2f}** of its attention, at the query that predicts the "
      "token, on the same token in the name's earlier occurrence. Per-head means (rows = layers):\n")
    w("```\n" + "\n".join(f"L{li}  " + "  ".join(f"{x:.2f}" for x in row) for li, row in enumerate(heads)) + "\n```\n")
    if "draft" in ev:
        acc = ev["draft"]["expected_acceptance"]
        w("- **Draft model** (`../kvscope-draft`): expected acceptance of one drafted token in speculative sampling, "
          "the mean over positions of sum_v min(p_v, q_v): " + ", ".join(f"{k} {v:.2f}" for k, v in acc.items()) + ".")
    w("\n## Greedy samples for the app's presets\n")
    w("Generated by the PyTorch reference from the exported weights, greedy, no tokens added before the prompt; ids "
      "are in `samples.json` for cross-checking the C++ engine.\n")
    for key, prompt, n in PRESETS:
        s = samples[key]
        w(f"**{key}** — prompt `{prompt!r}`, {len(s['new_ids'])} new tokens (stop: {s['reason']}):\n")
        w("```text\n" + prompt + s["text"] + "\n```\n")
    for r in co["rows"][:2]:
        w(f"**code prompt** `{r['prompt']!r}` (parses: {r['parses']}, uses {r['uses']}):\n")
        w("```python\n" + r["prompt"] + r["output"] + "\n```\n")
    notes = os.path.join(HERE, "card_notes.md")
    if not a.draft and os.path.exists(notes):
        w(open(notes, encoding="utf-8").read())
    if not a.draft:
        w("## Data and licences\n")
        w("See `../PROVENANCE.md`: generated stories and Python (project-authored), country facts from the npm package "
          "`countries-list` 3.4.1 (MIT), the Python 3.11 standard library (PSF License), WordNet 3.0 example "
          "sentences and definitions (Debian `wordnet-base`, WordNet licence).\n")
        w("## Rebuild\n")
        w("`make model` (`tools/train/build_model.sh`: data -> tokenizer -> main model in resumable phases -> draft -> "
          "export -> checkpoints -> cards). An interrupted run continues from its last checkpoint.\n")
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    print("wrote", os.path.join(out, "README.md"))


if __name__ == "__main__":
    main()
