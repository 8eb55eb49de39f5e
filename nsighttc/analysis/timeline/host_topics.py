"""What a host frame is: plumbing every call passes through (never a site), and the kind of work its stack was doing
(a topic: data loading, an optimizer step, logging, a synchronising call, a checkpoint, the model's forward or
backward).

``host_frames`` sites the host's idle samples with these rules; findings take their fix from the topic. The rule
tables say where each rule was seen.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

# Wrappers every call passes through: never a site, never what a site "calls" (seen in stacks of torch 2.11 programs
# sampled on the H100, reports/host_frames).
PLUMBING = (
    (re.compile(r"/torch/nn/modules/module\.py$"), re.compile(r"_wrapped_call_impl|_call_impl|inner$")),
    (re.compile(r"/torch/utils/_contextlib\.py$"), re.compile(r".")),
    (re.compile(r"/torch/_dynamo/eval_frame\.py$"), re.compile(r"_fn$|__call__$")),
    (re.compile(r"/torch/optim/optimizer\.py$"), re.compile(r"wrapper$|_use_grad$|maybe_fallback$")),
    (re.compile(r"/torch/autograd/profiler\.py$"), re.compile(r".")),
    (re.compile(r"/(?:runpy|threading|contextlib|functools)\.py$"), re.compile(r".")),
    # transformers 5's decorators around a model's forward (can_return_tuple, check_model_inputs: generic.py), seen
    # between the Trainer's compute_loss and BertForSequenceClassification.forward (tests/fixtures/host_frames)
    (re.compile(r"/transformers/utils/generic\.py$"), re.compile(r"wrapper$")),
)

# What a stack was doing, from its frames, innermost first: the first frame that matches decides. (file pattern,
# function pattern, topic). Sources: stacks of wrappers/dataloader_bound.py, trainer_finetune.py and
# lightning_module.py sampled on the H100 (reports/host_frames); logging and optimizer modules by their paths.
TOPICS = (
    # a recording's calls into C (torch.profiler with_stack names them `<built-in method item of Tensor object ...>`)
    (r"<built-in>$", r"method (?:item|cpu|tolist|numpy) of|synchronize", "sync"),
    (r"/torch/utils/data/|/torchvision/transforms/|/PIL/|/datasets/|/accelerate/data_loader\.py$|"
     r"/lightning/pytorch/loops/fetchers\.py$|/lightning/pytorch/utilities/combined_loader\.py$", r"", "data"),
    (r"/torch/optim/|/torch/amp/grad_scaler\.py$|/apex/optimizers/|/accelerate/optimizer\.py$", r"", "optimizer"),
    # a checkpoint written in the loop: torch.save's ``_save`` and the storages it copies to the host
    # (torch/serialization.py, torch/storage.py under it: wrappers/checkpoint_loop.py sampled on the H200,
    # tests/fixtures/host_frames/checkpoint_save_stacks.json.xz); torch.distributed.checkpoint, safetensors and
    # Lightning's checkpoint IO by their paths
    (r"/torch/serialization\.py$|/torch/distributed/checkpoint/|/safetensors/|/lightning/fabric/plugins/io/|"
     r"/lightning/pytorch/callbacks/model_checkpoint\.py$", r"", "checkpoint"),
    (r"/logging/__init__\.py$|/torch/utils/tensorboard/|/tensorboardX/|/wandb/|/lightning/pytorch/loggers/|"
     r"/lightning/pytorch/trainer/connectors/logger_connector/|/lightning/pytorch/callbacks/progress/|/tqdm/",
     r"", "logging"),
    (r"/torch/autograd/|/torch/_tensor\.py$", r"backward", "backward"),
    # a model's input processing: transformers' processors live beside its models (transformers/models/videomae/
    # image_processing_videomae.py) and its pipelines' preprocess decodes the input (read_video_pyav), so before the
    # models' rule: TraceLens' TimeSformer pipeline trace (H100) read 178 ms of video normalisation in numpy as "the
    # model's forward" (its fix: a CUDA graph); media decoders by their packages
    (r"/transformers/models/[^/]+/(?:image_processing|video_processing|feature_extraction|tokenization|processing)"
     r"_\w+\.py$|/transformers/(?:image_processing\w*|image_transforms|image_utils|video_utils|video_processing_utils|"
     r"feature_extraction\w*|tokenization_utils\w*|processing_utils|audio_utils)\.py$|"
     r"/(?:av|cv2|decord|torchaudio|librosa|soundfile|imageio|tokenizers|torchcodec)/", r"", "data"),
    (r"/transformers/pipelines/", r"(?:^|\.)(?:preprocess|read_\w+|load_\w+|_sanitize_parameters)$", "data"),
    # (before the rules on function names: a ModuleList's __getitem__ is the model's, not a dataset's)
    (r"/torch/nn/|/transformers/models/|/timm/models/|/torchvision/models/", r"", "forward"),
    (r"", r"collate|__getitem__|(?:^|\.)transform", "data"),
    (r"", r"(?:^|\.)(?:_maybe_log_save_evaluate|log|_log\w*|log_\w+)$", "logging"),
)
# A program line that synchronises with the GPU when it runs (the C call below it shows no Python frame)
SYNC_SOURCE = re.compile(r"\.(item|cpu|tolist|numpy)\(\s*\)|\bsynchronize\(|\bprint\(|float\(\s*\w[\w.]*\s*\)")

# Topics of functions the trunk never enters: where the work is the cause itself. An accumulation loop without
# DataLoader workers (wrappers/grad_accum.py, H200, 2026-11-29) had 87-90% of its idle samples in the DataLoader, so
# the trunk went into it in some runs and not in others, and one program's six runs named three sites for one cause
# (`main` (grad_accum.py:74) → `__next__`; `fetch` (fetch.py:57) → `default_collate`; `__next__` → `_next_data`,
# with a 3%-of-samples `__getitem__` as its program line).
# The model's forward too: an evaluation loop whose idle samples were nearly all under the model's call sited them at
# the program's line calling it in one run ("`<module>` (vit_eval.py:13) → `VisionTransformer.forward`") and, where
# 90% of them went on into it, deep in timm in the next ("`Block.forward` → `Attention.forward`",
# "`VisionTransformer.forward_features` → `Sequential.forward`"), with no program line (H200, ../shared/programs
# vit_eval.py, reports/steps_time/final3: at the morning's main and at this code alike).
CAUSE_TOPICS = ("data", "optimizer", "logging", "sync", "forward", "checkpoint")


def plumbing(files: pd.Series, funcs: pd.Series) -> np.ndarray:
    """Per frame, whether it is a wrapper every call passes through (``PLUMBING``)."""
    files = "/" + files  # paths torch.profiler cut at their sys.path entry (torch/nn/...) match as absolute ones do
    out = np.zeros(len(files), dtype=bool)
    for fp, fn in PLUMBING:
        out |= files.str.contains(fp).to_numpy() & funcs.str.contains(fn).to_numpy()
    return out


def stack_topic(frame_topic: np.ndarray, stack: np.ndarray) -> str:
    """A stack's topic: its innermost frame's that has one (``frame_topic``: ``topics`` per frame; ``stack``: frame
    ids, innermost first), or ""."""
    return next((t for t in frame_topic[stack] if t), "")


def topics(frames: pd.DataFrame) -> np.ndarray:
    """Per frame, the topic its file or function says (or "")."""
    out = np.full(len(frames), "", dtype=object)
    files, funcs = "/" + frames["file"].astype(str), frames["function"].astype(str)
    for fp, fn, topic in reversed(TOPICS):  # the first rule that matches wins
        m = np.ones(len(frames), dtype=bool)
        if fp:
            m &= files.str.contains(fp).to_numpy()
        if fn:
            m &= funcs.str.contains(fn).to_numpy()
        out[m] = topic
    return out
