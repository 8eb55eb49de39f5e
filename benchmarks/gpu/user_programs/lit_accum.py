"""A small language model trained with Lightning's gradient accumulation, as its docs show:
``Trainer(accumulate_grad_batches=4, precision="bf16-mixed")``, a LightningModule with AdamW, a DataLoader of token
batches. Nothing here was written for nsighttc; the callback only times the loop (a sync at its two ends).
    python lit_accum.py [--steps 40] [--accum 4]
"""
import argparse
import time

import lightning as L
import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=40, help="optimizer steps")
ap.add_argument("--accum", type=int, default=4)
a = ap.parse_args()
VOCAB, SEQ, BATCH, SKIP = 8000, 256, 16, 8


class LM(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 512)
        layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, norm_first=True)
        self.body = nn.TransformerEncoder(layer, 6)
        self.head = nn.Linear(512, VOCAB)

    def training_step(self, batch, i):
        mask = nn.Transformer.generate_square_subsequent_mask(SEQ, device=self.device)
        h = self.body(self.emb(batch[:, :-1]), mask=mask[:-1, :-1], is_causal=True)
        loss = nn.functional.cross_entropy(self.head(h).flatten(0, 1), batch[:, 1:].flatten())
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-4)


class Clock(L.Callback):
    """ms per optimizer step after SKIP of them: one sync where the timing starts, one where it ends."""
    def on_train_batch_start(self, trainer, module, batch, i):
        if i == SKIP * a.accum:
            torch.cuda.synchronize()
            self.t0 = time.perf_counter()

    def on_train_end(self, trainer, module):
        torch.cuda.synchronize()
        n = trainer.global_step - SKIP
        print(f"{1000 * (time.perf_counter() - self.t0) / n:.1f} ms per optimizer step ({a.accum} micro-batches), "
              f"{trainer.global_step} optimizer steps")


data = torch.randint(0, VOCAB, (a.steps * a.accum * BATCH, SEQ + 1))
loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True)
trainer = L.Trainer(max_steps=a.steps, accumulate_grad_batches=a.accum, precision="bf16-mixed", logger=False,
                    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                    callbacks=[Clock()])
trainer.fit(LM(), loader)
