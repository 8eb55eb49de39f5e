"""Classifying texts with a Hugging Face ``pipeline`` as its docs show: ``pipeline("text-classification", ...,
batch_size=16)`` over a list of texts of 12-250 words, each batch padded to its longest, a BERT-base model in fp16.
The model and tokenizer are built locally (random weights, a made-up vocabulary: the machine has no Hub access).
Nothing here was written for nsighttc. --pad-to N pads every text to N tokens instead (the fix a reviewer would try).
    python pipe_varlen.py [--texts 1600] [--pad-to 256]
"""
import argparse
import random
import tempfile
import time
from pathlib import Path

import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast, pipeline

ap = argparse.ArgumentParser()
ap.add_argument("--texts", type=int, default=1600)
ap.add_argument("--pad-to", type=int, default=0)
a = ap.parse_args()
random.seed(0)
words = [f"w{i}" for i in range(3000)]
vocab = Path(tempfile.mkdtemp()) / "vocab.txt"
vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
tok = BertTokenizerFast(vocab_file=str(vocab))
model = BertForSequenceClassification(BertConfig(vocab_size=len(words) + 5, num_labels=3)).half()
clf = pipeline("text-classification", model=model, tokenizer=tok, device=0, batch_size=16)
texts = [" ".join(random.choices(words, k=random.randint(12, 250))) for _ in range(a.texts)]
kw = {"padding": "max_length", "max_length": a.pad_to, "truncation": True} if a.pad_to else {}
clf(texts[:32], **kw)  # (a first call, as a service warms up)
torch.cuda.synchronize()
t0 = time.perf_counter()
out = clf(texts, **kw)
torch.cuda.synchronize()
how = f"padded to {a.pad_to}" if a.pad_to else "padded to each batch"
print(f"{len(out) / (time.perf_counter() - t0):.1f} texts/s ({how})")
