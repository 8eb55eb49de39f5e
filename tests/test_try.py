"""`nsighttc try`: variants applied by the launcher (checked inside the program, on CPU), the auto choice on
recorded verdicts, and the comparison end to end on CPU."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsighttc.runtime import variants
from nsighttc.experiment import read_metric
from nsighttc.experiment.auto import choose

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}

PROBE = """
import json, sys, torch
from torch.utils.data import DataLoader
ds = list(range(8))
loaders = [DataLoader(ds), DataLoader(ds, num_workers=3), DataLoader(ds, batch_size=2, pin_memory=True),
           DataLoader(ds, 4, False, None, None, 0)]
print(json.dumps({
    "tf32": torch.backends.cuda.matmul.allow_tf32, "cudnn_tf32": torch.backends.cudnn.allow_tf32,
    "precision": torch.get_float32_matmul_precision(), "benchmark": torch.backends.cudnn.benchmark,
    "autocast": torch.is_autocast_enabled("cpu"), "autocast_dtype": str(torch.get_autocast_dtype("cpu")),
    "workers": [l.num_workers for l in loaders], "pin": [l.pin_memory for l in loaders],
    "mm_dtype": str((torch.ones(4, 4) @ torch.ones(4, 4)).dtype)}))
"""


def _probe(tmp_path, *names, program: str = PROBE):
    """Run ``program`` under the launcher with the variants ``names``: (what it printed, the applied record, stderr)."""
    pytest.importorskip("torch")
    script = tmp_path / "probe.py"
    script.write_text(program)
    applied = tmp_path / "applied.json"
    argv = [sys.executable, "-m", "nsighttc.runtime.launch", "--applied", str(applied)]
    for n in names:
        argv += ["--variant", n]
    r = subprocess.run([*argv, "--", str(script)], capture_output=True, text=True, env=ENV, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), json.loads(applied.read_text()), r.stderr


def test_baseline_changes_nothing_and_records_what_the_program_did(tmp_path):
    seen, record, _ = _probe(tmp_path)
    assert seen["workers"] == [0, 3, 0, 0] and seen["pin"] == [False, False, True, False]
    assert not seen["autocast"] and seen["mm_dtype"] == "torch.float32"
    assert record["variants"] == []
    assert record["dataloaders"] == {"built": 4, "changed": 0, "workers_default": 3, "pin_memory_default": 3,
                                     "persistent_default": 1}  # (the loader with 3 workers; none iterated)
    assert record["flags_at_exit"]["torch.backends.cudnn.benchmark"] is False


def test_flag_variants_are_set_inside_the_program(tmp_path):
    seen, record, _ = _probe(tmp_path, "tf32", "cudnn-benchmark")
    assert seen["tf32"] and seen["cudnn_tf32"] and seen["precision"] == "high" and seen["benchmark"]
    assert [i["variant"] for i in record["variants"]] == ["tf32", "cudnn-benchmark"]
    seen, _, _ = _probe(tmp_path, "no-tf32")
    assert not seen["tf32"] and not seen["cudnn_tf32"] and seen["precision"] == "highest"


SETS_FP32 = """
import json, torch
torch.backends.cudnn.allow_tf32 = False          # line 3: fp32 "as written"
torch.backends.cuda.matmul.allow_tf32 = False
torch.set_float32_matmul_precision("highest")
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.allow_tf32 = False
print(json.dumps({"tf32": torch.backends.cuda.matmul.allow_tf32, "cudnn_tf32": torch.backends.cudnn.allow_tf32,
                  "precision": torch.get_float32_matmul_precision(), "benchmark": torch.backends.cudnn.benchmark}))
