"""``nsighttc fix``'s source edits (nsighttc/fix/edits.py) on the call styles programs use: keyword and positional
arguments, a loader built in a helper module, Lightning's ``LightningDataModule``, transformers' ``TrainingArguments``,
the program's own ``--option``, flags set in a branch; the user's formatting kept (only the edited lines differ), and
where no safe edit exists the reason. The repository's own wrappers (``wrappers/``) are read as they are."""
from __future__ import annotations

import ast
import difflib
from pathlib import Path

import pytest

pytest.importorskip("libcst")

from nsighttc import fix  # noqa: E402
from nsighttc.fix import edits  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def changed_lines(old: str, new: str) -> list[str]:
    return [l for l in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
            if l[:1] in "+-" and not l.startswith(("+++", "---"))]


def test_keyword_positional_and_missing_num_workers():
    src = ("from torch.utils.data import DataLoader\n"
           "a = DataLoader(ds, batch_size=8, num_workers=0)  # keep me\n"
           "b = DataLoader(ds, 4, False, None, None, 0)\n"
           "c = DataLoader(ds, batch_size=2)\n"
           "d = DataLoader(ds, num_workers=4)\n")
    e = edits.apply("workers=N", src, "train.py", workers=8)
    assert ast.parse(e.source)
    assert "a = DataLoader(ds, batch_size=8, num_workers=8)  # keep me" in e.source
    assert "b = DataLoader(ds, 4, False, None, None, 8)" in e.source
    assert "c = DataLoader(ds, batch_size=2, num_workers=8)" in e.source
    assert "d = DataLoader(ds, num_workers=4)" in e.source  # a loader with workers is the program's choice
    assert len(changed_lines(src, e.source)) == 6  # three lines out, three in: nothing else touched
    assert [d.split(":")[1] for d in e.done] == ["2", "3", "4"]


def test_a_call_over_several_lines_keeps_its_layout_and_comments():
    src = ("loader = torch.utils.data.DataLoader(\n"
           "    ds,\n"
           "    batch_size=32,  # per device\n"
           "    shuffle=True,  # mix\n"
           ")\n")
    e = edits.apply("pin-memory", src, "t.py")
    assert e.source == ("loader = torch.utils.data.DataLoader(\n"
                        "    ds,\n"
                        "    batch_size=32,  # per device\n"
                        "    shuffle=True,  # mix\n"
                        "    pin_memory=True,\n"
                        ")\n")


def test_kwargs_and_expressions_are_left_with_the_reason():
    src = "dl = DataLoader(ds, **cfg)\nel = DataLoader(ds, num_workers=cfg.n if x else 0)\n"
    e = edits.apply("workers=N", src, "t.py", workers=8)
    assert not e.changed and e.source == src
    assert "**kwargs" in e.skipped[0] and "`cfg.n if x else 0` already" in e.skipped[1]


def test_a_value_from_the_programs_own_option_moves_its_default():
    """grad_accum.py passes ``num_workers=a.workers``: the option's default changes, so ``--workers`` still works."""
    src = (ROOT / "wrappers" / "grad_accum.py").read_text()
    e = edits.apply("workers=N", src, "grad_accum.py", workers=8)
    assert changed_lines(src, e.source) == ['-    ap.add_argument("--workers", type=int, default=0)',
                                            '+    ap.add_argument("--workers", type=int, default=8)']
    assert "num_workers at grad_accum.py:" in e.done[0]


def test_trainer_arguments_get_the_loader_settings():
    src = ("args = TrainingArguments(output_dir='o', per_device_train_batch_size=8,\n"
           "                         dataloader_num_workers=0)\n"
           "b = TrainingArguments('o')\n")
    e = edits.apply("workers=N", src, "t.py", workers=4)
    assert "dataloader_num_workers=4)" in e.source and "b = TrainingArguments('o', dataloader_num_workers=4)" in e.source
    p = edits.apply("persistent-workers", e.source, "t.py")
    assert p.source.count("dataloader_persistent_workers=True") == 2


