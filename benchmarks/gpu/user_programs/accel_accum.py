"""Fine-tuning a small GPT-2 with Hugging Face Accelerate and gradient accumulation, as its docs show:
``with accelerator.accumulate(model):`` around every micro-batch, 4 micro-batches per optimizer step, bf16 mixed
precision. Nothing here was written for nsighttc.
    python accel_accum.py [--steps 60] [--accum 4]
"""
import argparse
import time

import torch
from accelerate import Accelerator
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=60)
ap.add_argument("--accum", type=int, default=4)
a = ap.parse_args()
acc = Accelerator(gradient_accumulation_steps=a.accum, mixed_precision="bf16")
model = GPT2LMHeadModel(GPT2Config(n_layer=6, n_embd=768, n_head=12))
data = torch.randint(0, 50257, (a.steps * a.accum, 8, 256))
loader = torch.utils.data.DataLoader(data, batch_size=None, shuffle=False)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
model, opt, loader = acc.prepare(model, opt, loader)
model.train()
times = []
t = time.perf_counter()
for i, ids in enumerate(loader):
    with acc.accumulate(model):
        loss = model(input_ids=ids, labels=ids).loss
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
    if acc.sync_gradients:
        torch.cuda.synchronize()
        now = time.perf_counter()
        times.append(now - t)
        t = now
steady = sorted(times[5:])[len(times[5:]) // 2]
print(f"{1000 * steady:.1f} ms per optimizer step ({a.accum} micro-batches), {len(times)} optimizer steps")
