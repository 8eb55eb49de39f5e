"""Scoring texts with a BERT classifier as an evaluation script often does: a DataLoader over token lists of varied
lengths, each batch padded to its longest (pad_sequence in the collate), fp16, inference_mode. Nothing here was
written for nsighttc. --bucket pads each batch to a multiple of 128 instead (the fix a reviewer would try).
    python loader_varlen_eval.py [--bucket] [--batches 120]
"""
import argparse
import random
import time

import torch
from torch.nn.utils.rnn import pad_sequence
from transformers import BertConfig, BertForSequenceClassification

ap = argparse.ArgumentParser()
ap.add_argument("--bucket", action="store_true")
ap.add_argument("--batches", type=int, default=120)
ap.add_argument("--batch", type=int, default=16)
a = ap.parse_args()
random.seed(0)
texts = [torch.randint(1000, 30000, (random.randint(12, 250),)) for _ in range(a.batches * a.batch)]


def collate(items):
    ids = pad_sequence(items, batch_first=True, padding_value=0)
    if a.bucket:
        n = -(-ids.shape[1] // 128) * 128
        ids = torch.nn.functional.pad(ids, (0, n - ids.shape[1]))
    return ids, (ids != 0).long()


loader = torch.utils.data.DataLoader(texts, batch_size=a.batch, collate_fn=collate)
model = BertForSequenceClassification(BertConfig(num_labels=3)).cuda().half().eval()
torch.cuda.synchronize()
t0, n = time.perf_counter(), 0
with torch.inference_mode():
    for ids, mask in loader:
        logits = model(input_ids=ids.cuda(non_blocking=True), attention_mask=mask.cuda(non_blocking=True)).logits
        n += int(logits.argmax(-1).numel())
torch.cuda.synchronize()
print(f"{n / (time.perf_counter() - t0):.1f} texts/s ({'buckets of 128' if a.bucket else 'padded to each batch'})")