def test_lightning_datamodule_loaders_keep_their_workers():
    src = ("class Data(L.LightningDataModule):\n"
           "    def train_dataloader(self):\n"
           "        return DataLoader(self.train, batch_size=64, shuffle=True, num_workers=4)\n"
           "    def val_dataloader(self):\n"
           "        return DataLoader(self.val, batch_size=64)\n")
    e = edits.apply("persistent-workers", src, "dm.py")
    assert "num_workers=4, persistent_workers=True)" in e.source
    assert "DataLoader(self.val, batch_size=64)\n" in e.source  # no workers: nothing to keep
    assert "needs num_workers > 0" in e.skipped[0]


def test_flags_the_program_sets_back_are_flipped_where_they_are_else_set_after_import_torch():
    src = (ROOT / "wrappers" / "grad_accum.py").read_text()
    e = edits.apply("tf32", src, "grad_accum.py")
    diff = changed_lines(src, e.source)
    assert "-        torch.backends.cudnn.allow_tf32 = False" in diff
    assert "+        torch.backends.cudnn.allow_tf32 = True" in diff
    assert "+    torch.backends.cuda.matmul.allow_tf32 = True" in diff and len(diff) == 3
    src2 = "import os\nimport torch\ntorch.set_float32_matmul_precision('highest')\n"
    e2 = edits.apply("tf32", src2, "t.py")
    assert e2.source == ("import os\nimport torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n"
                         "torch.backends.cudnn.allow_tf32 = True\ntorch.set_float32_matmul_precision('high')\n")
    b = edits.apply("cudnn-benchmark", "import torch\ntorch.backends.cudnn.benchmark = False\n", "t.py")
    assert b.source == "import torch\ntorch.backends.cudnn.benchmark = True\n"


def test_static_cache_where_the_program_names_its_cache_else_at_generate():
    named = "kw = dict(max_new_tokens=8, cache_implementation=a.cache)\nout = model.generate(x, **kw)\n"
    e = edits.apply("static-cache", named, "g.py")
    assert e.source == 'kw = dict(max_new_tokens=8, cache_implementation="static")\nout = model.generate(x, **kw)\n'
    lit = 'opts = {"cache_implementation": "dynamic"}\n'
    assert edits.apply("static-cache", lit, "g.py").source == 'opts = {"cache_implementation": "static"}\n'
    plain = "out = model.generate(x, max_new_tokens=8)\n"
    assert edits.apply("static-cache", plain, "g.py").source == \
        'out = model.generate(x, max_new_tokens=8, cache_implementation="static")\n'


def test_fused_optimizers_and_kinds_without_a_safe_edit():
    src = "opt = torch.optim.AdamW(model.parameters(), lr=1e-3)\nother = torch.optim.SGD(p, foreach=True)\n"
    e = edits.apply("fused-optimizer", src, "t.py")
    assert "AdamW(model.parameters(), lr=1e-3, fused=True)" in e.source and "SGD(p, foreach=True)" in e.source
    none = edits.apply("compile", src, "t.py")
    assert not none.changed and "not one line" in none.skipped[0]


def test_a_loader_built_in_a_helper_module_is_edited_there_and_the_users_files_are_untouched(tmp_path):
    (tmp_path / "data.py").write_text("from torch.utils.data import DataLoader\n\n"
                                      "def make_loader(ds):\n    return DataLoader(ds, batch_size=16)\n")
    (tmp_path / "unused.py").write_text("from torch.utils.data import DataLoader\nx = DataLoader([1])\n")
    (tmp_path / "train.py").write_text("from data import make_loader\nloader = make_loader(list(range(64)))\n")
    (tmp_path / "table.csv").write_text("a,b\n")
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    p = fix.plan(tmp_path / "train.py", "workers=4")
    assert list(p.files) == ["data.py"] and "data.py:4" in p.done[0]  # the program's files, not every file beside it
    assert p.diff().startswith("--- a/data.py\n+++ b/data.py\n")
    copy = fix.materialize(p, tmp_path / "runs" / "patched")
    assert copy.read_text() == before["train.py"] and "num_workers=4" in (copy.parent / "data.py").read_text()
    assert (copy.parent / "table.csv").is_symlink()
    assert {q.name: q.read_text() for q in tmp_path.iterdir() if q.is_file()} == before
    written = fix.apply([p])
    assert written == [str(tmp_path / "data.py")] and "num_workers=4" in (tmp_path / "data.py").read_text()
    assert (tmp_path / "data.py.nsighttc-bak").read_text() == before["data.py"]
    with pytest.raises(Exception, match="changed since the patch was made"):
        fix.apply([p])


