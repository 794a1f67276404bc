#!/usr/bin/env python3
"""PyTorch peers of `train bench`, measured on the same GPU in the same run.

  (a) attention: torch.nn.functional.scaled_dot_product_attention on its
      flash path (bf16, causal, grouped-query), forward and backward, at the
      shapes of our attention kernels;
  (b) step: a LoRA training step of the Hugging Face Llama built from the
      Llama-3.1-8B configuration (random bf16 weights, SDPA attention), PEFT
      LoRA r=16 on q, k, v, o, gate, up, down, AdamW with the gradient norm
      clipped to 1, at 2048 and 8192 tokens, with and without gradient
      checkpointing; and prefill and decode of the base model at batch 1
      and 16.

It writes the schema of `train bench --out` (bench/result.go, "turnwise-bench/1"),
with result names built as bench/opbench and bench/stepbench build ours, so
that `train bench report` puts the two side by side. Without PyTorch or a
CUDA device it says so on one line and writes a result that records why.

    python3 torch_peers.py --json OUT/bench-torch.json
    python3 torch_peers.py --describe      # names and FLOP counts, no PyTorch needed
"""
import argparse
import datetime
import gc
import inspect
import json
import math
import os
import platform
import statistics
import sys
import time

SCHEMA = "turnwise-bench/1"

