"""GPT-2 byte-level BPE: training (incremental pair counts), vocab.json/merges.txt I/O, encoding.

Exactly GPT-2's conventions: bytes_to_unicode table, pre-tokenizer regex, merges applied by rank.
"""
import collections
import json
import os
import sys

import regex

# GPT-2's byte <-> unicode table: the one the NumPy reference (tools/numpy_ref.py) defines.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numpy_ref import bytes_to_unicode  # noqa: E402

PAT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
EOT = "<|endoftext|>"


B2U = bytes_to_unicode()
U2B = {v: k for k, v in B2U.items()}


def to_unicode(s):
    return "".join(B2U[b] for b in s.encode("utf-8"))


def train_bpe(word_counts, n_merges, log=None):
    """word_counts: {unicode-form word: count}. Returns list of merges (a, b) in rank order.

    Incremental: pair counts and a pair -> words index are updated only for words
    containing the merged pair. Ties broken by the lexicographically smallest pair (deterministic).
    """
    words = [list(w) for w in word_counts]
    counts = [word_counts[w] for w in word_counts]
    pair_cnt = collections.defaultdict(int)
    where = collections.defaultdict(set)
    for i, w in enumerate(words):
        c = counts[i]
        for a, b in zip(w, w[1:]):
            pair_cnt[(a, b)] += c
            where[(a, b)].add(i)
    merges = []
    for step in range(n_merges):
        if not pair_cnt:
            break
        cnt = max(pair_cnt.values())
        a, b = min(p for p, c in pair_cnt.items() if c == cnt)
        if cnt < 2:
            break
        merges.append((a, b))
        ab = a + b
        for i in list(where[(a, b)]):
            w = words[i]
            c = counts[i]
            # remove old pairs of this word
            for p in zip(w, w[1:]):
                pair_cnt[p] -= c
                if pair_cnt[p] <= 0:
                    del pair_cnt[p]
                where[p].discard(i)
            nw = []
            j = 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    nw.append(ab)
                    j += 2
                else:
                    nw.append(w[j])
                    j += 1
            words[i] = nw
            for p in zip(nw, nw[1:]):
                pair_cnt[p] += c
                where[p].add(i)
        where.pop((a, b), None)
        pair_cnt.pop((a, b), None)
        if log and (step + 1) % 500 == 0:
            log(f"merge {step + 1}: {a!r}+{b!r} count {cnt}")
    return merges


def save(vocab_path, merges_path, merges):
    vocab = {}
    for b in range(256):
        vocab[B2U[b]] = len(vocab)
    for a, b in merges:
        vocab[a + b] = len(vocab)
    vocab[EOT] = len(vocab)
    with open(vocab_path, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(merges_path, "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")


class Tokenizer:
    def __init__(self, vocab_path, merges_path):
        self.vocab = json.load(open(vocab_path, encoding="utf-8"))
        self.inv = {v: k for k, v in self.vocab.items()}
        lines = open(merges_path, encoding="utf-8").read().split("\n")
        assert lines[0].startswith("#version")
        self.ranks = {}
        for l in lines[1:]:
            if l:
                a, b = l.split(" ")
                self.ranks[(a, b)] = len(self.ranks)
        self.eos = self.vocab[EOT]
        self.cache = {}

    def bpe(self, word):
        """word in unicode form -> list of token strings."""
        r = self.cache.get(word)
        if r is not None:
            return r
        parts = list(word)
        while len(parts) > 1:
            best, bi = None, -1
            for i in range(len(parts) - 1):
                rk = self.ranks.get((parts[i], parts[i + 1]))
                if rk is not None and (best is None or rk < best):
                    best, bi = rk, i
            if best is None:
                break
            a, b = parts[bi], parts[bi + 1]
            nw, j = [], 0
            while j < len(parts):
                if j + 1 < len(parts) and parts[j] == a and parts[j + 1] == b:
                    nw.append(a + b)
                    j += 2
                else:
                    nw.append(parts[j])
                    j += 1
            parts = nw
        ids = [self.vocab[p] for p in parts]
        if len(self.cache) < 1_000_000:
            self.cache[word] = ids
        return ids

    def encode(self, text):
        out = []
        for w in PAT.findall(text):
            out.extend(self.bpe(to_unicode(w)))
        return out

    def decode_bytes(self, ids):
        return b"".join(bytes(U2B[ch] for ch in self.inv[i]) if i != self.eos else EOT.encode() for i in ids)

    def decode(self, ids):
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def token_nbytes(self, i):
        return len(EOT.encode()) if i == self.eos else len(self.inv[i])
