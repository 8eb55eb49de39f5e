#!/usr/bin/env python3
"""A Lightning ``LightningModule`` trained by ``lightning.Trainer`` at its defaults, marking nothing.

Lightning's automatic optimisation runs ``training_step`` and ``backward`` inside the optimizer's ``step`` (as a
closure), a loop nsighttc's hooks must still cut into steps. The model is a small CNN classifier on random
32x32 images from a DataLoader (``num_workers=0``, Lightning warns about it); fp32 unless ``--precision``.

    python wrappers/lightning_module.py                       # fp32, 100 steps
    python wrappers/lightning_module.py --precision bf16-mixed
    python wrappers/lightning_module.py --device cpu          # smoke mode (CI): a few steps
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SteadyClock  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: smoke mode (a few steps)")
    ap.add_argument("--steps", type=int, default=100, help="Trainer(max_steps=...)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--width", type=int, default=128, help="channels of the CNN")
    ap.add_argument("--precision", default="32-true", help="Trainer(precision=...): 32-true, bf16-mixed, 16-mixed")
    a = ap.parse_args(argv)

    import torch
    from torch import nn
    try:
        import lightning as L
    except ImportError:  # the older package name
        import pytorch_lightning as L

    cpu = a.device == "cpu"
    if not cpu and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda but no CUDA device is available (use --device cpu for a smoke run)")
    if cpu:
        a.steps, a.batch, a.width = min(a.steps, 6), 8, 8

    class Classifier(L.LightningModule):
        def __init__(self, width: int):
            super().__init__()
            w = width
            self.net = nn.Sequential(nn.Conv2d(3, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(),
                                     nn.Conv2d(w, 2 * w, 3, padding=1, stride=2), nn.BatchNorm2d(2 * w), nn.ReLU(),
                                     nn.Conv2d(2 * w, 4 * w, 3, padding=1, stride=2), nn.BatchNorm2d(4 * w), nn.ReLU(),
                                     nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * w, 10))

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, _):
            x, y = batch
            return nn.functional.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    torch.manual_seed(0)
    n = a.steps * a.batch
    data = torch.utils.data.TensorDataset(torch.randn(n, 3, 32, 32), torch.randint(0, 10, (n,)))
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch, shuffle=True)
    clock = SteadyClock(a.steps, torch.device(a.device))

    class StepTimes(L.Callback):
        def on_train_batch_end(self, *args, **kwargs):
            clock.step()

    trainer = L.Trainer(max_steps=a.steps, accelerator="cpu" if cpu else "gpu", devices=1, precision=a.precision,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[StepTimes()])
    trainer.fit(Classifier(a.width), loader)
    rate = clock.per_second(a.batch)
    print(f"lightning_module {a.precision} batch={a.batch} width={a.width} steps={trainer.global_step}: "
          f"{rate:.0f} images/s steady", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