# The two model configurations, as model/llama's presets of the same names.
PRESETS = {
    "llama-3.1-8b": dict(dim=4096, layers=32, heads=32, kv_heads=8, head_dim=128, ffn=14336, vocab=128256,
                         norm_eps=1e-5, rope_theta=500000.0, max_seq=131072, tied=False,
                         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "tiny": dict(dim=64, layers=2, heads=4, kv_heads=2, head_dim=16, ffn=172, vocab=512,
                 norm_eps=1e-5, rope_theta=10000.0, max_seq=256, tied=False, rope_scaling=None),
}
PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

# Rotation past the L2 cache, as bench/kernelbench does it.
ROTATE_FACTOR, MAX_COPIES = 2, 256


# --- names and counts, shared with the Go side (tested there against ours) ---

def attention_name(pas, seqs, seq_len, h, g, dh):
    """bench/opbench.AttentionName."""
    return f"attention/{pas}/bf16/b{seqs}xT{seq_len}/H{h}/G{g}/D{dh}"


def attention_flops(seqs, seq_len, h, dh):
    """bench/opbench.AttentionFLOPs: QKᵀ and PV over the causal half."""
    return float(seqs) * h * 2 * seq_len * seq_len * dh


def attention_bytes(pas, seq_len, h, g, dh):
    """The least traffic of bench/opbench's attention cases (bf16, one sequence)."""
    q, kv = seq_len * h * dh * 2, seq_len * g * dh * 2
    lse = 4 * seq_len * h
    return (2 * q + 2 * kv + lse) if pas == "fwd" else (4 * q + 4 * kv + lse)


def step_name(model, seq_len, rank, recompute):
    """bench/stepbench.StepName."""
    return f"lora_step/{model}/T{seq_len}/r{rank}" + ("/recompute" if recompute else "")


def generation_name(phase, model, batch, prompt, new_tokens):
    """bench/stepbench.GenerationName."""
    if phase == "prefill":
        return f"prefill/{model}/b{batch}/p{prompt}"
    return f"decode/{model}/b{batch}/p{prompt}/n{new_tokens}"


def lora_params(c, r):
    """model/llama.Config.LoRAParams on every projection."""
    d, hd = c["dim"], c["head_dim"]
    q, kv = c["heads"] * hd, c["kv_heads"] * hd
    per = r * ((d + q) + 2 * (d + kv) + (q + d) + 2 * (d + c["ffn"]) + (c["ffn"] + d))
    return c["layers"] * per


def flops_per_token(c, r, seq_len):
    """bench/stepbench.FLOPsPerToken: 4·N + 6·N_lora + 6·L·H·Dh·T."""
    d, hd = c["dim"], c["head_dim"]
    per_layer = 2 * d * c["heads"] * hd + 2 * d * c["kv_heads"] * hd + 3 * d * c["ffn"]
    n = c["layers"] * per_layer + c["vocab"] * d
    nl = lora_params(c, r)
    attn = 6.0 * c["layers"] * c["heads"] * hd * seq_len
    how = (f"4·N + 6·N_lora + 6·L·H·Dh·T per token: N = {n:.3g} weights that multiply activations "
           f"(frozen: forward and input gradients only), N_lora = {nl:.3g}, attention over the causal half, "
           f"forward and backward; recomputation not counted")
    return 4.0 * n + 6.0 * nl + attn, how


def copies(nbytes, cache):
    """bench/kernelbench.Copies."""
    if cache <= 0 or nbytes <= 0:
        return 1
    return int(min(max(-(-ROTATE_FACTOR * cache // nbytes), 1), MAX_COPIES))


# --- the result file ---

def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_result(device="", skipped=""):
    meta = {"impl": "pytorch", "date": now(), "backend": "torch", "device": device,
            "versions": {"python": platform.python_version()}}
    if skipped:
        meta["skipped"] = skipped
    return {"schema": SCHEMA, "meta": meta, "ceilings": {}}


def kernel_entry(name, impl, bound, flops, nbytes, runs=None, iters=0, n_copies=0, error=""):
    """A bench.Kernel, its figures derived as Kernel.SetRuns derives ours."""
    k = {"name": name, "impl": impl, "bound": bound}
    if flops:
        k["flops"] = flops
    if nbytes:
        k["bytes"] = int(nbytes)
    if error:
        k["error"] = error
        return k
    med = statistics.median(runs)
    k.update({"runs_s": runs, "median_s": med, "iters": iters, "copies": n_copies,
              "rotation_bytes": int(n_copies * nbytes)})
    if flops:
        k["tflops"] = flops / med / 1e12
    if nbytes:
        k["gbs"] = nbytes / med / 1e9
    return k


def step_entry(model, seq_len, rank, recompute, c, runs=None, error="", **mem):
    s = {"name": step_name(model, seq_len, rank, recompute), "impl": "pytorch-peft", "model": model, "seqs": 1,
         "seq": seq_len, "tokens": seq_len, "lora_rank": rank, "recompute": recompute}
    s["flops_per_token"], s["flop_count"] = flops_per_token(c, rank, seq_len)
    if error:
        s["error"] = error
        return s
    med = statistics.median(runs)
    s.update({"runs_s": runs, "median_s": med, "tokens_per_s": seq_len / med})
    s["tflops"] = s["flops_per_token"] * s["tokens_per_s"] / 1e12
    s.update({k: v for k, v in mem.items() if v})
    return s


def generation_entry(phase, model, batch, prompt, new_tokens, runs=None, error=""):
    g = {"name": generation_name(phase, model, batch, prompt, new_tokens), "impl": "pytorch-hf", "model": model,
         "phase": phase, "batch": batch, "prompt": prompt, "new_tokens": new_tokens if phase == "decode" else 0}
    if error:
        g["error"] = error
        return g
    med = statistics.median(runs)
    tokens = batch * (prompt if phase == "prefill" else new_tokens)
    g.update({"runs_s": runs, "median_s": med, "tokens_per_s": tokens / med})
    return g


def write(result, path):
    text = json.dumps(result, indent=2) + "\n"
    if path:
        with open(path, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --- measuring (needs PyTorch and a CUDA device) ---

class Timer:
    """CUDA events on the current stream, as our Timer uses on a GPU."""

    def __init__(self, torch):
        self.torch = torch
        self.a = torch.cuda.Event(enable_timing=True)
        self.b = torch.cuda.Event(enable_timing=True)

    def time(self, fn, calls):
        self.a.record()
        for _ in range(calls):
            fn()
        self.b.record()
        self.b.synchronize()
        return self.a.elapsed_time(self.b) / 1e3 / calls


def measure(torch, ops, reps, min_time):
    """kernelbench.Measure: warm-up over every input set, an estimate, then
    reps repetitions of enough calls to fill min_time, rotating the sets."""
    state = {"i": 0}

    def call():
        ops[state["i"]]()
        state["i"] = (state["i"] + 1) % len(ops)

    t = Timer(torch)
    t.time(call, len(ops))
    est = t.time(call, min(len(ops), 8))
    iters = 1
    if min_time > 0 and est > 0:
        iters = int(min(max(math.ceil(min_time / est), 1), 100000))
    return [t.time(call, iters) for _ in range(reps)], iters


def is_oom(torch, e):
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", RuntimeError)
    return isinstance(e, oom) or "out of memory" in str(e)


def free(torch):
    gc.collect()
    torch.cuda.empty_cache()


def ceilings(torch, args, cache, result):
    """The peer's own ceilings: torch.matmul (cuBLAS) and a device copy."""
    n = args.gemm_size
    mats = [(torch.randn(n, n, device="cuda", dtype=torch.bfloat16), torch.randn(n, n, device="cuda", dtype=torch.bfloat16))
            for _ in range(copies(3 * n * n * 2, cache))]
    outs = [torch.empty(n, n, device="cuda", dtype=torch.bfloat16) for _ in mats]
    ops = [lambda a=a, b=b, o=o: torch.matmul(a, b, out=o) for (a, b), o in zip(mats, outs)]
    runs, iters = measure(torch, ops, args.reps, args.min_time)
    result["ceilings"]["gemm"] = kernel_entry(f"ceiling/gemm/square/bf16/{n}", "torch-matmul", "compute",
                                              2.0 * n ** 3, 3 * n * n * 2, runs, iters, len(ops))
    del mats, outs, ops
    nb = args.copy_mib << 20
    src, dst = torch.randn(nb // 4, device="cuda"), torch.empty(nb // 4, device="cuda")
    runs, iters = measure(torch, [lambda: dst.copy_(src)], args.reps, args.min_time)
    result["ceilings"]["copy"] = kernel_entry(f"ceiling/copy/{args.copy_mib}MiB", "torch-copy", "memory",
                                              0, 2 * nb, runs, iters, 1)
    del src, dst
    free(torch)


def attention(torch, args, cache, result):
    """(a): SDPA on its flash path at our attention cases' shapes."""
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        flash = lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    except ImportError:  # older PyTorch
        flash = lambda: torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False)
    c = PRESETS["llama-3.1-8b"]
    h, g, dh = c["heads"], c["kv_heads"], c["head_dim"]
    gqa_notes = []
    for seq in args.attn_seqs:
        for pas in ("fwd", "bwd"):
            name = attention_name(pas, 1, seq, h, g, dh)
            nbytes = attention_bytes(pas, seq, h, g, dh)
            flops = attention_flops(1, seq, h, dh) * (1 if pas == "fwd" else 2.5)
            try:
                sets = []
                for _ in range(copies(nbytes, cache)):
                    q = torch.randn(1, h, seq, dh, device="cuda", dtype=torch.bfloat16, requires_grad=pas == "bwd")
                    k = torch.randn(1, g, seq, dh, device="cuda", dtype=torch.bfloat16, requires_grad=pas == "bwd")
                    v = torch.randn(1, g, seq, dh, device="cuda", dtype=torch.bfloat16, requires_grad=pas == "bwd")
                    sets.append((q, k, v))
                with flash():
                    def probe(kw):
                        o = sdpa(*sets[0], is_causal=True, **kw)
                        if pas == "bwd":
                            torch.autograd.grad(o, sets[0], torch.ones_like(o))
                    try:
                        probe({"enable_gqa": True})
                        kw = {"enable_gqa": True}
                        note = "SDPA's flash path with enable_gqa=True"
                    except (RuntimeError, TypeError):
                        # No flash kernel for grouped heads in this PyTorch: the
                        # keys and values are repeated to all heads before timing.
                        sets = [(q, k.repeat_interleave(h // g, dim=1).detach().requires_grad_(k.requires_grad),
                                 v.repeat_interleave(h // g, dim=1).detach().requires_grad_(v.requires_grad))
                                for q, k, v in sets]
                        kw = {}
                        probe(kw)
                        note = "SDPA's flash path with keys and values repeated to all heads outside the timing"
                    if note not in gqa_notes:
                        gqa_notes.append(note)
                    if pas == "fwd":
                        ops = [lambda s=s: sdpa(*s, is_causal=True, **kw) for s in sets]
                        with torch.no_grad():
                            runs, iters = measure(torch, ops, args.reps, args.min_time)
                    else:
                        outs = [sdpa(*s, is_causal=True, **kw) for s in sets]
                        grads = [torch.randn_like(o) for o in outs]
                        ops = [lambda s=s, o=o, d=d: torch.autograd.grad(o, s, d, retain_graph=True)
                               for s, o, d in zip(sets, outs, grads)]
                        runs, iters = measure(torch, ops, args.reps, args.min_time)
                k = kernel_entry(name, "torch-sdpa", "compute", flops, nbytes, runs, iters, len(sets))
                log(f"{name:56} torch-sdpa {k['median_s'] * 1e6:10.1f} µs {k['tflops']:7.1f} TFLOP/s")
            except Exception as e:  # one failing case must not hide the others
                k = kernel_entry(name, "torch-sdpa", "compute", flops, nbytes, error=f"{type(e).__name__}: {e}")
                log(f"{name}: {k['error']}")
            result.setdefault("kernels", []).append(k)
            sets = ops = outs = grads = None
            free(torch)
    for note in gqa_notes:
        result["meta"].setdefault("notes", []).append(f"attention: {note}")


def build_model(torch, args):
    """The Hugging Face Llama of args.model with random bf16 weights."""
    from transformers import LlamaConfig, LlamaForCausalLM
    c = PRESETS[args.model]
    common = dict(vocab_size=c["vocab"], hidden_size=c["dim"], intermediate_size=c["ffn"],
                  num_hidden_layers=c["layers"], num_attention_heads=c["heads"], num_key_value_heads=c["kv_heads"],
                  head_dim=c["head_dim"], max_position_embeddings=c["max_seq"], rms_norm_eps=c["norm_eps"],
                  tie_word_embeddings=c["tied"], attention_bias=False, mlp_bias=False, use_cache=False,
                  attn_implementation="sdpa")
    rope = dict(c["rope_scaling"] or {"rope_type": "default"})
    if hasattr(LlamaConfig(), "rope_parameters"):
        # transformers ≥ 5: θ and the scaling in one dictionary.
        cfg = LlamaConfig(rope_parameters=dict(rope, rope_theta=c["rope_theta"]), **common)
    else:
        cfg = LlamaConfig(rope_theta=c["rope_theta"], rope_scaling=c["rope_scaling"], **common)
    torch.manual_seed(args.seed)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        model.config._attn_implementation = "sdpa"
    return model, c


def rope_of(cfg):
    """θ and the scaling type a built configuration ended up with (they do not
    change the speed, but the notes say what was built)."""
    p = getattr(cfg, "rope_parameters", None) or {}
    theta = p.get("rope_theta", getattr(cfg, "rope_theta", None))
    kind = p.get("rope_type") or (getattr(cfg, "rope_scaling", None) or {}).get("rope_type", "default")
    return theta, kind


def generation(torch, model, c, args, result):
    """Prefill of random prompts and greedy decoding, base model, KV cache."""
    model.eval()
    fwd = inspect.signature(model.forward).parameters
    keep = {"logits_to_keep": 1} if "logits_to_keep" in fwd else ({"num_logits_to_keep": 1} if "num_logits_to_keep" in fwd else {})
    for batch in args.gen_batch:
        pre, dec = [], []
        err = ""
        try:
            prompts = torch.randint(0, c["vocab"], (batch, args.prompt), device="cuda")
            with torch.no_grad():
                for r in range(args.gen_reps + 1):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    out = model(input_ids=prompts, use_cache=True, **keep)
                    past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
                    torch.cuda.synchronize()
                    t1 = time.perf_counter()
                    for _ in range(args.new_tokens):
                        out = model(input_ids=nxt, past_key_values=past, use_cache=True)
                        past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
                    torch.cuda.synchronize()
                    t2 = time.perf_counter()
                    if r > 0:
                        pre.append(t1 - t0)
                        dec.append(t2 - t1)
                    out = past = None
        except Exception as e:
            err = "out of memory" if is_oom(torch, e) else f"{type(e).__name__}: {e}"
        for phase, runs in (("prefill", pre), ("decode", dec)):
            g = generation_entry(phase, args.model, batch, args.prompt, args.new_tokens, runs, err)
            result.setdefault("generation", []).append(g)
            log(f"{g['name']:40} pytorch-hf " + (g.get("error") or f"{g['tokens_per_s']:10.0f} tokens/s"))
        free(torch)


def steps(torch, model, c, args, result):
    """(b): the PEFT LoRA step at each length, with and without checkpointing."""
    from peft import LoraConfig, get_peft_model
    lcfg = LoraConfig(r=args.lora_rank, lora_alpha=2 * args.lora_rank, lora_dropout=0.0, bias="none",
                      task_type="CAUSAL_LM", target_modules=PROJECTIONS)
    model = get_peft_model(model, lcfg)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    dtypes = sorted({str(p.dtype).replace("torch.", "") for p in params})
    result["meta"].setdefault("notes", []).append(
        f"PEFT LoRA r={args.lora_rank}, alpha {2 * args.lora_rank}, on {', '.join(PROJECTIONS)}: "
        f"{sum(p.numel() for p in params)} trainable parameters in {'/'.join(dtypes)} (PEFT's default); "
        f"attention {model.config._attn_implementation}; torch.optim.AdamW (defaults otherwise), gradient norm clipped to 1; "
        f"the loss is Hugging Face's (fp32 logits over the whole sequence)")
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    gen = torch.Generator(device="cuda").manual_seed(args.seed)
    for seq in args.seqs:
        for rc in (False, True):
            if rc:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            else:
                model.gradient_checkpointing_disable()
            ids = torch.randint(0, c["vocab"], (1, seq), device="cuda", generator=gen)
            labels = torch.randint(0, c["vocab"], (1, seq), device="cuda", generator=gen)
            opt.zero_grad(set_to_none=True)
            free(torch)
            torch.cuda.reset_peak_memory_stats()
            runs, err = [], ""
            try:
                for i in range(args.steps + 1):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    opt.zero_grad(set_to_none=True)
                    loss = model(input_ids=ids, labels=labels, use_cache=False).loss
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(params, 1.0)
                    opt.step()
                    torch.cuda.synchronize()
                    if i > 0:
                        runs.append(time.perf_counter() - t0)
                    loss = None
            except Exception as e:
                err = "out of memory" if is_oom(torch, e) else f"{type(e).__name__}: {e}"
                loss = None
            free_b, total_b = torch.cuda.mem_get_info()
            s = step_entry(args.model, seq, args.lora_rank, rc, c, runs, err,
                           peak_bytes=torch.cuda.max_memory_allocated(), reserved_bytes=torch.cuda.max_memory_reserved(),
                           device_used_bytes=total_b - free_b,
                           peak_what="torch.cuda.max_memory_allocated: weights, adapters, gradients, AdamW state, "
                                     "activations and logits (the caching allocator's reserve is reserved_bytes)")
            result.setdefault("steps", []).append(s)
            log(f"{s['name']:44} pytorch-peft " + (s.get("error") or
                f"{s['median_s']:.3f} s/step {s['tokens_per_s']:8.0f} tokens/s peak {s['peak_bytes'] / 2**30:.2f} GiB"))
            opt.zero_grad(set_to_none=True)
            free(torch)


def describe(args):
    """Names and counts this script would produce, without PyTorch."""
    c = PRESETS[args.model]
    out = {"attention": [attention_name(p, 1, s, 32, 8, 128) for s in args.attn_seqs for p in ("fwd", "bwd")],
           "steps": {step_name(args.model, s, args.lora_rank, rc): flops_per_token(c, args.lora_rank, s)[0]
                     for s in args.seqs for rc in (False, True)},
           "generation": [generation_name(p, args.model, b, args.prompt, args.new_tokens)
                          for b in args.gen_batch for p in ("prefill", "decode")],
           "copies": {str(n): copies(n, 50 << 20) for n in (1 << 30, 60 << 20, 10 << 20, 1024)}}
    json.dump(out, sys.stdout, indent=1)
    print()


def selftest(args):
    """A result built by this script's writers from made-up timings, for the
    Go side to check against its schema; no PyTorch needed."""
    r = new_result(device="made up")
    c = PRESETS[args.model]
    r["ceilings"]["gemm"] = kernel_entry("ceiling/gemm/square/bf16/64", "torch-matmul", "compute", 2.0 * 64 ** 3, 3 * 64 * 64 * 2, [1e-5, 2e-5, 1.5e-5], 10, 1)
    r["kernels"] = [kernel_entry(attention_name("fwd", 1, 64, 4, 2, 16), "torch-sdpa", "compute", attention_flops(1, 64, 4, 16),
                                 attention_bytes("fwd", 64, 4, 2, 16), [1e-5, 1.1e-5, 0.9e-5], 100, 3),
                    kernel_entry(attention_name("bwd", 1, 64, 4, 2, 16), "torch-sdpa", "compute", 1.0, 2, error="RuntimeError: x")]
    r["steps"] = [step_entry(args.model, 64, 4, False, c, [0.1, 0.12, 0.11], peak_bytes=1 << 20, reserved_bytes=2 << 20,
                             device_used_bytes=3 << 20, peak_what="made up"),
                  step_entry(args.model, 64, 4, True, c, error="out of memory")]
    r["generation"] = [generation_entry("prefill", args.model, 1, 16, 4, [0.01, 0.02, 0.015]),
                       generation_entry("decode", args.model, 1, 16, 4, error="out of memory")]
    write(r, args.json)


def ints(s):
    return [int(x) for x in s.split(",") if x]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", default="", help="write the result here (default: stdout)")
    p.add_argument("--suite", default="all", choices=["attention", "step", "all"])
    p.add_argument("--model", default="llama-3.1-8b", choices=sorted(PRESETS))
    p.add_argument("--seqs", type=ints, default=[2048, 8192], help="step lengths")
    p.add_argument("--attn-seqs", type=ints, default=[2048, 8192], help="attention lengths (8B heads)")
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--steps", type=int, default=3, help="timed steps per configuration after one warm-up")
    p.add_argument("--gen-batch", type=ints, default=[1, 16])
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--gen-reps", type=int, default=3)
    p.add_argument("--reps", type=int, default=7, help="kernel repetitions (medians)")
    p.add_argument("--min-time", type=float, default=0.02, help="seconds one kernel repetition lasts at least")
    p.add_argument("--gemm-size", type=int, default=8192)
    p.add_argument("--copy-mib", type=int, default=1024)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--describe", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--selftest", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.describe:
        return describe(args)
    if args.selftest:
        return selftest(args)

    try:
        import torch
    except ImportError as e:
        why = f"PyTorch is not importable ({e})"
        print(f"torch_peers: skipped: {why}", file=sys.stderr)
        write(new_result(skipped=why), args.json)
        return
    if not torch.cuda.is_available():
        why = f"PyTorch {torch.__version__} sees no CUDA device"
        print(f"torch_peers: skipped: {why}", file=sys.stderr)
        write(new_result(skipped=why), args.json)
        return

    start = time.time()
    props = torch.cuda.get_device_properties(0)
    cache = getattr(props, "L2_cache_size", 0) or (50 << 20)
    r = new_result(device=torch.cuda.get_device_name(0))
    m = r["meta"]
    m.update({"toolkit": torch.version.cuda or "", "l2_bytes": cache, "memory_bytes": props.total_memory,
              "timer": "cuda events (kernels); host clock around synchronisations (steps, generation)",
              "dtype": "bf16", "reps": args.reps})
    drv = driver_version()
    if drv:
        m["driver"] = drv
    m["versions"]["torch"] = torch.__version__
    for mod in ("transformers", "peft"):
        try:
            m["versions"][mod] = __import__(mod).__version__
        except ImportError:
            pass
    ceilings(torch, args, cache, r)
    if args.suite in ("attention", "all"):
        attention(torch, args, cache, r)
    if args.suite in ("step", "all"):
        missing = [mod for mod in ("transformers", "peft") if mod not in m["versions"]]
        if missing:
            m.setdefault("notes", []).append(f"no step or generation peer: {', '.join(missing)} not importable")
            print(f"torch_peers: step skipped: {', '.join(missing)} not importable", file=sys.stderr)
        else:
            t0 = time.time()
            model, c = build_model(torch, args)
            torch.cuda.synchronize()
            theta, kind = rope_of(model.config)
            m.setdefault("notes", []).append(f"Hugging Face {args.model} with random bf16 weights (RoPE θ {theta}, {kind} scaling, "
                                             f"attention {model.config._attn_implementation}) built in {time.time() - t0:.1f} s")
            generation(torch, model, c, args, r)
            steps(torch, model, c, args, r)
            del model
            free(torch)
    m.setdefault("notes", []).append(f"measured in {time.time() - start:.0f} s")
    write(r, args.json)


def driver_version():
    try:
        with open("/proc/driver/nvidia/version") as f:
            return parse_driver_version(f.read())
    except OSError:
        return ""


def parse_driver_version(text):
    """The first version number after "Module" in /proc/driver/nvidia/version's
    text ("... Kernel Module  580.65.06 ..." or "... Open Kernel Module for
    x86_64  580.159.04 ..."), or ""."""
    words = text.split()
    if "Module" not in words:
        return ""
    for w in words[words.index("Module") + 1:]:
        parts = w.split(".")
        if len(parts) >= 2 and all(p.isdigit() for p in parts):
            return w
    return ""


if __name__ == "__main__":
    main()
