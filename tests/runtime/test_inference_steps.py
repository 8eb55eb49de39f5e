"""Inference steps from the hooks (nsighttc/runtime/steps.py, issue 44): programs with no optimizer get one step per
top-level call of the main model (or per DataLoader iteration), generation loops get prefill/decode/request marks,
and training loops keep their optimizer steps. Real PyTorch programs on the CPU, read back through the parser."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from nsighttc.runtime import steps as hooks  # noqa: E402
from tests.runtime.test_steps import record  # noqa: E402

pytestmark = pytest.mark.torch


def _names(tl, name):
    m = tl.marks
    return m[(m["name"] == name).to_numpy()].sort_values("start_ns")


def _tiny_llama():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                   pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def test_a_generate_loop_has_a_step_per_model_call_and_prefill_decode_and_request_marks(tmp_path):
    model = _tiny_llama()
    requests, new_tokens, prompt = 3, 5, 7

    def program():
        with torch.inference_mode():
            for r in range(requests):
                ids = torch.randint(3, 64, (1, prompt), generator=torch.Generator().manual_seed(r))
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                                     min_new_tokens=new_tokens, do_sample=False)
                assert out.shape[1] == prompt + new_tokens

    sets, counts, tl = record(program, tmp_path)
    calls = requests * new_tokens  # one prefill, then one decode per further token
    assert counts["model_calls"] == calls and counts["prefills"] == requests and counts["decodes"] == calls - requests
    assert counts["requests"] == requests and counts["optimizer_steps"] == 0
    assert len(_names(tl, hooks.FORWARD)) == calls
    assert len(_names(tl, hooks.PREFILL)) == requests and len(_names(tl, hooks.DECODE)) == calls - requests
    assert len(_names(tl, hooks.REQUEST)) == requests
    # every step but the last (open at the program's end) was closed by the next model call
    assert counts["steps"] == calls - 1
    assert [s.name for s in sets] == ["model calls"] and len(sets[0].starts) == calls
    # each request's prefill is its first model call; the request holds its own calls
    req, pre = _names(tl, hooks.REQUEST), _names(tl, hooks.PREFILL)
    fwd = _names(tl, hooks.FORWARD)
    for (_, r), (_, p) in zip(req.iterrows(), pre.iterrows()):
        inside = fwd[(fwd["start_ns"] >= r["start_ns"]).to_numpy() & (fwd["end_ns"] <= r["end_ns"]).to_numpy()]
        assert len(inside) == new_tokens
        assert inside["start_ns"].iloc[0] <= p["start_ns"] <= p["end_ns"] <= inside["end_ns"].iloc[0]


def test_the_main_model_is_hooked_once_though_generate_holds_the_call_it_took_before_finding_it(tmp_path):
    """transformers' generate() takes ``self.__call__`` once per request, before the first call, while nn.Module's call
    was still the finder's wrapper: each call of the first request found the model again and hooked it once more
    (96 hooks on every later call of a 96-token request on the H100, 1.5 ms a decode call)."""
    model = _tiny_llama()
    seen = []

    def program():
        with torch.inference_mode():
            for r in range(3):
                ids = torch.randint(3, 64, (1, 5), generator=torch.Generator().manual_seed(r))
                model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=6,
                               min_new_tokens=6, do_sample=False)
                seen.append((len(model._forward_pre_hooks), len(model._forward_hooks)))

    _, counts, _ = record(program, tmp_path)
    assert seen == [(1, 1)] * 3
    assert counts["model_calls"] == 18 and counts["requests"] == 3


def test_nested_and_recursive_calls_of_the_model_are_no_more_steps(tmp_path):
    class Recursive(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(4, 4)

        def forward(self, x, depth=2):
            x = self.inner(x)  # a submodule: never a step
            return self(x, depth - 1) if depth else x  # the model calling itself: part of this call

    model = Recursive()

    def program():
        with torch.no_grad():
            for _ in range(6):
                model(torch.randn(2, 4))

    sets, counts, tl = record(program, tmp_path)
    assert counts["model_calls"] == 6 and len(_names(tl, hooks.FORWARD)) == 6
    assert counts["prefills"] == counts["decodes"] == 0  # float inputs: not token ids
    assert len(sets) == 1 and len(sets[0].starts) == 6


def test_an_evaluation_loop_is_timed_by_its_dataloader_iterations(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    ds = torch.utils.data.TensorDataset(torch.randn(80, 16), torch.randint(0, 4, (80,)))
    dl = torch.utils.data.DataLoader(ds, batch_size=8)

    def program():
        with torch.no_grad():
            for x, y in dl:
                model(x)
                model(x + 1)  # two model calls per batch: the iteration is still the batch

    sets, counts, tl = record(program, tmp_path)
    assert counts["fetches"] == 11 and counts["model_calls"] == 20  # 10 batches, then the fetch that ends the loop
    assert counts["steps"] == 10  # each fetch after the first closed the step before it
    assert sets[0].name == "DataLoader iterations" and len(sets[0].starts) == 10


def test_gradient_accumulation_before_the_first_optimizer_step_is_never_cut_into_inference_steps(tmp_path):
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def program():
        for _ in range(3):
            for _ in range(4):  # four micro-batches, no DataLoader
                model(torch.randn(4, 8)).sum().backward()
            opt.step()
            opt.zero_grad()

    sets, counts, tl = record(program, tmp_path)
    assert counts["optimizer_steps"] == 3 and counts["steps"] == 3
    assert sets[0].name == "optimizer steps" and len(sets[0].starts) == 3


def test_a_compiled_call_of_the_model_is_seen_from_outside_the_compiled_region(tmp_path):
    """transformers compiles ``self.__call__`` for a static KV cache; dynamo traces the hooks inside it away."""
    model = torch.nn.Linear(4, 4)
    from nsighttc.runtime import model_calls

    def program():
        compiled = torch.compile(model.__call__, backend="eager")
        assert isinstance(compiled, model_calls.ModelCall)
        with torch.no_grad():
            for _ in range(5):
                compiled(torch.randn(2, 4))

    sets, counts, tl = record(program, tmp_path)
    assert counts["model_calls"] == 5 and len(_names(tl, hooks.FORWARD)) == 5
    assert np.all(np.diff(sets[0].starts) > 0) and len(sets[0].starts) == 5


@pytest.mark.parametrize("kwargs, args, q", [({"input_ids": torch.zeros(2, 7, dtype=torch.long)}, (), 7),
                                              ({"input_ids": torch.zeros(2, 1, dtype=torch.long)}, (), 1),
                                              ({"inputs_embeds": torch.zeros(1, 3, 8)}, (), 3),
                                              ({}, (torch.zeros(4, 9, dtype=torch.int32),), 9),
                                              ({}, (torch.zeros(4, 3, 32, 32),), None),
                                              ({}, (torch.zeros(4, 9),), None)])
def test_the_query_length_of_a_call(kwargs, args, q):
    assert hooks.query_length(args, kwargs) == q