"""


def test_flag_variants_hold_their_values_where_the_program_sets_them_back_and_say_where(tmp_path):
    """A program that turns TF32 off itself (H200, grad_accum.py's ``cudnn.allow_tf32 = False``: ``tf32`` measured
    0.98x where TF32 made it 1.40x faster) keeps the variant's value, and the record names the program's lines."""
    seen, record, _ = _probe(tmp_path, "tf32", "cudnn-benchmark", program=SETS_FP32)
    assert seen == {"tf32": True, "cudnn_tf32": True, "precision": "high", "benchmark": True}
    held = record["variants"][0]["set"]["held"]
    assert held["torch.backends.cudnn.allow_tf32 = False"] == {"where": "probe.py:3", "times": 2}
    assert held["torch.backends.cuda.matmul.allow_tf32 = False"]["where"] == "probe.py:4"
    assert held["torch.set_float32_matmul_precision('highest')"]["where"] == "probe.py:5"
    assert record["variants"][1]["set"]["held"] == {"torch.backends.cudnn.benchmark = False":
                                                    {"where": "probe.py:6", "times": 1}}
    assert record["flags_at_exit"]["torch.backends.cudnn.allow_tf32"] is True
    seen, record, _ = _probe(tmp_path, program=SETS_FP32)  # the baseline: the program's own values
    assert seen == {"tf32": False, "cudnn_tf32": False, "precision": "highest", "benchmark": False}


EPOCHS = """
import json, torch
from torch.utils.data import DataLoader
loaders = [DataLoader(list(range(8)), batch_size=4, num_workers=1), DataLoader(list(range(8)), batch_size=4)]
for epoch in range(2):
    for l in loaders:
        for _ in l:
            pass
opt = torch.optim.AdamW([torch.nn.Parameter(torch.ones(2))], lr=0.1)
print(json.dumps({"persistent": [l.persistent_workers for l in loaders], "fused": opt.defaults.get("fused")}))
"""


def test_loaders_iterated_again_are_counted_and_persistent_workers_keeps_only_those_with_workers(tmp_path):
    seen, record, _ = _probe(tmp_path, program=EPOCHS)
    assert seen["persistent"] == [False, False] and not seen["fused"]
    assert record["dataloaders"]["iterators"] == 4 and record["dataloaders"]["persistent_default"] == 1
    assert "persistent-workers" in dict(choose({}, record))  # iterated 4 times, built twice: workers restart
    seen, record, _ = _probe(tmp_path, "persistent-workers", "fused-optimizer", program=EPOCHS)
    assert seen == {"persistent": [True, False], "fused": True}
    assert [i["applied"] for i in record["variants"]] == [True, True]


def test_autocast_is_active_inside_the_program(tmp_path):
    seen, record, _ = _probe(tmp_path, "bf16-autocast")
    assert seen["autocast"] and seen["autocast_dtype"] == "torch.bfloat16" and seen["mm_dtype"] == "torch.bfloat16"
    assert record["variants"][0]["set"] == {"autocast": "cpu", "dtype": "bfloat16"}
    seen, _, err = _probe(tmp_path, "fp16-autocast")
    assert seen["autocast_dtype"] == "torch.float16" and "GradScaler" in err


def test_dataloader_defaults_change_only_where_the_program_left_them(tmp_path):
    seen, record, _ = _probe(tmp_path, "workers=5", "pin-memory")
    assert seen["workers"] == [5, 3, 5, 5]          # num_workers=3 was the program's choice: kept
    assert seen["pin"] == [True, True, True, True]  # positional pin_memory=False (the default) is changed too
    assert record["dataloaders"]["built"] == 4 and record["dataloaders"]["changed"] == 4


@pytest.mark.parametrize("name,key,arg", [("tf32", "tf32", None), ("workers=8", "workers=N", 8),
                                          ("pin-memory", "pin-memory", None)])
def test_variant_names(name, key, arg):
    v = variants.parse(name)
    assert (v.key, v.arg) == (key, arg)


@pytest.mark.parametrize("bad", ["channels_last", "workers=0", "workers=x", "fp8", "compile-max"])
def test_unknown_variants_name_the_ones_that_exist(bad):
    with pytest.raises(ValueError, match="variants: tf32|N >= 1"):
        variants.parse(bad)


MODEL_PROBE = """
import json, sys, torch
conv = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3))
with torch.no_grad():
    for _ in range(3):
        y = conv(torch.randn(2, 3, 16, 16))  # NCHW input, as the program built it