LOADER_PROGRAM = """
import time, torch
from data import make_loader
loader = make_loader()
x = torch.ones(8, 8)
for batch in loader:
    x = torch.tanh(x @ x)
print("done")
"""
LOADER_HELPER = """
import time
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 320

    def __getitem__(self, i):
        time.sleep(0.004)  # host work per sample: 4 samples a batch, 16 ms without workers
        return i


def make_loader():
    return DataLoader(Slow(), batch_size=4)
"""


def test_fix_runs_the_patched_copy_beside_the_variant_and_applies_it_only_when_asked(tmp_path, run_cli):
    """`nsighttc fix --variant workers=2`: the edit (in the helper module that builds the loader) runs as a copy in the
    same round as the baseline and the launcher's variant, is kept (faster), try.md shows its diff; the program's
    files change only with --apply, each with a backup."""
    pytest.importorskip("torch")
    import json
    prog = tmp_path / "prog"
    prog.mkdir()
    (prog / "train.py").write_text(LOADER_PROGRAM)
    (prog / "data.py").write_text(LOADER_HELPER)
    code, out, err = run_cli("fix", "--out", tmp_path / "runs", "--budget", "150", "--variant", "workers=2",
                             "--apply", str(prog / "train.py"))
    assert code == 0, err
    run = next((tmp_path / "runs").iterdir())
    doc = json.loads((run / "try.json").read_text())
    rows = {v["name"]: v for v in doc["variants"]}
    assert list(rows) == ["baseline", "workers=2", "patch:workers=2"]
    patch = rows["patch:workers=2"]["patch"]
    assert patch["files"] == ["data.py"] and "num_workers=2" in patch["diff"] and patch["kept"]
    assert rows["patch:workers=2"]["speedup"] > 1.3
    # the launcher's variant of the same change: faster too, or, where a machine busy with other work slowed a stretch
    # of its steps late in the run (CI: the suite's other worker beside it), the tool's honest "never settled"
    launcher = rows["workers=2"]
    assert launcher["status"] == "ok" and ((launcher["speedup"] or 0) > 1.3 or launcher["change"] == "never settled"), \
        {k: launcher.get(k) for k in ("status", "error", "not_applied", "speedup", "change", "note", "rounds")}
    # the default rounds: two at least, and a change this large is clear after them
    assert doc["repeat"] >= 2 and rows["patch:workers=2"]["change"] == "faster" and rows["patch:workers=2"]["clear"]
    assert rows["patch:workers=2"]["spread"]["basis"].startswith("90% interval of the mean of")
    md = (run / "try.md").read_text()
    assert "## Patches" in md and "```diff\n--- a/data.py" in md and "**kept**" in md
    assert "Chosen by `--variant auto`" not in md  # (the variant was named; the patch row's edit is shown above)
    assert (run / "patched" / "workers_2.diff").read_text() == patch["diff"]
    assert "return DataLoader(Slow(), batch_size=4, num_workers=2)" in (prog / "data.py").read_text()
    assert (prog / "data.py.nsighttc-bak").read_text() == LOADER_HELPER
    assert (prog / "train.py").read_text() == LOADER_PROGRAM and "patched" in err


