"""What removes launch overhead in a workload, less what its recording shows the program already does: the advice of
the launch-bound and host-bound findings (``findings``), by workload, by whether its input shapes keep changing, and
where it already replays CUDA graphs, by what runs outside them."""
from __future__ import annotations

import re

from ..kernel_keys import short_kernel
from . import in_use as in_use_mod

# What removes launch overhead, per workload (one sentence for every program sent a decode loop to
# "larger batches" and a training loop to CUDA graphs it could not capture).
LAUNCH_ADVICE = {
    "generation": "Replay the decoding step as a CUDA graph: a static KV cache, `model.generate(..., "
                  "cache_implementation=\"static\")` (transformers then compiles the decoding step with CUDA graphs), "
                  "or `torch.compile(model.forward, mode=\"reduce-overhead\", fullgraph=True)` with a static cache; "
                  "and give each launch more work: more sequences per `generate()` call (a larger batch). "
                  "`nsighttc try --variant compile-reduce-overhead` measures it.",
    "inference": "Replay the model's call as a CUDA graph: `torch.compile(model, mode=\"reduce-overhead\")` (fixed "
                 "input shapes), fuse small ops (`torch.compile(model)`), and give each launch more work (larger "
                 "batches). `nsighttc try --variant compile-reduce-overhead` measures it.",
}
# The same where the loop's input shapes keep changing (``steps.slow``): a CUDA graph replays one shape, so the advice
# is fusion with the changing dimension dynamic, and more work per launch.
LAUNCH_ADVICE_CHANGING_SHAPES = {
    "generation": "Give each launch more work: more sequences per `generate()` call (a larger batch), and fuse small "
                  "ops (`torch.compile(model.forward, dynamic=True)`).",
    "inference": "Fuse small ops with the changing dimension dynamic (`torch.compile(model, dynamic=True)`), and give "
                 "each launch more work (larger batches). `nsighttc try --variant compile` measures it.",
}
# The training fix in parts, each left out where the recording shows it in use (``in_use``: the key it needs absent).
TRAINING_FIX = (("torch_compile", "`torch.compile(model)` fuses the small ops"),
                ("foreach_optimizer", "a fused or foreach optimizer (`torch.optim.AdamW(..., fused=True)`) replaces a "
                                      "per-parameter loop of kernels"),
                (None, "fewer host syncs (`.item()`, `.cpu()`) keep the launch queue full"),
                ("cuda_graphs", "CUDA graphs (`torch.compile(model, mode=\"reduce-overhead\")`) where the step's "
                                "shapes are fixed"))

NO_GRAPHS_FOR_CHANGING_SHAPES = (" (no CUDA graphs or `reduce-overhead` while its input shapes keep changing: a graph "
                                 "replays one shape)")


# The host's work between replays, by what the loop does (a training loop compiled with mode="reduce-overhead" was told
# of logits processors and streamers, generate()'s: H200, benchmarks/gpu/user_programs/compiled_graphs.py); "training"
# where an optimizer's kernels run outside the graphs, None (any loop) otherwise
BETWEEN_REPLAYS = {"generation": "Python logits processors, stopping criteria, streamers, `.item()` per token",
                   "training": "Python between the model's call, the loss and the optimizer; `.item()` per step",
                   None: "Python pre- and post-processing per call; `.item()` per batch"}
# An optimizer's kernels among those launched outside the graphs: torch.optim's foreach implementation (the default on
# CUDA) launches multi_tensor_apply kernels per step; its fused one (`fused=True`) fewer; same H200 loop, SGD's
# foreach kernels 3 of the 12 launched outside its graphs per step
OPTIMIZER_KERNEL = re.compile(r"multi_tensor_apply|foreach|fused_(sgd|adam)", re.IGNORECASE)
OPTIMIZER_OUTSIDE_GRAPHS = (", the optimizer's step among them (its `multi_tensor_apply` kernels: a fused optimizer, "
                            "`fused=True`, launches fewer, and `torch.compile` of the step captures it too)")


def launch_fix(work: str, in_use: dict, graphs: dict, scope: str | None = None, shapes_change: bool = False) -> str:
    """What removes launch overhead in this workload, less what the recording shows the program already does
    (a decode already replayed as CUDA graphs was told to replay the decoding step as a CUDA graph).
    ``scope``: the step family the finding is about; graphs count where its steady steps replay them (any scope
    when None). ``shapes_change``: the loop meets new input shapes as it runs, so no CUDA-graph advice."""
    graphed = "cuda_graphs" in in_use and (scope is None or in_use_mod.graphed(in_use, scope))
    if graphed and in_use["cuda_graphs"].get("captures"):
        return (f"The program captures CUDA graphs ({in_use['cuda_graphs']['seen']}): this recording holds their "
                "capture, where each kernel of the graph is launched once on its own, and not their replays, so its "
                "launch gaps are no loop's. Record the loop that replays them (begin the recording after the "
                "capture, e.g. `torch.profiler.schedule(wait=N, ...)`) to judge it.")
    if graphed:
        top = graphs.get("outside_top") or []
        names = ", ".join(f"`{short_kernel(o['name'])}` ×{o['count']:,}" for o in top)
        more = "more sequences per `generate()` call" if work == "generation" else "larger batches"
        optimizer = any(OPTIMIZER_KERNEL.search(o["name"]) for o in top)
        # (the training words where an optimizer's kernels show it: a recording by hand of an inference loop is
        # "training" to ``workload`` when nothing says otherwise)
        between = "generation" if work == "generation" else ("training" if optimizer else None)
        return (f"The program already replays CUDA graphs ({in_use['cuda_graphs']['seen']}): there is no graph to "
                "adopt. What is left is the host's work between replays and the kernels launched outside the graphs"
                + (f" ({graphs.get('kernels_outside', 0):,}; most often {names})" if names else "")
                + ": capture them with the rest (compile the code around the model's call with it, `fullgraph=True`; "
                "`TORCH_LOGS=graph_breaks` names what ends a capture)"
                + (OPTIMIZER_OUTSIDE_GRAPHS if optimizer else "")
                + f", cut the host's work per call between replays ({BETWEEN_REPLAYS[between]}), "
                f"and give each replay more work ({more}).")
    if work != "training":
        return (LAUNCH_ADVICE_CHANGING_SHAPES if shapes_change else LAUNCH_ADVICE)[work]
    # graphs replayed in another phase of the program: it knows them; its other phases are not told to adopt them
    # (a training step captured after three eager steps was told to capture its eager steps)
    kept = [text for key, text in TRAINING_FIX
            if (key is None or key not in in_use) and not (shapes_change and key == "cuda_graphs")]
    if len(kept) == 4:  # nothing in use: the sentence as it always read
        body = f"{kept[0]}, {kept[1]}, and {kept[2]}; {kept[3]}"
    elif len(kept) == 3:
        body = f"{kept[0]}, {kept[1]}, and {kept[2]}"
    else:
        body = ", and ".join(kept)
    done = [in_use[k]["seen"] for k, _ in TRAINING_FIX if k and k in in_use]
    try_ = "compile-reduce-overhead" if "torch_compile" in in_use else "compile"
    return (f"Cut per-kernel host cost: {body}. " + (f"(Already in use: {'; '.join(done)}.) " if done else "")
            + f"`nsighttc try --variant {try_}` measures it."
            + (NO_GRAPHS_FOR_CHANGING_SHAPES if shapes_change else ""))