print(json.dumps({"weight_channels_last": conv[0].weight.is_contiguous(memory_format=torch.channels_last),
                  "output_channels_last": y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous(),
                  "forward": type(conv.forward).__name__, "compiled": hasattr(conv.forward, "_torchdynamo_orig_callable")
                  or "compile" in repr(conv.forward).lower()}))
"""


def _model_probe(tmp_path, *names):
    return _probe(tmp_path, *names, program=MODEL_PROBE)


def test_channels_last_converts_the_main_model_and_its_convolutions_follow(tmp_path):
    seen, record, _ = _model_probe(tmp_path)
    assert not seen["weight_channels_last"] and not seen["output_channels_last"]
    seen, record, _ = _model_probe(tmp_path, "channels-last")
    assert seen["weight_channels_last"] and seen["output_channels_last"]  # NCHW inputs, channels-last outputs
    assert record["variants"] == [{"variant": "channels-last", "set": {"model": "Sequential",
                                                                       "memory_format": "channels_last"},
                                   "applied": True}]


def test_compile_variants_compile_the_main_models_forward(tmp_path):
    seen, record, _ = _model_probe(tmp_path, "compile")
    assert seen["compiled"] and record["variants"][0]["set"] == {"model": "Sequential",
                                                                 "forward": "torch.compile(mode='default')"}
    assert variants.parse("compile-reduce-overhead").key == "compile-reduce-overhead"


def _tiny_generate():
    pytest.importorskip("transformers")
    import torch
    from tests.runtime.test_inference_steps import _tiny_llama
    model = _tiny_llama()
    ids = torch.randint(3, 64, (1, 6), generator=torch.Generator().manual_seed(0))
    return model, dict(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False,
                       return_dict_in_generate=True)


def _generate_under(names, marks=None):
    """Apply ``names`` in this process, run ``fn`` with the patched generate(), then undo the patch."""
    from transformers.generation.utils import GenerationMixin
    original = GenerationMixin.generate
    applied = variants.Applied()
    variants.apply(names, applied, marks)

    def undo():
        GenerationMixin.generate = original
    return applied, undo


def test_static_cache_gives_every_generate_call_a_static_cache_and_says_what_it_overrode():
    import torch
    model, kw = _tiny_generate()
    plain = model.generate(**kw)
    applied, undo = _generate_under(["static-cache"])
    try:
        static = model.generate(**kw)
        named = model.generate(**kw, cache_implementation="dynamic")  # the program's own choice, by name
        from transformers import DynamicCache
        own = model.generate(**kw, past_key_values=DynamicCache())     # its own cache object: left alone
    finally:
        undo()
    assert type(static.past_key_values).__name__ == "StaticCache"
    assert type(named.past_key_values).__name__ == "StaticCache"  # issue 56: a named cache no longer hides it
    assert type(own.past_key_values).__name__ == "DynamicCache"
    assert torch.equal(static.sequences, plain.sequences) and torch.equal(named.sequences, plain.sequences)
    st = applied.items[0]["set"]
    assert st["generate calls"] == 2 and st["overrode"] == {"cache_implementation='dynamic'": 1}
    assert st["own cache object"] == 1
    assert applied.record()["variants"][0]["applied"] is True


def test_compile_reduce_overhead_on_generate_takes_the_compiled_static_cache_path():
    """A generate() loop: the model's forward is left to generate(), which gets a static cache and an explicit
    reduce-overhead CompileConfig (transformers compiles only on a GPU: on the CPU the tokens are the same)."""
    import torch
    from types import SimpleNamespace
    model, kw = _tiny_generate()
    plain = model.generate(**kw)
    marks = SimpleNamespace(on_main=[])  # what the step hooks give model variants (runtime.steps.StepMarks.on_main)
    forward = model.forward
    applied, undo = _generate_under(["compile-reduce-overhead"], marks)

    def found(module, args):  # the hooks find the main model at its first call: from inside generate()
        for fn in marks.on_main:
            fn(module)
        handle.remove()
    handle = model.register_forward_pre_hook(found)
    try:
        out = model.generate(**kw)
    finally:
        undo()
    st = applied.items[0]["set"]
    assert type(out.past_key_values).__name__ == "StaticCache" and torch.equal(out.sequences, plain.sequences)
    assert st["generate calls"] == 1 and st["generate(compile_config)"] == "CompileConfig(mode='reduce-overhead')"
    assert st["model"] == "LlamaForCausalLM" and "left to generate()" in st["forward"]
    assert model.forward == forward  # not compiled by the variant: generate() compiles the decoding step


def test_compile_reduce_overhead_marks_each_call_a_new_cuda_graph_step(monkeypatch):
    """Outside generate(): the forward is compiled with reduce-overhead and every call starts a CUDA-graph step,
    the fix PyTorch's own error names ("call torch.compiler.cudagraph_mark_step_begin() before each model
    invocation")."""
    import torch
    calls = []
    monkeypatch.setattr(torch, "compile", lambda fn, mode=None: (lambda *a, **k: (calls.append(("run", mode)),
                                                                                  fn(*a, **k))[1]))
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: calls.append(("step", None)))
    model = torch.nn.Linear(3, 2)
    item = {"variant": "compile-reduce-overhead", "set": {"generate calls": 0}}
    variants._change_model(model, "compile-reduce-overhead", item)
    x = torch.ones(1, 3)
    model(x), model(x)
    assert calls == [("step", None), ("run", "reduce-overhead")] * 2
    assert item["set"]["forward"].startswith("torch.compile(mode='reduce-overhead')")
    assert variants._applied(item, {})[0] is True


