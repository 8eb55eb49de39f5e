"""Answering prompts of many lengths with a Llama-shaped model's ``generate()``, as a batch-inference script does: the
prompts taken 8 at a time as they come, each batch left-padded to its longest prompt with an attention mask, greedy,
32 new tokens, bf16, the dynamic cache. Nothing here was written for nsighttc. --bucket pads each batch to a multiple
of 128 tokens instead (the fix a reviewer would try); --cache static gives ``generate()`` a static key/value cache.
    python gen_varlen.py [--bucket] [--batches 40] [--cache dynamic|static]
"""
import argparse
import random
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("--batches", type=int, default=40)
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--new", type=int, default=32)
ap.add_argument("--bucket", action="store_true")
ap.add_argument("--cache", default="dynamic", choices=["dynamic", "static"])
a = ap.parse_args()
cfg = LlamaConfig(hidden_size=1536, intermediate_size=4096, num_hidden_layers=12, num_attention_heads=12,
                  num_key_value_heads=3, vocab_size=32000, max_position_embeddings=2048)
torch.manual_seed(0)
model = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
random.seed(0)
lengths = [random.randint(16, 600) for _ in range(a.batches * a.batch)]
torch.cuda.synchronize()
t0 = time.perf_counter()
tokens = 0
with torch.inference_mode():
    for b in range(a.batches):
        sizes = lengths[b * a.batch:(b + 1) * a.batch]
        width = max(sizes)
        if a.bucket:
            width = -(-width // 128) * 128
        ids = torch.zeros(a.batch, width, dtype=torch.long)
        mask = torch.zeros(a.batch, width, dtype=torch.long)
        for i, n in enumerate(sizes):  # left padding, as decoder-only generation wants
            ids[i, width - n:] = torch.randint(1, 32000, (n,))
            mask[i, width - n:] = 1
        out = model.generate(input_ids=ids.cuda(), attention_mask=mask.cuda(), max_new_tokens=a.new,
                             min_new_tokens=a.new, do_sample=False, pad_token_id=0,
                             **({"cache_implementation": "static"} if a.cache == "static" else {}))
        tokens += a.batch * a.new
torch.cuda.synchronize()
dt = time.perf_counter() - t0
print(f"{tokens / dt:.1f} new tokens/s, {a.batches / dt:.2f} batches/s ({'bucketed' if a.bucket else 'padded to each batch'}, {a.cache} cache)")
