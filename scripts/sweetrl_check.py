#!/usr/bin/env python3
"""An independent check of a turnwise SWEET-RL demo run's arithmetic.

Usage: sweetrl_check.py RUN_DIR [--tol 1e-5]

RUN_DIR is a `train demo` run's directory. The Go code wrote there the SFT
model (sft/: config.json, model.safetensors), the critic's and the actor's
LoRA adapters in PEFT layout (critic/, actor/), and check/values.json: a few
of the critic's and the actor's preference pairs as token ids, with the
values it computed at the saved adapters (scores, per-turn log-ratios, the
pairs' losses, the mean loss of one training step over them), the critic's
advantages on a few decisions, and the gradients of those mean losses with
respect to the adapters (check/critic-grad/, check/actor-grad/, in PEFT
layout).

This script shares no code with the Go implementation. It reads the
safetensors files itself, runs the Llama forward of the model in float64
with PyTorch (RMSNorm, rotate-half RoPE with the config's theta, grouped-
query attention, SwiGLU, LoRA as PEFT applies it), reads the byte chat
format of the token ids itself to find each agent turn (its content bytes
and closing end-of-sequence token), and recomputes from the definitions:

- the critic's score of a trajectory: the paper's (arXiv 2503.15478, Eq. 2-3)
  sum over agent turns of each turn's mean log-probability, or the
  released code's one mean over every agent-turn token ("trajectory"), under
  the critic (base + adapter) and its frozen reference (the base), and each
  turn's mean log-ratio;
- the Bradley-Terry loss -log sigmoid(beta*[(s(c) - s_ref(c)) - (s(r) -
  s_ref(r))]) of each critic pair, and the actor's turn-wise DPO loss (the
  summed log-probability of the reply) with its NLL term (coefficient times
  minus the mean log-probability of the chosen sequence: every token after
  the first, or the reply's);
- the mean of the losses over the pairs and its gradient with respect to
  every LoRA matrix (autograd);
- the critic's advantage of each candidate reply: its mean log-probability
  under the critic minus that under the reference (the paper's baseline), or
  under the sampling policy without the ground truth (the released code's).

Tolerance. The Go code computes in float32 and this script in float64, so
they differ by float32 rounding: about 1e-7 relative on a log-probability,
somewhat more after sums over a few hundred tokens. Every value is checked to
`--tol` (1e-5) relative, relative to the magnitude of what it is computed
from: a score relative to itself; a log-ratio (the difference of two scores
or mean log-probabilities that may nearly cancel) relative to the sum of the
two magnitudes it is the difference of; a loss relative to itself; a
gradient norm-wise, as one vector over every LoRA matrix of the adapter,
|g_go - g_py| <= tol * |g_py|, and each matrix relative to the norm of the
whole (a single entry, or a matrix, whose share of the gradient is small
carries float32's absolute error, not a relative one). The check
fails, printing every value that does not agree, and exits with status 1.
"""

import argparse
import json
import math
import os
import struct
import sys

import torch

BOS, EOS = 256, 257  # the byte tokenizer's special tokens
CRITIC_PREFIX = b"In light that the final answer is: "