def test_a_variant_that_changes_nothing_says_so_and_why(tmp_path):
    """workers=N in a program without DataLoaders, static-cache without generate(): applied nowhere, with the reason
    (issue 56: such a run was reported as a speed-up)."""
    _, record, _ = _probe(tmp_path, "workers=2", "static-cache", "tf32", program=MODEL_PROBE)
    by = {i["variant"]: i for i in record["variants"]}
    assert by["workers=2"]["applied"] is False and "built no DataLoader" in by["workers=2"]["not_applied"]
    assert by["static-cache"]["applied"] is False and "generate()" in by["static-cache"]["not_applied"]
    assert by["tf32"]["applied"] is True and "not_applied" not in by["tf32"]


def test_cuda_graphs_wraps_the_main_model_and_says_why_no_call_was_graphed_on_a_cpu(tmp_path):
    """The variant replaces the main model's forward (the hooks find it) and counts every call it left as written:
    here three evaluation calls on CPU tensors, so nothing was captured and the run is no measurement of it."""
    seen, record, _ = _probe(tmp_path, "cuda-graphs", program=MODEL_PROBE)
    item = record["variants"][0]
    assert seen["forward"] == "GraphedForward" and item["set"]["model"] == "Sequential"
    assert item["applied"] is False and item["set"]["graphed calls"] == 0
    assert item["not_applied"] == "no call was replayed as a CUDA graph: 3 calls with a tensor argument off the GPU, " \
                                  "or without CUDA"
    from nsighttc.analysis.variant_gain import VARIANT_FINDING
    assert VARIANT_FINDING["cuda-graphs"] == [("launch-bound", None)]


def test_metric_is_the_last_match():
    out = "epoch 1: 10.5 images/s\nepoch 2: 1,234.5 images/s\ndone"
    assert read_metric(r"([\d.,]+) images/s", out) == 1234.5
    assert read_metric(r"accuracy", out) is None
    assert read_metric(r"epoch \d", out) == 2.0


def _verdict(rel: str) -> dict:
    from nsighttc.verdict import load_json
    return load_json(REPORTS / rel)  # (kept gzipped in reports/)


