#!/usr/bin/env python3
"""An LLM generation loop: a Llama-shaped decoder built from a config (random weights, nothing downloaded) in bf16,
``model.generate()`` called once per request, no optimizer and no DataLoader: inference as people run it.

Each request is one prefill (the call of the model with the prompt) and one decode call per further token. The
program times itself as a serving benchmark would, with a streamer (``transformers`` hands it every new token once
the token is on the host): time to first token (TTFT), time per output token after it (TPOT), tokens/s. It prints
one JSON line ``{"wrapper": "llm_generate", ...}`` that benchmarks read.

    python wrappers/llm_generate.py                   # dynamic KV cache, eager
    python wrappers/llm_generate.py --cache static    # static KV cache: transformers compiles the decoding step
                                                      # with CUDA graphs itself (torch.compile reduce-overhead)
    python wrappers/llm_generate.py --device cpu      # smoke mode: a tiny model, 2 requests
    python wrappers/llm_generate.py --name-cache      # the cache named in the generate() call itself
                                                      # (cache_implementation="dynamic"), as many programs do
    python wrappers/llm_generate.py --nvtx-forward forward   # an NVTX range around every module's forward:
                                                      # same-name ranges nested ~50 deep per model call

(``torch.compile(model.forward, mode="reduce-overhead")`` over the default dynamic cache fails: the cache holds
outputs of graph replays that the next replay overwrites; transformers 5.17 on the H100, reports/inference.)
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pick_device, sync  # noqa: E402


class TokenClock:
    """A ``transformers`` streamer that notes when each new token reached the host. ``generate`` calls ``put`` with
    the prompt first, then with each new token after copying it to the host (so the GPU has finished it)."""

    def __init__(self):
        self.times: list[float] = []
        self.calls = 0

    def put(self, value) -> None:
        self.calls += 1
        if self.calls > 1:  # the first call hands over the prompt
            self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


def user_trace(path: str | None, device):
    """A torch.profiler recording started by the program itself (``--trace``), as users record theirs."""
    if not path:
        return None
    import torch
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else [])
    prof = torch.profiler.profile(activities=acts)
    prof.__enter__()
    return prof


def nvtx_forward(model, name: str) -> None:
    """An NVTX range named ``name`` around every module's forward, as programs annotated per module have (and as an
    earlier nsighttc's hooks marked calls): same-name ranges nested in each other, one level per module depth."""
    import torch

    def push(module, args):
        torch.cuda.nvtx.range_push(name)

    def pop(module, args, out):
        torch.cuda.nvtx.range_pop()

    for m in model.modules():
        m.register_forward_pre_hook(push)
        m.register_forward_hook(pop)


def build(vocab: int, dim: int, layers: int, heads: int, kv_heads: int, device, dtype):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=dim, intermediate_size=dim * 8 // 3 // 64 * 64 or 64,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      max_position_embeddings=4096, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    import torch
    with torch.device(device):  # initialised where it runs: a billion random weights on the host take half a minute
        model = LlamaForCausalLM(cfg)
    return model.to(dtype=dtype).eval()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--requests", type=int, default=12, help="generate() calls (after --warmup more)")
    ap.add_argument("--warmup", type=int, default=2, help="generate() calls before the timed ones")
    ap.add_argument("--batch", type=int, default=1, help="prompts per generate() call")
    ap.add_argument("--prompt", type=int, default=512, help="prompt length in tokens")
    ap.add_argument("--new-tokens", type=int, default=128, help="tokens generated per request (no early stop)")
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--cache", choices=["dynamic", "static"], default="dynamic",
                    help="KV cache: transformers' default DynamicCache, or cache_implementation='static'")
    ap.add_argument("--name-cache", action="store_true",
                    help="pass the cache choice to generate() even for the default (cache_implementation='dynamic')")
    ap.add_argument("--nvtx-forward", metavar="NAME", help="an NVTX range NAME around every module's forward (nested)")
    ap.add_argument("--no-compile", action="store_true",
                    help="with --cache static: generate(disable_compile=True), the static cache without transformers' "
                         "own torch.compile of the decoding step")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: smoke mode (tiny model, fp32)")
    ap.add_argument("--trace", metavar="FILE", help="record the timed requests with torch.profiler into FILE (a trace "
                                                   "made the way users make theirs: no nsighttc involved)")
    a = ap.parse_args(argv)
    import torch
    device = pick_device(a.device)
    if device.type == "cpu":  # smoke: seconds on a CPU
        a.dim, a.layers, a.heads, a.kv_heads, a.vocab = 64, 2, 4, 2, 256
        a.prompt, a.new_tokens, a.requests, a.warmup = min(a.prompt, 16), min(a.new_tokens, 4), min(a.requests, 2), 1
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    model = build(a.vocab, a.dim, a.layers, a.heads, a.kv_heads, device, dtype)
    gen = torch.Generator(device="cpu").manual_seed(1)
    kwargs = dict(max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens, do_sample=False)
    if a.nvtx_forward:
        nvtx_forward(model, a.nvtx_forward)
    if a.cache == "static" or a.name_cache:
        kwargs["cache_implementation"] = a.cache
        if a.no_compile:
            kwargs["disable_compile"] = True
    ttft, tpot, totals = [], [], []
    t_all = None
    prof = None
    with torch.inference_mode():
        for r in range(a.warmup + a.requests):
            if r == a.warmup:
                sync(device)
                t_all = time.perf_counter()
                prof = user_trace(a.trace, device)
            ids = torch.randint(3, a.vocab, (a.batch, a.prompt), generator=gen).to(device)
            clock = TokenClock()
            t0 = time.perf_counter()
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), streamer=clock, **kwargs)
            t1 = time.perf_counter()
            assert out.shape[1] == a.prompt + a.new_tokens, out.shape
            if r >= a.warmup and clock.times:
                ttft.append(clock.times[0] - t0)
                if len(clock.times) > 1:
                    tpot.append((clock.times[-1] - clock.times[0]) / (len(clock.times) - 1))
                totals.append(t1 - t0)
    sync(device)
    wall = time.perf_counter() - t_all
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(a.trace)
    tokens = a.requests * a.batch * a.new_tokens
    res = {"wrapper": "llm_generate", "device": str(device), "cache": a.cache, "cache_named": "cache_implementation" in kwargs,
           "compile": a.cache == "static" and not a.no_compile and device.type == "cuda",
           "requests": a.requests, "warmup_requests": a.warmup, "batch": a.batch, "prompt": a.prompt,
           "new_tokens": a.new_tokens, "model_calls_per_request": a.new_tokens,
           "ttft_ms": round(1e3 * statistics.median(ttft), 3) if ttft else None,
           "tpot_ms": round(1e3 * statistics.median(tpot), 3) if tpot else None,
           "request_ms": round(1e3 * statistics.median(totals), 3) if totals else None,
           "tokens_per_s": round(tokens / wall, 1) if wall > 0 else None, "wall_s": round(wall, 3)}
    print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