def test_autocast_where_the_program_says_where_its_step_is():
    """bf16 autocast: transformers' TrainingArguments(bf16=True), Lightning's precision (here the default of the
    program's --precision option), and a loop of its own: the loss's statements before `loss.backward()` wrapped, the
    batch's move to the device and the backward left outside; fp16 in such a loop needs a GradScaler: not written."""
    src = (ROOT / "wrappers" / "grad_accum.py").read_text()
    e = edits.apply("bf16-autocast", src, "grad_accum.py")
    assert changed_lines(src, e.source) == [
        "-        loss = loss_fn(model(x), y) / a.accum",
        '+        with torch.autocast("cuda", dtype=torch.bfloat16):',
        "+            loss = loss_fn(model(x), y) / a.accum"]
    assert "GradScaler" in edits.apply("fp16-autocast", src, "grad_accum.py").skipped[0]
    lit = (ROOT / "wrappers" / "lightning_module.py").read_text()
    e = edits.apply("bf16-autocast", lit, "lightning_module.py")
    assert len(changed_lines(lit, e.source)) == 2 and 'default="bf16-mixed"' in e.source
    hf = ("args = TrainingArguments(output_dir='o', bf16=a.bf16)\n"
          "other = TrainingArguments('o')\n")
    assert edits.apply("bf16-autocast", hf, "t.py").source == ("args = TrainingArguments(output_dir='o', bf16=True)\n"
                                                               "other = TrainingArguments('o', bf16=True)\n")
    already = (ROOT / "wrappers" / "mnist_mlp.py").read_text()  # its loss is computed inside an autocast of its own
    none = edits.apply("bf16-autocast", already, "mnist_mlp.py")
    assert not none.changed and "not in one place" in none.skipped[0]


def test_channels_last_where_each_program_builds_its_model():
    """channels-last: the model's first build in the scope that trains or evaluates it (a `.to(...)` gets the keyword,
    else a statement after it, a model built inside `.fit(...)` converted there); a builder function's empty
    `nn.Sequential()` is not the build; a model whose layout the program sets from its own option is left, with the
    line. Read on the repository's wrappers as they are."""
    vgg = (ROOT / "wrappers" / "vgg16.py").read_text()
    e = edits.apply("channels-last", vgg, "vgg16.py")
    assert changed_lines(vgg, e.source) == ["+        model = model.to(memory_format=torch.channels_last)"]
    assert e.done[0].startswith("vgg16.py:70: model = model.to(memory_format=torch.channels_last) after it is built")
    accum = (ROOT / "wrappers" / "grad_accum.py").read_text()
    e = edits.apply("channels-last", accum, "grad_accum.py")
    assert changed_lines(accum, e.source) == ["-    model = convnet(torch).to(dev)",
                                              "+    model = convnet(torch).to(dev, memory_format=torch.channels_last)"]
    lit = (ROOT / "wrappers" / "lightning_module.py").read_text()
    e = edits.apply("channels-last", lit, "lightning_module.py")
    assert "trainer.fit(Classifier(a.width).to(memory_format=torch.channels_last), loader)" in e.source
    amp = (ROOT / "wrappers" / "resnet_amp.py").read_text()
    e = edits.apply("channels-last", amp, "resnet_amp.py")
    built = next(i for i, line in enumerate(amp.splitlines(), 1) if "model =" in line and "memory_format=fmt" in line)
    assert not e.changed and f"program's own (line {built}: memory_format=`fmt`)" in e.skipped[0]
    helper = ("import torch\n\n"
              "def train(net, data):\n"
              "    opt = torch.optim.SGD(net.parameters(), lr=0.1)\n\n"
              "def main():\n"
              "    net = Net()  # built here, trained in the helper\n"
              "    net = net.cuda()\n"
              "    train(net, data)\n")
    e = edits.apply("channels-last", helper, "t.py")
    assert changed_lines(helper, e.source) == ["+    net = net.to(memory_format=torch.channels_last)"]
    assert e.source.index("net = net.to(memory_format") < e.source.index("net = net.cuda()")
    assert ast.parse(e.source)


