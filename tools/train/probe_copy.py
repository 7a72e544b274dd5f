#!/usr/bin/python3
"""Diagnostics on a training checkpoint: loss on first vs repeated name mentions in the validation
stories, and the best copy head (see make_card.copy_heads)."""
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import bpe  # noqa: E402
import make_card  # noqa: E402
import make_data  # noqa: E402
from export import val_stream  # noqa: E402
from model import GPT2  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
torch.set_num_threads(1)
ck = torch.load(sys.argv[1], map_location="cpu")
m = GPT2(ck["cfg"])
m.load_state_dict(ck["model"])
m.eval()
tok = bpe.Tokenizer(os.path.join(HERE, "work/tok/vocab.json"), os.path.join(HERE, "work/tok/merges.txt"))
names = {tok.encode(" " + n)[0] for n in make_data.GIRLS + make_data.BOYS if len(tok.encode(" " + n)) == 1}
val = os.path.join(HERE, "../../assets/models/kvscope-tiny/val/stories.txt")
s = val_stream(tok, val)
first, rep = [], []
with torch.no_grad():
    for i in range(0, len(s) - 1, 256):
        w = s[i:i + 256]
        lp = F.log_softmax(m(torch.tensor([w[:-1]]))[0], -1)
        for p in range(1, len(w)):
            if w[p] in names:
                (rep if w[p] in w[:p] else first).append(-lp[p - 1, w[p]].item())
h, n = make_card.copy_heads(m, tok, val, 256)
li, hi = np.unravel_index(np.argmax(h), h.shape)
print(f"step {ck['step']}: first-mention name loss {np.mean(first):.3f}, repeated name loss {np.mean(rep):.3f}, "
      f"best copy head L{li}H{hi} {h[li, hi]:.3f}")