def test_auto_on_recorded_verdicts():
    """Verdicts recorded on an H100 (reports/): each points to the variants the material tried by hand."""
    mlp = dict(choose(_verdict("mnist_mlp/large_fp32"), {"flags_at_exit": {}}))
    assert list(mlp) == ["tf32", "bf16-autocast"] and "fp32-matmul-on-cuda-cores" in mlp["tf32"]
    resnet = dict(choose(_verdict("resnet_amp/fp32"), {"flags_at_exit": {"torch.backends.cudnn.benchmark": False}}))
    assert "bf16-autocast" in resnet and "tf32" in resnet["bf16-autocast"]  # its matrix work was TF32 only
    assert "cudnn-benchmark" in resnet
    fp16 = dict(choose(_verdict("mnist_mlp/large_fp16"), {}))
    assert "bf16-autocast" not in fp16 and "tf32" not in fp16  # already on fp16 Tensor Cores


def test_auto_picks_loader_variants_only_for_loaders_left_at_defaults(tmp_path):
    """The data-loader wrapper's recorded verdict (CPU-bound in `dataloader`) with the launcher's record of the
    same wrapper run here on CPU (its DataLoader built with num_workers=0, pin_memory=False)."""
    pytest.importorskip("torch")
    applied = tmp_path / "applied.json"
    r = subprocess.run([sys.executable, "-m", "nsighttc.runtime.launch", "--applied", str(applied), "--",
                        str(ROOT / "wrappers" / "dataloader_bound.py"), "--device", "cpu"],
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    record = json.loads(applied.read_text())
    assert record["dataloaders"]["workers_default"] >= 1
    v = _verdict("dataloader_bound/workers0_fp16_preprocess")
    picked = dict(choose(v, record, workers=8))
    assert "workers=8" in picked and "pin-memory" in picked and "num_workers=0" in picked["workers=8"]
    record["dataloaders"] = {"built": 1, "changed": 0, "workers_default": 0, "pin_memory_default": 0}
    assert not {"workers=8", "pin-memory"} & set(dict(choose(v, record, workers=8)))


# Steps that settle by design on a loaded machine: a sleep that dominates each step (jitter of a busy core is a
# fraction of a millisecond against 12 ms), and enough of them for the warm-up rule to find three that agree. Its
# earlier 5 ms steps, 16 of them, "never settled" with both cores busy (issue 53).
STEPPED = """
import os, sys, time, torch
from nsighttc import annotate
if torch.is_autocast_enabled("cpu"):
    raise RuntimeError("expected scalar type Float but found BFloat16")
slow = torch.backends.cudnn.benchmark
x = torch.ones(16, 16)
for i in range(30):
    with annotate.step():
        x = torch.tanh(x @ x)
        time.sleep(0.036 if slow else 0.012)
print(f"throughput {100 if not slow else 20} items/s")
"""


def test_try_end_to_end_on_cpu(tmp_path, run_cli):
    pytest.importorskip("torch")
    from nsighttc.experiment import schema_problem
    script = tmp_path / "stepped.py"
    script.write_text(STEPPED)
    code, out, err = run_cli("try", "--out", tmp_path / "runs", "--repeat", "1", "--metric", r"throughput (\d+)",
                             "--variant", "tf32",
                             "--variant", "bf16-autocast", "--variant", "cudnn-benchmark", "--fail-if-slower",
                             str(script))
    assert code == 1, err  # cudnn-benchmark makes this program slower
    run = next((tmp_path / "runs").iterdir())
    doc = json.loads((run / "try.json").read_text())
    assert doc["schema"] == "nsighttc.try/1" and doc["program"] == "stepped" and schema_problem(doc) is None
    rows = {v["name"]: v for v in doc["variants"]}
    assert list(rows) == ["baseline", "tf32", "bf16-autocast", "cudnn-benchmark"]
    base = rows["baseline"]
    assert base["status"] == "ok" and base["speedup"] == 1.0 and 10e6 < base["step_ns"] < 40e6
    assert base["metric"] == 100.0
    # the step times came from the plain run (no profiler); the baseline's profiled run gave its verdict
    assert (run / "baseline" / "plain1" / "step_times.json").exists()
    assert not (run / "baseline" / "plain1" / "torch_trace.json").exists()
    assert (run / "baseline" / "profiled" / "verdict.json").exists()
    assert not (run / "tf32" / "profiled").exists()  # variants are profiled only with --explain
    assert base["phases"] and all(p["clock"] == "host" for p in base["phases"].values())  # no CUDA here
    failed = rows["bf16-autocast"]
    assert failed["status"] == "failed" and "BFloat16" in failed["error"] and failed["speedup"] is None
    slow = rows["cudnn-benchmark"]
    assert slow["status"] == "ok" and slow["speedup"] < 0.6 and slow["metric"] == 20.0
    assert slow["change"] == "slower" and slow["spread"]["high"] < 1.0
    assert slow["applied"] == [{"variant": "cudnn-benchmark", "set": {"torch.backends.cudnn.benchmark": True},
                                "applied": True}]
    assert rows["tf32"]["status"] == "ok"
    for key in ("name", "status", "applied", "step_ns", "speedup", "spread", "change", "predicted",
                "prediction", "metric"):
        assert all(key in v for v in doc["variants"])
    md = (run / "try.md").read_text()
    assert "| `bf16-autocast` | **failed**" in md and (run / "try.png").exists()
    assert json.loads((run / "cudnn-benchmark" / "plain1" / "run.json").read_text())["applied"]["variants"][0][
        "variant"] == "cudnn-benchmark"
    assert "cudnn-benchmark" in out and "FAILED" in out


def test_repeat_alternates_and_gives_the_spread_of_rounds(tmp_path, run_cli):
    """--repeat 2: two plain rounds each, paired by round, the speed-up's 90% interval around the rounds; --explain
    profiles the variant too. (Runs of an unchanged program read as no change: tests/test_try_rounds.py.)"""
    pytest.importorskip("torch")
    from nsighttc.experiment import schema_problem
    script = tmp_path / "stepped.py"
    script.write_text(STEPPED.replace('raise RuntimeError("expected scalar type Float but found BFloat16")', "pass"))
    code, _, err = run_cli("try", "--out", tmp_path / "runs", "--repeat", "2", "--explain",
                           "--variant", "cudnn-benchmark", str(script))
    assert code == 0, err
    run = next((tmp_path / "runs").iterdir())
    doc = json.loads((run / "try.json").read_text())
    assert schema_problem(doc) is None and doc["repeat"] == 2 and doc["rounds_rule"] == "--repeat 2"
    rows = {v["name"]: v for v in doc["variants"]}
    for name in ("baseline", "cudnn-benchmark"):
        assert len(rows[name]["run_dirs"]) == 2 and (run / name / "plain2" / "step_times.json").exists()
    slow = rows["cudnn-benchmark"]
    assert len(slow["rounds"]) == 2 and slow["spread"]["basis"] == "90% interval of the mean of 2 rounds"
    ratios = [r["speedup"] for r in slow["rounds"]]
    assert slow["spread"]["low"] < min(ratios) <= slow["speedup"] <= max(ratios) < slow["spread"]["high"]
    assert slow["change"] == "slower" and slow["spread"]["high"] < 1.0
    assert slow["explained"] and slow["explained"]["verdict"] and \
        (run / "cudnn-benchmark" / "profiled" / "verdict.json").exists()
    assert any("rounds" in n for n in doc["notes"])


def test_combined_variant_applies_both(tmp_path, run_cli):
    pytest.importorskip("torch")
    script = tmp_path / "stepped.py"
    script.write_text(STEPPED.replace('raise RuntimeError("expected scalar type Float but found BFloat16")', "pass"))
    code, _, err = run_cli("try", "--out", tmp_path / "runs", "--repeat", "1", "--variant", "tf32+cudnn-benchmark",
                           str(script))
    assert code == 0, err
    doc = json.loads((next((tmp_path / "runs").iterdir()) / "try.json").read_text())
    both = doc["variants"][1]
    assert both["name"] == "tf32+cudnn-benchmark" and [a["variant"] for a in both["applied"]] == ["tf32", "cudnn-benchmark"]


def test_try_refuses_unknown_variants_before_running(tmp_path, run_cli):
    script = tmp_path / "s.py"
    script.write_text("print(1)\n")
    code, _, err = run_cli("try", "--out", tmp_path / "runs", "--variant", "channels_last", str(script))
    assert code == 2 and "unknown variant 'channels_last'" in err
    assert not (tmp_path / "runs").exists()


def test_recorded_comparisons_render_and_flag_a_metric_that_changed():
    """The comparisons recorded on an H100 (reports/try/): bf16 autocast made the large MLP 8x faster and
    broke its accuracy (1.0 -> 0.067); the report must say so next to the speed-up."""
    from nsighttc.render import try_report
    doc = json.loads((REPORTS / "try" / "mnist_large_fp32" / "try.json").read_text())
    rows = {v["name"]: v for v in doc["variants"]}
    assert rows["bf16-autocast"]["speedup"] > 2 and rows["tf32"]["speedup"] > 2
    assert try_report.metric_changes(doc) == [("bf16-autocast", 1.0, 0.067)]
    md = try_report.markdown(doc)
    assert "`bf16-autocast` 1 → 0.067" in md and "**Fastest: `bf16-autocast`" in md


def test_auto_picks_cuda_graphs_for_a_launch_bound_generation_loop():
    """The generation loop's verdict from the H100 (tests/fixtures/inference): launch-bound, so `static-cache`."""
    from nsighttc.api import analyze
    v = analyze([ROOT / "tests" / "fixtures" / "inference" / "llm_generate_default_torch.json.xz"], jobs=1).to_json()
    picked = dict(choose(v, {}))
    assert "static-cache" in picked and "launch-bound" in picked["static-cache"]
    v["timeline"].pop("inference")  # the same loop without its generation marks: CUDA graphs through torch.compile
    assert "compile-reduce-overhead" in dict(choose(v, {}))


TOKENIZING = """
import json
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, DataCollatorWithPadding
vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate("a b c d e".split())}}
t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
t.pre_tokenizer = pre_tokenizers.Whitespace()
tok = PreTrainedTokenizerFast(tokenizer_object=t, pad_token="[PAD]", unk_token="[UNK]")
texts = ["a b c", "a b c d e a b c d e a"]
longest = tok(texts, padding=True)["input_ids"]
fixed = tok(texts, padding="max_length", max_length=20)["input_ids"]
own = tok(texts, padding=True, pad_to_multiple_of=16)["input_ids"]
unpadded = tok(texts)["input_ids"]
collated = DataCollatorWithPadding(tok)([{"input_ids": x} for x in unpadded])["input_ids"]
print(json.dumps({"longest": len(longest[0]), "fixed": len(fixed[0]), "own": len(own[0]),
                  "unpadded": [len(x) for x in unpadded], "collated": list(collated.shape)}))
"""


def test_pad_buckets_pads_a_tokenizers_batches_to_a_multiple_from_the_launcher(tmp_path):
    """pad-buckets from the launcher: transformers' tokenizer calls that pad to the longest (and its collators, through
    tokenizer.pad) pad to a multiple of 64; fixed-length padding, the program's own multiple and unpadded calls are
    left; the record counts the calls. Without a tokenizer it says it applied nowhere."""
    pytest.importorskip("transformers")
    plain, _, _ = _probe(tmp_path, program=TOKENIZING)
    assert plain == {"longest": 11, "fixed": 20, "own": 16, "unpadded": [3, 11], "collated": [2, 11]}
    seen, record, _ = _probe(tmp_path, "pad-buckets", program=TOKENIZING)
    assert seen == {"longest": 64, "fixed": 20, "own": 16, "unpadded": [3, 11], "collated": [2, 64]}
    item = record["variants"][0]
    assert item["applied"] and item["set"]["tokenizer calls padded to a multiple"] == 2
    none = variants.Applied()  # a program without a tokenizer: the variant counted no call
    none.items.append({"variant": "pad-buckets", "set": {"tokenizer calls padded to a multiple": 0}})
    item = none.record()["variants"][0]
    assert not item["applied"] and "padding written by hand" in item["not_applied"]

