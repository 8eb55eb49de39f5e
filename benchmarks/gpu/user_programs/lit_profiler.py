"""Lightning's own profiler, as its docs show: ``Trainer(profiler="pytorch")`` (a torch.profiler with a schedule, its
``prof.step()`` at each training batch, its summary table and a Chrome trace at the end). Nothing here was written for
nsighttc. Under nsighttc's launcher the profiler is held off (``nsighttc/runtime/guest_profiler.py``); before it
started, Lightning stops whatever profiler is on ("close profiler if it is already opened"), which was nsighttc's.
Runs on the CPU too (``accelerator="auto"``): the fixture ``tests/fixtures/steps/lightning_profiler_cpu_torch.json.xz``
is its launcher trace on the CPU machine (``python -m nsighttc.runtime.launch --torch-trace t.json -- lit_profiler.py``).
"""
import torch, lightning as L
from torch.utils.data import DataLoader, TensorDataset

class M(L.LightningModule):
    def __init__(self):
        super().__init__(); self.net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
    def training_step(self, b, i):
        x, y = b; return torch.nn.functional.cross_entropy(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

ds = TensorDataset(torch.randn(2048, 64), torch.randint(0, 4, (2048,)))
trainer = L.Trainer(max_epochs=1, profiler="pytorch", accelerator="auto", devices=1, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False, limit_train_batches=60)
trainer.fit(M(), DataLoader(ds, batch_size=32))
print("lit_prof done")