def test_pad_buckets_at_a_tokenizers_padding_and_at_padding_written_by_hand():
    """pad-buckets: `pad_to_multiple_of=64` where a tokenizer or collator pads to the longest; padding by hand
    (`max(len(x) for x in batch)` sizing the batch's tensors) rounded up on the next line; a `max(len(...))` that sizes
    no tensor, padding to a fixed length and a call with **kwargs are left."""
    src = ("import torch\n"
           "from transformers import DataCollatorWithPadding\n\n"
           "def collate(batch):\n"
           "    L = max(len(b['input_ids']) for b in batch)\n"
           "    ids = torch.zeros(len(batch), L, dtype=torch.long)\n"
           "    return ids\n\n"
           "def report(rows):\n"
           "    width = max(len(r) for r in rows)\n"
           "    print('-' * width)\n\n"
           "enc = tokenizer(texts, padding=True, return_tensors='pt')\n"
           "enc2 = tokenizer(texts,\n"
           "                 padding='longest',\n"
           "                 return_tensors='pt',\n"
           "                 )\n"
           "fixed = tokenizer(texts, padding='max_length', max_length=128)\n"
           "kw = tokenizer(texts, **opts)\n"
           "c = DataCollatorWithPadding(tokenizer)\n"
           "p = tokenizer.pad(features)\n")
    e = edits.apply("pad-buckets", src, "t.py")
    assert changed_lines(src, e.source) == [
        "+    L = -(-L // 64) * 64  # padded to a multiple of 64: a few input shapes, not one per batch",
        "-enc = tokenizer(texts, padding=True, return_tensors='pt')",
        "+enc = tokenizer(texts, padding=True, return_tensors='pt', pad_to_multiple_of=64)",
        "+                 pad_to_multiple_of=64,",
        "-c = DataCollatorWithPadding(tokenizer)",
        "-p = tokenizer.pad(features)",
        "+c = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=64)",
        "+p = tokenizer.pad(features, pad_to_multiple_of=64)"]
    assert any("t.py:10: `width = max(len(r) for r in rows)` sizes no tensor" in s for s in e.skipped)
    loop = (ROOT / "wrappers" / "varlen_infer.py").read_text()
    e = edits.apply("pad-buckets", loop, "varlen_infer.py")
    assert changed_lines(loop, e.source) == [
        "+            n = -(-n // 64) * 64  # padded to a multiple of 64: a few input shapes, not one per batch"]
    ns = {}
    exec("n = 65\nn = -(-n // 64) * 64\nm = 64\nm = -(-m // 64) * 64", ns)
    assert (ns["n"], ns["m"]) == (128, 64)


def test_the_patched_variable_length_loop_runs_with_fewer_shapes_and_the_step_timer_numbers_them(tmp_path):
    """The pad-buckets patch of wrappers/varlen_infer.py (padding written by hand) runs as a copy on CPU under the
    launcher's step timer (what `try` and `fix` run): each step's input shapes are numbered in the order first seen,
    and they follow the batches' lengths as the program draws them (random.Random(0)), each rounded up to a multiple
    of 64; the user's file is untouched."""
    pytest.importorskip("transformers")
    import json
    import random
    import subprocess
    import sys
    original = (ROOT / "wrappers" / "varlen_infer.py").read_text()
    p = fix.plan(ROOT / "wrappers" / "varlen_infer.py", "pad-buckets")
    assert p.files == {"varlen_infer.py": (original, p.files["varlen_infer.py"][1])}
    script = fix.materialize(p, tmp_path / "patched")
    out = tmp_path / "steps.json"
    r = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--step-times", str(out), "--", str(script),
                        "--device", "cpu", "--batches", "10", "--layers", "1", "--batch", "2"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    ph = json.loads(out.read_text())["phases"]["nsighttc.step"]
    rnd = random.Random(0)
    padded = [-(-max(rnd.randint(16, 256) for _ in range(2)) // 64) * 64 for _ in range(10)]
    ids: dict[int, int] = {}
    want = [ids.setdefault(n, len(ids)) for n in padded[1:1 + len(ph["host_ns"])]]  # (the first call finds the model)
    assert len(ph["host_ns"]) >= 7 and ph["shapes"] == want and len(set(want)) <= 4
    assert (ROOT / "wrappers" / "varlen_infer.py").read_text() == original
