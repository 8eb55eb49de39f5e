#!/usr/bin/env python3
"""A Hugging Face ``transformers.Trainer`` fine-tune left at its defaults, marking nothing.

What a new user profiles first: ``Trainer(model, args, train_dataset).train()``, fp32 (no TF32, no AMP), the
DataLoader at ``num_workers=0``, no step ranges of its own. The model is BERT-base for sequence classification
built from its config (no download: the GPU machine reaches no hub), the data random token ids made per sample
on the host, as a tokenised dataset's ``__getitem__`` would hand them over. Prints the Trainer's own
``train_samples_per_second`` and this script's steady rate (the second half of the steps, timed by a callback
that waits for the GPU only at the half-way step and the last).

    python wrappers/trainer_finetune.py                       # fp32, as the Trainer defaults are
    python wrappers/trainer_finetune.py --tf32                # TrainingArguments(tf32=True)
    python wrappers/trainer_finetune.py --precision bf16      # TrainingArguments(bf16=True)
    python wrappers/trainer_finetune.py --python-items        # each sample built in a Python list comprehension
    python wrappers/trainer_finetune.py --device cpu          # smoke mode: a tiny BERT, a few steps (CI)

The fixes nsighttc should rank for it (H100): TF32 (fp32 GEMMs on CUDA cores), DataLoader workers (host time in
``__getitem__`` and collation), bf16.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SteadyClock  # noqa: E402


TINY_POSITIONS = 64  # the tiny BERT's positions (--tiny, --device cpu)


def _dataset(n: int, seq: int, vocab: int, python_items: bool = False):
    import torch

    class RandomTokens(torch.utils.data.Dataset):
        """Per-sample host work like a tokenised dataset's: ids drawn from a generator seeded by the index."""

        def __len__(self):
            return n

        def __getitem__(self, i):
            if python_items:  # a hand-written tokenizer's host work: each id made in Python, 24 candidates per token
                ids = [((i * 31 + k) * 2654435761) % (vocab - 1) + 1 for k in range(seq * 24)][::24]
                return {"input_ids": torch.tensor(ids), "attention_mask": torch.ones(seq, dtype=torch.long),
                        "labels": i % 2}
            g = torch.Generator().manual_seed(i)
            length = seq - int(torch.randint(0, seq // 4, (1,), generator=g))
            ids = torch.randint(1, vocab, (seq,), generator=g)
            mask = torch.zeros(seq, dtype=torch.long)
            mask[:length] = 1
            return {"input_ids": ids * mask, "attention_mask": mask, "labels": int(ids[0] % 2)}

    return RandomTokens()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: smoke mode (tiny BERT, 6 steps)")
    ap.add_argument("--steps", type=int, default=60, help="optimizer steps (TrainingArguments.max_steps)")
    ap.add_argument("--batch", type=int, default=32, help="per_device_train_batch_size")
    ap.add_argument("--seq", type=int, default=128, help="tokens per sample")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="the Trainer's default, or bf16=True")
    ap.add_argument("--tf32", action="store_true", help="TrainingArguments(tf32=True)")
    ap.add_argument("--workers", type=int, default=0, help="dataloader_num_workers (the Trainer's default: 0)")
    ap.add_argument("--grad-accum", type=int, default=1, help="gradient_accumulation_steps")
    ap.add_argument("--tiny", action="store_true",
                    help="the smoke mode's tiny BERT (2 layers, hidden 64) on any device: a small recording")
    ap.add_argument("--python-items", action="store_true",
                    help="build each sample's ids in a Python list comprehension (a hand-written tokenizer's host "
                         "work: about 10-20 ms per batch of 32, in the main process)")
    a = ap.parse_args(argv)

    import torch
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments

    cpu = a.device == "cpu"
    if not cpu and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda but no CUDA device is available (use --device cpu for a smoke run)")
    if cpu:
        a.steps, a.batch, a.seq = min(a.steps, 6), min(a.batch, 4), min(a.seq, 32)
    if cpu or a.tiny:
        if a.seq > TINY_POSITIONS:  # (BERT's position table ends there: a longer sample fails deep in transformers)
            raise SystemExit(f"error: --tiny holds at most {TINY_POSITIONS} tokens a sample (--seq {a.seq}); "
                             f"give --seq {TINY_POSITIONS // 2}, say")
        config = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=128, max_position_embeddings=TINY_POSITIONS, num_labels=2)
    else:
        config = BertConfig(num_labels=2)  # BERT-base: 12 layers, hidden 768, 110 M parameters
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    data = _dataset(a.steps * a.batch * a.grad_accum, a.seq, config.vocab_size, a.python_items)

    clock = SteadyClock(a.steps, torch.device(a.device))

    class StepTimes(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            clock.step()

    with tempfile.TemporaryDirectory() as out:
        extra = {"tf32": True} if a.tf32 else {}
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=a.batch, max_steps=a.steps,
                                 gradient_accumulation_steps=a.grad_accum, learning_rate=2e-5,
                                 bf16=a.precision == "bf16", dataloader_num_workers=a.workers,
                                 logging_steps=max(a.steps // 4, 1), save_strategy="no", report_to="none",
                                 disable_tqdm=True, use_cpu=cpu, seed=0, **extra)
        trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[StepTimes()])
        result = trainer.train()
    steady = clock.per_second(a.batch * a.grad_accum)
    print(f"trainer_finetune {'tiny-bert' if cpu or a.tiny else 'bert-base'}{' cpu' if cpu else ''} {a.precision}{' tf32' if a.tf32 else ''} "
          f"batch={a.batch} seq={a.seq} steps={a.steps}: {result.metrics['train_samples_per_second']:.1f} samples/s "
          f"(Trainer), {steady:.1f} samples/s steady, loss {result.training_loss:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
