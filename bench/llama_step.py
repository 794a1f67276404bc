"""PyTorch peer of bench/llamastep: the same Llama architecture and
measurements, for a side-by-side comparison on the CPU.

Written for this benchmark: Llama (RMSNorm, rotate-half RoPE, GQA causal
attention, SwiGLU, untied classifier) in plain PyTorch 1.13, f32.
Run with OMP_WAIT_POLICY=PASSIVE and a fixed thread count (bench/llama_cpu.sh
does both); prints one JSON line.
"""
import argparse
import json
import math
import resource
import statistics
import time

import torch
import torch.nn.functional as F


class Config:
    def __init__(self, dim, layers, heads, kv_heads, ffn, vocab, theta):
        self.dim, self.layers, self.heads, self.kv_heads = dim, layers, heads, kv_heads
        self.ffn, self.vocab, self.theta = ffn, vocab, theta
        self.head_dim = dim // heads


REF24M = Config(288, 6, 6, 6, 768, 32000, 10000.0)


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        hd = c.head_dim
        self.attn_norm = RMSNorm(c.dim)
        self.q = torch.nn.Linear(c.dim, c.heads * hd, bias=False)
        self.k = torch.nn.Linear(c.dim, c.kv_heads * hd, bias=False)
        self.v = torch.nn.Linear(c.dim, c.kv_heads * hd, bias=False)
        self.o = torch.nn.Linear(c.heads * hd, c.dim, bias=False)
        self.mlp_norm = RMSNorm(c.dim)
        self.gate = torch.nn.Linear(c.dim, c.ffn, bias=False)
        self.up = torch.nn.Linear(c.dim, c.ffn, bias=False)
        self.down = torch.nn.Linear(c.ffn, c.dim, bias=False)

    def forward(self, x, cos, sin, mask, cache=None):
        c, (b, t, _) = self.c, x.shape
        h = self.attn_norm(x)
        q = self.q(h).view(b, t, c.heads, c.head_dim).transpose(1, 2)
        k = self.k(h).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        v = self.v(h).view(b, t, c.kv_heads, c.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:  # decoding: append to this layer's keys and values
            if "k" in cache:
                k, v = torch.cat((cache["k"], k), dim=2), torch.cat((cache["v"], v), dim=2)
            cache["k"], cache["v"] = k, v
        rep = c.heads // c.kv_heads
        if rep > 1:
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(c.head_dim) + mask
        att = torch.softmax(s.float(), dim=-1).to(q.dtype) @ v
        x = x + self.o(att.transpose(1, 2).reshape(b, t, -1))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = torch.nn.Embedding(c.vocab, c.dim)
        self.blocks = torch.nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.dim)
        self.head = torch.nn.Linear(c.dim, c.vocab, bias=False)
        inv = 1.0 / (c.theta ** (torch.arange(0, c.head_dim, 2).float() / c.head_dim))
        self.register_buffer("inv_freq", inv)

    def rope(self, start, t):
        freqs = torch.outer(torch.arange(start, start + t).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[None, None], emb.sin()[None, None]

    def forward(self, ids, caches=None, start=0):
        """Logits of ids, which follow start cached tokens when caches (one
        dict per layer) are given."""
        t = ids.shape[1]
        cos, sin = self.rope(start, t)
        mask = torch.full((t, start + t), float("-inf")).triu(start + 1)
        x = self.embed(ids)
        for i, blk in enumerate(self.blocks):
            x = blk(x, cos, sin, mask, None if caches is None else caches[i])
        return self.head(self.norm(x)).float()


def decode_rate(model, prompt, n):
    """Tokens per second of n greedy decoding steps after prompt [1, T]."""
    caches = [{} for _ in model.blocks]
    logits = model(prompt, caches, 0)
    nxt = logits[:, -1].argmax(-1, keepdim=True)
    t0 = time.perf_counter()
    for i in range(n):
        logits = model(nxt, caches, prompt.shape[1] + i)
        nxt = logits[:, -1].argmax(-1, keepdim=True)
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--long-prompt", type=int, default=1024,
                    help="prompt tokens of the second decode measurement (decode_long_tok_s)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    c = REF24M
    model = Llama(c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    ids = torch.randint(0, c.vocab, (a.batch, a.seq + 1))
    x, y = ids[:, :-1], ids[:, 1:]

    fb, st = [], []
    for _ in range(a.steps + 1):
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x).reshape(-1, c.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t1 = time.perf_counter()
        opt.step()
        t2 = time.perf_counter()
        fb.append(t1 - t0)
        st.append(t2 - t1)
    fb, st = fb[1:], st[1:]  # the first step warms up

    with torch.no_grad():
        prompt = ids[:1, : a.seq]
        model(prompt)
        t0 = time.perf_counter()
        model(prompt)
        prefill = a.seq / (time.perf_counter() - t0)
        # Greedy decoding with a KV cache, as turnwise does: prefill 32
        # tokens, then time 64 single-token steps (as bench/llamastep);
        # again after a long prompt, where each step's attention reads a
        # long cache.
        decode = decode_rate(model, prompt[:, :32], 64)
        decode_long = decode_rate(model, torch.randint(0, c.vocab, (1, a.long_prompt)), 64)

    print(json.dumps({
        "peer": "pytorch " + torch.__version__,
        "params": sum(p.numel() for p in model.parameters()),
        "fwd_bwd_s": statistics.median(fb),
        "adamw_s": statistics.median(st),
        "step_s": statistics.median(fb) + statistics.median(st),
        "prefill_tok_s": prefill,
        "decode_tok_s": decode,
        "decode_long_tok_s": decode_long,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))


if __name__ == "__main__":
    main()
