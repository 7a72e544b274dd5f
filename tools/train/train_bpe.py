#!/usr/bin/python3
"""Train the byte-level BPE on word counts of a sample of the training mix, then tokenize the corpus.

Outputs: work/tok/vocab.json, work/tok/merges.txt, work/tok/{part}.npy (uint16 ids, documents separated
by the eos id; documents start right after each eos).
"""
import argparse
import collections
import os
import random
import time

import numpy as np

import bpe

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")
PARTS = ["stories", "facts", "code", "stdlib", "english"]  # the merges are learned from these
EXTRA_PARTS = ["names", "recall", "coderecall", "heroes"]  # tokenized with those merges, not counted for them
# bytes of each part sampled for the merge statistics (roughly the training mix)
SAMPLE_MB = {"stories": 4.0, "facts": 1.5, "code": 2.0, "stdlib": 1.0, "english": 3.0}


def read_docs(part):
    return open(os.path.join(WORK, "data", f"{part}.train.txt"), encoding="utf-8").read().split(bpe.EOT)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--merges", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--def-split-prob", type=float, default=0.2,
                    help="code: probability that 'def name' is tokenized as 'def',' ','name' so the "
                         "'def ' preset prompt (which ends in a lone ' ' token) has training signal")
    ap.add_argument("--newline-split-prob", type=float, default=0.2,
                    help="probability that a newline followed by indentation or another newline is tokenized "
                         "as a lone '\\n' then the rest, so a prompt that ends in '\\n' (`def f(x):\\n`) continues "
                         "like training data instead of starting a new unindented line")
    ap.add_argument("--encode-only", choices=EXTRA_PARTS,
                    help="tokenize only this part with the merges already in work/tok")
    a = ap.parse_args()
    out = os.path.join(WORK, "tok")
    os.makedirs(out, exist_ok=True)
    if a.encode_only:
        encode_parts(a, out, {a.encode_only: read_docs(a.encode_only)}, None)
        return
    t0 = time.time()
    rng = random.Random(a.seed)
    wc = collections.Counter()
    docs = {p: read_docs(p) for p in PARTS}
    for p in PARTS:
        ds = docs[p][:]
        rng.shuffle(ds)
        n = 0
        for d in ds:
            wc.update(bpe.PAT.findall(d))
            n += len(d)
            if n > SAMPLE_MB[p] * 1e6:
                break
    wcu = {bpe.to_unicode(w): c for w, c in sorted(wc.items())}
    print(f"{len(wcu)} distinct pre-tokens, counted in {time.time()-t0:.1f}s", flush=True)
    merges = bpe.train_bpe(wcu, a.merges, log=lambda s: print(s, flush=True))
    bpe.save(os.path.join(out, "vocab.json"), os.path.join(out, "merges.txt"), merges)
    print(f"{len(merges)} merges in {time.time()-t0:.1f}s", flush=True)

    encode_parts(a, out, docs, rng)
    encode_parts(a, out, {p: read_docs(p) for p in EXTRA_PARTS}, None)


def encode_parts(a, out, docs, rng):
    """work/tok/<part>.npy for every part. The merge parts share rng in order (as when the committed
    checkpoints' data were made); the names part, added later, draws from its own stream so its tokens do
    not depend on whether the merges were trained in the same call (--encode-only)."""
    tok = bpe.Tokenizer(os.path.join(out, "vocab.json"), os.path.join(out, "merges.txt"))
    for p in docs:
        arr = encode(a, tok, p, docs[p], rng if p in PARTS else random.Random(f"{a.seed}-{p}"))
        np.save(os.path.join(out, f"{p}.npy"), arr)


def encode(a, tok, p, part_docs, rng):
    t0 = time.time()
    space = tok.vocab[bpe.to_unicode(" ")]
    ids = [tok.eos]
    nbytes = 0
    for d in part_docs:
        words = bpe.PAT.findall(d)
        for i, w in enumerate(words):
            if p in ("code", "stdlib") and i > 0 and words[i - 1] == "def" and w.startswith(" ") and len(w) > 1 \
                    and rng.random() < a.def_split_prob:
                ids.append(space)
                ids.extend(tok.bpe(bpe.to_unicode(w[1:])))
            elif len(w) > 1 and w[0] == "\n" and not w.strip() and rng.random() < a.newline_split_prob:
                ids.extend(tok.bpe(bpe.to_unicode("\n")))
                ids.extend(tok.bpe(bpe.to_unicode(w[1:])))
            else:
                ids.extend(tok.bpe(bpe.to_unicode(w)))
        ids.append(tok.eos)
        nbytes += len(d.encode("utf-8"))
    arr = np.array(ids, dtype=np.uint16)
    print(f"{p}: {len(arr)} tokens, {nbytes/len(arr):.2f} bytes/token ({time.time()-t0:.1f}s)", flush=True)
    return arr

if __name__ == "__main__":
    main()