def read_safetensors(path):
    """Returns the tensors of a safetensors file by name, as float64."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        dt = dtypes[info["dtype"]]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=dt) if b > a else torch.zeros(0, dtype=dt)
        out[name] = t.reshape(info["shape"]).to(torch.float64)
    return out


class Lora:
    """A PEFT LoRA adapter: y += scale * (x A^T) B^T on its target modules."""

    def __init__(self, directory, requires_grad=False):
        with open(os.path.join(directory, "adapter_config.json")) as f:
            cfg = json.load(f)
        r, alpha = cfg.get("r", 8), cfg.get("lora_alpha", 8)
        self.scale = alpha / math.sqrt(r) if cfg.get("use_rslora") else alpha / r
        for key in ("use_dora", "modules_to_save", "layers_to_transform", "rank_pattern", "alpha_pattern"):
            if cfg.get(key):
                raise SystemExit(f"{directory}: {key} is set, which this check does not implement")
        self.tensors = read_safetensors(os.path.join(directory, "adapter_model.safetensors"))
        for t in self.tensors.values():
            t.requires_grad_(requires_grad)

    def pair(self, module):
        """The (A, B) matrices of a module path such as model.layers.0.self_attn.q_proj, or None."""
        a = self.tensors.get(f"base_model.model.{module}.lora_A.weight")
        b = self.tensors.get(f"base_model.model.{module}.lora_B.weight")
        return None if a is None else (a, b)


class Llama:
    """The Llama forward, in float64, from a Hugging Face config and weights."""

    def __init__(self, directory):
        with open(os.path.join(directory, "config.json")) as f:
            c = json.load(f)
        if c.get("rope_scaling") or c.get("rope_parameters", {}).get("rope_type", "default") not in ("default", None):
            raise SystemExit("the model's RoPE is scaled, which this check does not implement")
        if c.get("hidden_act", "silu") != "silu" or c.get("attention_bias") or c.get("mlp_bias"):
            raise SystemExit("the model is not a plain Llama (activation or biases)")
        self.d, self.layers = c["hidden_size"], c["num_hidden_layers"]
        self.heads, self.kv = c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c.get("head_dim") or self.d // self.heads
        self.eps, self.theta = c["rms_norm_eps"], c["rope_theta"]
        self.w = read_safetensors(os.path.join(directory, "model.safetensors"))
        if c.get("tie_word_embeddings") or "lm_head.weight" not in self.w:
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]

    def rms(self, x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    def linear(self, x, module, lora):
        y = x @ self.w[module + ".weight"].T
        p = lora.pair(module) if lora else None
        if p is not None:
            y = y + lora.scale * ((x @ p[0].T) @ p[1].T)
        return y

    def rope(self, x, cos, sin):
        half = self.hd // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def logprobs(self, ids, lora=None):
        """lp[i] = log p(ids[i] | ids[:i]) for i >= 1 (lp[0] = 0)."""
        n = len(ids)
        ids_t = torch.tensor(ids, dtype=torch.long)
        x = self.w["model.embed_tokens.weight"][ids_t]
        inv = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd))
        ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
        cos = torch.cat((ang.cos(), ang.cos()), -1)[:, None, :]
        sin = torch.cat((ang.sin(), ang.sin()), -1)[:, None, :]
        mask = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)
        for l in range(self.layers):
            pre = f"model.layers.{l}"
            h = self.rms(x, self.w[pre + ".input_layernorm.weight"])
            q = self.linear(h, pre + ".self_attn.q_proj", lora).view(n, self.heads, self.hd)
            k = self.linear(h, pre + ".self_attn.k_proj", lora).view(n, self.kv, self.hd)
            v = self.linear(h, pre + ".self_attn.v_proj", lora).view(n, self.kv, self.hd)
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            rep = self.heads // self.kv  # query head j reads key/value head j // rep
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            att = torch.einsum("ihd,jhd->hij", q, k) / math.sqrt(self.hd) + mask
            o = torch.einsum("hij,jhd->ihd", att.softmax(-1), v).reshape(n, self.heads * self.hd)
            x = x + self.linear(o, pre + ".self_attn.o_proj", lora)
            h = self.rms(x, self.w[pre + ".post_attention_layernorm.weight"])
            g = self.linear(h, pre + ".mlp.gate_proj", lora)
            u = self.linear(h, pre + ".mlp.up_proj", lora)
            x = x + self.linear(torch.nn.functional.silu(g) * u, pre + ".mlp.down_proj", lora)
        x = self.rms(x, self.w["model.norm.weight"])
        lsm = torch.log_softmax(x @ self.w["lm_head.weight"].T, dim=-1)
        lp = lsm[torch.arange(n - 1), ids_t[1:]]
        return torch.cat((torch.zeros(1, dtype=torch.float64), lp))


def chat_turns(ids):
    """Parses token ids in the byte chat format: an optional prefix, BOS, then
    messages (a two-byte role tag, the content bytes, EOS). Returns the prefix
    bytes and, for each message, its tag and the range [start, end] of its
    content and closing EOS."""
    if BOS not in ids:
        raise ValueError("no beginning-of-sequence token")
    b = ids.index(BOS)
    prefix, msgs, i = bytes(ids[:b]), [], b + 1
    while i < len(ids):
        tag = bytes(ids[i:i + 2])
        j = ids.index(EOS, i + 2)
        if any(t >= 256 for t in ids[i:j]):
            raise ValueError(f"a special token inside the message at {i}")
        msgs.append((tag, i + 2, j))
        i = j + 1
    return prefix, msgs


def agent_turns(ids):
    """The token ranges of the agent turns (assistant content and its EOS)."""
    _, msgs = chat_turns(ids)
    return [(s, e) for tag, s, e in msgs if tag == b"a>"]


class Checker:
    def __init__(self, tol):
        self.tol, self.failures, self.worst, self.count = tol, [], {}, {}

    def close(self, what, got, want, scale=None):
        """got (Go) agrees with want (here) to tol relative to scale (default |want|)."""
        scale = abs(want) if scale is None else scale
        err = abs(got - want) / max(scale, 1e-30)
        kind = what.split(":")[0]
        self.worst[kind] = max(self.worst.get(kind, 0.0), err)
        self.count[kind] = self.count.get(kind, 0) + 1
        if not err <= self.tol:
            self.failures.append(f"{what}: Go {got!r}, recomputed {want!r} (relative error {err:.2e})")

    def close_norm(self, what, diff, norm):
        """|g_go - g_py| = diff agrees to tol relative to |g_py| = norm."""
        err = diff / max(norm, 1e-30)
        kind = what.split(":")[0]
        self.worst[kind] = max(self.worst.get(kind, 0.0), err)
        self.count[kind] = self.count.get(kind, 0) + 1
        if not err <= self.tol:
            self.failures.append(f"{what}: |Go - recomputed| = {diff:.3e}, |recomputed| = {norm:.3e} (relative error {err:.2e})")

    def require(self, what, ok):
        self.count["structure"] = self.count.get("structure", 0) + 1
        if not ok:
            self.failures.append(what)


def check_prefs(ck, name, model, lora, rec, kind):
    """Recomputes a preference adapter's pairs, losses and gradient. kind is
    "turn" or "trajectory" (a critic) or "actor"."""
    beta, coef, nll_seq = rec["beta"], rec["nll_coef"], rec["nll_sequence"]
    losses = []
    for p, pair in enumerate(rec["pairs"]):
        side_vals = {}
        for side in ("chosen", "rejected"):
            s = pair[side]
            ids = s["ids"]
            turns = agent_turns(ids)
            ck.require(f"{name} pair {p} {side}: no agent turn", len(turns) > 0)
            lp, ref = model.logprobs(ids, lora), model.logprobs(ids)
            with torch.no_grad():
                lpd, refd = lp.detach(), ref
            if kind == "actor":
                s_start, s_end = turns[-1]
                ck.require(f"{name} pair {p} {side}: the reply is not the sequence's end", s_end == len(ids) - 1)
                score = lp[s_start:s_end + 1].sum()
                ref_score = ref[s_start:s_end + 1].sum()
                tok = [(s_start, s_end)]
            elif kind == "turn":
                prefix, _ = chat_turns(ids)
                ck.require(f"{name} pair {p} {side}: prefix {prefix!r}", prefix.startswith(CRITIC_PREFIX) and prefix.endswith(b"."))
                score = sum(lp[a:b + 1].mean() for a, b in turns)
                ref_score = sum(ref[a:b + 1].mean() for a, b in turns)
                tok = turns
            else:  # one mean over every agent-turn token of the trajectory
                prefix, _ = chat_turns(ids)
                ck.require(f"{name} pair {p} {side}: prefix {prefix!r}", prefix.startswith(CRITIC_PREFIX) and prefix.endswith(b"."))
                allt = torch.cat([lp[a:b + 1] for a, b in turns])
                allr = torch.cat([ref[a:b + 1] for a, b in turns])
                score, ref_score, tok = allt.mean(), allr.mean(), turns
            ck.close(f"score: {name} pair {p} {side}", s["score"], score.item())
            ck.close(f"reference score: {name} pair {p} {side}", s["ref_score"], ref_score.item())
            ck.require(f"{name} pair {p} {side}: {len(s['turn_logratios'])} turns written, {len(tok)} found",
                       len(s["turn_logratios"]) == len(tok))
            for t, (a, b) in enumerate(tok):
                ratio = (lpd[a:b + 1] - refd[a:b + 1]).mean().item()
                mag = (lpd[a:b + 1].abs().mean() + refd[a:b + 1].abs().mean()).item()
                if t < len(s["turn_logratios"]):
                    ck.close(f"turn log-ratio: {name} pair {p} {side} turn {t}", s["turn_logratios"][t], ratio, mag)
            side_vals[side] = (score, ref_score, lp, tok)
        (sc, rc, lpc, tokc), (sr, rr, _, _) = side_vals["chosen"], side_vals["rejected"]
        margin = (sc - rc) - (sr - rr)
        ck.close(f"log-ratio margin: {name} pair {p}",
                 (pair["chosen"]["score"] - pair["chosen"]["ref_score"]) - (pair["rejected"]["score"] - pair["rejected"]["ref_score"]),
                 margin.item(), (abs(sc) + abs(rc) + abs(sr) + abs(rr)).item())
        loss = -torch.nn.functional.logsigmoid(beta * margin)
        if coef:
            if nll_seq:
                mean_c = lpc[1:].mean()
            else:
                mean_c = torch.cat([lpc[a:b + 1] for a, b in tokc]).mean()
            loss = loss - coef * mean_c
        ck.close(f"loss: {name} pair {p}", pair["loss"], loss.item())
        losses.append(loss)
    mean = torch.stack(losses).mean()
    ck.close(f"step loss: {name}", rec["step_loss"], mean.item())
    mean.backward()
    return mean


def check_grads(ck, name, lora, grad_dir):
    """The gradient is one vector over every LoRA matrix of the adapter: the
    whole is checked norm-wise, and so is each matrix, relative to the norm
    of the whole (a matrix whose share of the gradient is small carries
    float32's absolute error)."""
    go = read_safetensors(os.path.join(grad_dir, "adapter_model.safetensors"))
    ck.require(f"{name} gradient: tensors {sorted(go)} against the adapter's {sorted(lora.tensors)}", sorted(go) == sorted(lora.tensors))
    py = {n: (t.grad if t.grad is not None else torch.zeros_like(t)) for n, t in lora.tensors.items()}
    whole = math.sqrt(sum(g.norm().item() ** 2 for g in py.values()))
    diff2 = 0.0
    for tname, g_py in py.items():
        g_go = go.get(tname)
        if g_go is None:
            continue
        d = (g_go - g_py).norm().item()
        diff2 += d * d
        ck.close_norm(f"gradient matrix: {name} {tname}", d, whole)
    ck.close_norm(f"gradient: {name}", math.sqrt(diff2), whole)


def check_advantages(ck, model, loras, cases):
    for i, c in enumerate(cases):
        lora = loras[c["adapter"]]
        for j, cand in enumerate(c["candidates"]):
            ids, pids = c["critic_ids"][j], c["policy_ids"][j]
            prefix, _ = chat_turns(ids)
            ck.require(f"advantage case {i}: prefix {prefix!r}", prefix.startswith(CRITIC_PREFIX))
            a, b = agent_turns(ids)[-1]
            ck.require(f"advantage case {i} candidate {j}: the reply is {bytes(ids[a:b])!r}, not {cand!r}",
                       bytes(ids[a:b]) == cand.strip().encode())
            with torch.no_grad():
                crit = model.logprobs(ids, lora)[a:b + 1].mean().item()
                if c["baseline"] == "reference":
                    base = model.logprobs(ids)[a:b + 1].mean().item()
                else:  # the sampling policy (the base), without the ground truth
                    pa, pb = agent_turns(pids)[-1]
                    base = model.logprobs(pids)[pa:pb + 1].mean().item()
            ck.close(f"advantage: case {i} ({c['name']}) candidate {j}", c["advantages"][j], crit - base, abs(crit) + abs(base))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", help="a train demo run's directory")
    ap.add_argument("--tol", type=float, default=1e-5, help="relative tolerance (see the module's documentation)")
    args = ap.parse_args()
    with open(os.path.join(args.run, "check", "values.json")) as f:
        vals = json.load(f)
    torch.set_grad_enabled(True)
    model = Llama(os.path.join(args.run, vals["model"]))
    ck = Checker(args.tol)
    loras = {}
    checked = []
    if vals.get("critic"):
        rec = vals["critic"]
        lora = loras[rec["adapter"]] = Lora(os.path.join(args.run, rec["adapter"]), requires_grad=True)
        check_prefs(ck, "critic", model, lora, rec, rec["score"])
        check_grads(ck, "critic", lora, os.path.join(args.run, rec["grad"]))
        checked.append(f"critic ({rec['score']} score, {len(rec['pairs'])} pairs)")
    if vals.get("advantages"):
        for c in vals["advantages"]:
            if c["adapter"] not in loras:
                loras[c["adapter"]] = Lora(os.path.join(args.run, c["adapter"]))
        check_advantages(ck, model, loras, vals["advantages"])
        checked.append(f"{len(vals['advantages'])} advantage decisions")
    if vals.get("actor"):
        rec = vals["actor"]
        lora = Lora(os.path.join(args.run, rec["adapter"]), requires_grad=True)
        check_prefs(ck, "actor", model, lora, rec, "actor")
        check_grads(ck, "actor", lora, os.path.join(args.run, rec["grad"]))
        checked.append(f"actor ({len(rec['pairs'])} pairs, NLL {rec['nll_coef']})")
    if not checked:
        print("sweetrl_check: the run wrote no values to check", file=sys.stderr)
        return 1
    print(f"sweetrl_check: {args.run}: {', '.join(checked)}; torch {torch.__version__}, float64")
    for kind in sorted(ck.worst):
        print(f"  {kind:22s} {ck.count[kind]:4d} values, worst relative error {ck.worst[kind]:.2e}")
    if ck.failures:
        print(f"sweetrl_check: {len(ck.failures)} values disagree (tolerance {args.tol:g}):", file=sys.stderr)
        for f in ck.failures:
            print("  " + f, file=sys.stderr)
        return 1
    print(f"sweetrl_check: every value agrees to {args.tol:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
