"""GPT-2 exactly as Hugging Face's GPT2LMHeadModel computes it (pre-LN blocks, gelu_new, learned
positions, tied LM head, final ln_f), with HF parameter names and Conv1D layout (weight [in, out]),
so the state dict exports 1:1 to model.safetensors.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Conv1D(nn.Module):
    """HF Conv1D: y = x @ W + b with W stored [in, out]."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(*x.shape[:-1], -1)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg["n_head"]
        d = cfg["n_embd"]
        self.c_attn = Conv1D(d, 3 * d)
        self.c_proj = Conv1D(d, d)
        n = cfg["n_positions"]
        self.register_buffer("mask", torch.tril(torch.ones(n, n, dtype=torch.bool)).view(1, 1, n, n),
                             persistent=False)

    def forward(self, x, return_attn=False):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        hd = C // self.n_head
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)  # (B, H, T, hd)
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)  # (B, H, T, T)
        att = att.masked_fill(~self.mask[:, :, :T, :T], torch.finfo(att.dtype).min)
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        y = self.c_proj(y)
        return (y, att) if return_attn else (y, None)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        self.c_fc = Conv1D(d, 4 * d)
        self.c_proj = Conv1D(4 * d, d)

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, eps = cfg["n_embd"], cfg["layer_norm_epsilon"]
        self.ln_1 = nn.LayerNorm(d, eps=eps)
        self.attn = Attention(cfg)
        self.ln_2 = nn.LayerNorm(d, eps=eps)
        self.mlp = MLP(cfg)

    def forward(self, x, return_attn=False):
        a, att = self.attn(self.ln_1(x), return_attn)
        x = x + a
        x = x + self.mlp(self.ln_2(x))
        return x, att


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg["vocab_size"], cfg["n_embd"])
        self.wpe = nn.Embedding(cfg["n_positions"], cfg["n_embd"])
        self.h = nn.ModuleList([Block(cfg) for _ in range(cfg["n_layer"])])
        self.ln_f = nn.LayerNorm(cfg["n_embd"], eps=cfg["layer_norm_epsilon"])


class GPT2(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.transformer = Transformer(cfg)
        nn.init.normal_(self.transformer.wte.weight, std=0.02)
        nn.init.normal_(self.transformer.wpe.weight, std=0.01)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):  # GPT-2's scaled residual init
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg["n_layer"]))

    def forward(self, idx, return_attn=False):
        B, T = idx.shape
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(T, device=idx.device))[None]
        atts = []
        for blk in t.h:
            x, att = blk(x, return_attn)
            atts.append(att)
        x = t.ln_f(x)
        logits = x @ t.wte.weight.t()  # tied LM head
        return (logits, atts) if return_attn else logits


def make_config(n_layer, n_head, n_embd, n_positions, vocab_size, eos):
    return dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], n_layer=n_layer, n_head=n_head,
                n_embd=n_embd, n_positions=n_positions, n_ctx=n_positions, vocab_size=vocab_size,
                layer_norm_epsilon=1e-5, activation_function="gelu_new", bos_token_id=eos, eos_token_id=eos,
                n_inner=None, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True)
