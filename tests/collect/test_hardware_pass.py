"""The default run's ncu pass: which kernels need hardware evidence, how ncu is told their names, when it
stops, and the evidence cache, all on real recordings (torch.profiler and ncu of the same probe cases)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from nsighttc.analysis.tensor_cores import classify_launches
from nsighttc.collect.evidence_cache import EvidenceCache
from nsighttc.collect.hardware_pass import StopWhenCovered, kernel_regex, leaf_name, ncu_token, needs_hardware
from tests.conftest import FIXTURES
from nsighttc.parse import load
from nsighttc.render.names import short_name
from tests.conftest import KINETO, RAW


def _ecma_to_python(rx: str) -> re.Pattern:
    return re.compile(rx.removeprefix("regex:"))  # the subset we emit means the same in both


def test_needs_hardware_is_matrix_or_unknown_work_without_hardware_evidence():
    launches = classify_launches(load(KINETO).kernels)
    need = needs_hardware(launches)
    assert not need.empty and need["time_ns"].is_monotonic_decreasing
    state = launches["tc_state"].astype(str)
    want = set(launches.loc[(launches["matrix_work"].astype(bool) | (state == "unknown")).to_numpy(), "name"].astype(str))
    assert set(need["name"]) == want
    assert not any("elementwise_kernel" in n and "gemm" not in n for n in need["name"])
    hw = classify_launches(load(RAW).kernels)  # ncu counters: nothing left to measure
    assert needs_hardware(hw).empty


def test_the_ncu_filter_built_from_torch_names_selects_the_same_kernels_in_ncus_names():
    need = needs_hardware(classify_launches(load(KINETO).kernels))
    rx = _ecma_to_python(kernel_regex(list(need["name"])))
    ncu_names = pd.Series(load(RAW).kernels["name"].astype(str).unique())
    picked = ncu_names[ncu_names.map(lambda n: bool(rx.search(n)))]
    # every matrix kernel the torch trace and the ncu recording share (same short name) is selected ...
    shared = set(need["name"].map(short_name)) & set(ncu_names.map(short_name))
    assert shared and shared <= set(picked.map(short_name))
    # ... and the settled elementwise / pooling kernels are not
    assert not picked.str.contains("vectorized_elementwise_kernel|max_pool_forward").any()


def test_tokens_and_leaves_are_what_ncu_prints():
    assert leaf_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T2)") \
        == "vectorized_elementwise_kernel"
    wrapped = "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(T1::Params)"
    assert leaf_name(wrapped) == "Kernel2" and ncu_token(wrapped) == "cutlass_80_simt_sgemm_64x64_8x5_tn_align1"
    assert ncu_token("nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT") == "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT"


def test_stop_when_every_needed_kernel_was_profiled_once():
    stops = []
    names = ["void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(T1::Params)",
             "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4>(int)",
             "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT"]
    w = StopWhenCovered(names, stop=lambda: stops.append(1))
    assert not w.on_line("workload output")
    # the three shapes ncu 2025.3.1 printed on H100 (benchmarks/probes/gpu_ncu_stop_probe.py)
    w.on_line('==PROF== Profiling "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT": 0%....50%....100% - 7 passes')
    w.on_line('==PROF== Profiling "unrelated_kernel": 0%....50%....100% - 7 passes')
    w.on_line('==PROF== Profiling "distribution_elementwise_grid..." - 3 (1/1): 0%....50%....100% - 1 pass')
    assert not stops and w.covered == 2 and w.profiled == 3
    w.on_line('==PROF== Profiling "Kernel2": 0%....50%....100% - 7 passes')
    w.on_line('==PROF== Profiling "Kernel2": 0%....50%....100% - 7 passes')
    assert stops == [1] and w.covered == 3  # stopped once, not twice


def test_evidence_cache_round_trip_from_a_real_ncu_recording(tmp_path):
    hw = classify_launches(load(RAW).kernels)
    cache = EvidenceCache("NVIDIA H200", "580.159.03", root=tmp_path)
    assert cache.add(hw, source="fixture") > 0 and cache.save()
    again = EvidenceCache("NVIDIA H200", "580.159.03", root=tmp_path)
    found = again.lookup(hw[["name", "grid", "block"]])
    hard = hw[hw["evidence"] == "hardware"]
    assert set(found["name"]) == set(hard["name"].astype(str))
    merged = found.merge(hard.drop_duplicates("name")[["name", "tensor_core", "dtype"]], on="name", suffixes=("", "_ncu"))
    assert (merged["tensor_core"].astype(str) == merged["tensor_core_ncu"].astype(str)).all()
    assert found["evidence_detail"].str.startswith("ncu counters from the evidence cache").all()
    # another GPU or driver is another cache
    assert EvidenceCache("NVIDIA H100 80GB HBM3", "580.159.03", root=tmp_path).lookup(hw[["name", "grid", "block"]]).empty
    # torch.profiler spells some names differently: the short family name still finds them
    tl = needs_hardware(classify_launches(load(KINETO).kernels))
    assert not again.lookup(tl).empty


def test_a_broken_cache_file_is_ignored_with_a_note(tmp_path):
    c = EvidenceCache("GPU", "1", root=tmp_path)
    c.path.parent.mkdir(parents=True)
    c.path.write_text("{not json")
    again = EvidenceCache("GPU", "1", root=tmp_path)
    assert len(again) == 0 and "unreadable evidence cache" in again.notes[0]
    assert again.save() and json.loads(again.path.read_text())["schema"] == "nsighttc.evidence-cache/1"


def test_the_launcher_gate(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('program ran')\n")
    gate, pid = tmp_path / "gate", tmp_path / "pid"
    argv = [sys.executable, "-m", "nsighttc.runtime.launch", "--annotate", "none", "--wait-for", str(gate), "--pid-file",
            str(pid), "--", str(script)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    gate.write_text("stop")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "program ran" not in out and pid.read_text().strip() == str(proc.pid)
    gate.write_text("go")
    out = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=60).stdout
    assert "program ran" in out


@pytest.mark.parametrize("where", ["cuda", "context"])
def test_the_gate_at_the_first_cuda_use(tmp_path, where):
    pytest.importorskip("torch")
    script = tmp_path / "s.py"
    script.write_text("import torch\nprint('cpu start-up ran', torch.get_num_threads(), flush=True)\n"
                      "torch.cuda._lazy_init()\nprint('gpu work ran')\n")
    gate = tmp_path / "gate"
    gate.write_text("stop")
    argv = [sys.executable, "-m", "nsighttc.runtime.launch", "--annotate", "none", "--wait-for", str(gate), "--gate-at", where,
            "--", str(script)]
    r = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=120)
    # the CPU part ran (on one thread while waiting), the GPU part never did
    assert r.returncode == 0 and "cpu start-up ran 1" in r.stdout and "gpu work ran" not in r.stdout
    gate.write_text("go")  # past the gate the program goes on as it would have: on a GPU machine it runs,
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    import torch
    if torch.cuda.is_available():
        assert r.returncode == 0 and "gpu work ran" in r.stdout
    else:  # without one it meets the same error it meets without nsighttc (raised after the gate for "context")
        assert r.returncode != 0 and "gpu work ran" not in r.stdout and "cpu start-up ran" in r.stdout
        plain = subprocess.run([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=120)
        assert plain.returncode != 0 and plain.stderr.strip().splitlines()[-1] == r.stderr.strip().splitlines()[-1]


def test_idle_stop_when_most_of_the_time_is_measured_and_nothing_new_comes():
    stops = []
    w = StopWhenCovered(["big_gemm_kernel", "rare_gemm_kernel"], stop=lambda: stops.append(1),
                        weights={"big_gemm_kernel": 99.0, "rare_gemm_kernel": 1.0})
    w.started = 100.0
    assert not w.check_idle(now=500.0)  # nothing measured yet: keep going, however long
    w.on_line('==PROF== Profiling "big_gemm_kernel": 0%....50%....100% - 7 passes')
    w.first_cover = w.last_cover = 110.0  # the first kernel needed 10 s: wait 3 x 10 s for news
    assert w.covered_share == 0.99
    assert not w.check_idle(now=135.0) and w.check_idle(now=141.0)
    assert stops == [1] and w.reason == "idle"
    w2 = StopWhenCovered(["a_kernel", "b_kernel"], stop=lambda: None, weights={"a_kernel": 50.0, "b_kernel": 50.0})
    w2.on_line('==PROF== Profiling "a_kernel": 0%....50%....100% - 7 passes')
    assert not w2.check_idle(now=w2.last_cover + 3600)  # half the time unmeasured: never an idle stop


def test_merge_keys_of_torch_and_ncu_names_of_the_same_kernels_agree():
    from nsighttc.analysis.merge import merge_key
    k = set(merge_key(load(KINETO).kernels["name"].astype(str)))
    r = set(merge_key(load(RAW).kernels["name"].astype(str)))
    # bools (false/true vs 0/1), enum casts and parameter lists no longer split them (12 -> 18 of 34)
    assert "void nchwToNhwcKernel<__half, __half, float, 0, 1, 0>" in k & r
    assert len(k & r) >= 18


TRAINER_NAMES = Path(__file__).resolve().parents[1] / "fixtures" / "h100_trainer_kernel_names.json"


def test_every_kernel_a_trainer_replay_measured_matches_its_trace_name():
    """A transformers Trainer on H100: torch.profiler writes `<float, float, 32u, 32u, 256u, ...>`, `SumOp<long> >`,
    `long const*`, the ncu CSV `<float, float, 32, 32, 256, ...>`, `SumOp<long>>`, `const long *`. Five kernels the
    replay had measured were left unmatched and the program ran under ncu for them: every one of the 28 matches now."""
    from nsighttc.analysis.kernel_keys import kernel_key, merge_key
    doc = json.loads(TRAINER_NAMES.read_text())
    ncu = set(merge_key(pd.Series(doc["ncu"], dtype=object)))
    assert len(doc["trace"]) == 28 and all(kernel_key(n) in ncu for n in doc["trace"])
    gamma = next(n for n in doc["trace"] if "GammaBeta" in n)
    assert kernel_key(gamma) == "void GammaBetaBackwardCUDAKernelTemplate<float, float, 32, 32, 256, 0, 1, 0>"
    # still distinct where the kernels are: another template value, another pointer type
    assert kernel_key("k<long const*, 32u>") == kernel_key("k<const long *, 32>") != kernel_key("k<const long *, 64>")
    assert kernel_key("k<long const*>") != kernel_key("k<long*>")


def test_a_cache_written_with_older_keys_is_found_by_the_current_ones(tmp_path):
    """An evidence cache written before a spelling rule was added keys an entry by the older key: it is keyed again
    from the entry's name, so the kernel is still found (and not measured again)."""
    doc = json.loads(TRAINER_NAMES.read_text())
    gamma = next(n for n in doc["trace"] if "GammaBeta" in n)
    cache = EvidenceCache("NVIDIA H100 80GB HBM3", "580.159.04", root=tmp_path)
    cache.path.parent.mkdir(parents=True)
    old_key = "void GammaBetaBackwardCUDAKernelTemplate<float, float, 32u, 32u, 256u, 0, 1, 0>|1,1,1|32,32,1"
    cache.path.write_text(json.dumps({"schema": "nsighttc.evidence-cache/1", "gpu": cache.gpu, "driver": cache.driver,
                                      "programs": {}, "kernels": {old_key: {
                                          "name": gamma, "tensor_core": False, "dtype": None,
                                          "tc_flop_per_call": 0.0, "measured": "2026-11-24T16:00:00"}}}))
    again = EvidenceCache("NVIDIA H100 80GB HBM3", "580.159.04", root=tmp_path)
    ncu_name = next(n for n in doc["ncu"] if "GammaBeta" in n)
    found = again.lookup(pd.DataFrame({"name": [ncu_name], "grid": ["(1, 1, 1)"], "block": ["(32, 32, 1)"]}))
    assert len(found) == 1 and not found["tensor_core"].iloc[0]
    assert found["tc_flop"].iloc[0] == 0.0  # by its exact key and launch configuration, not a near name


def test_a_gated_program_leaves_when_nsighttc_is_gone(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('program ran')\n")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer exists
    argv = [sys.executable, "-m", "nsighttc.runtime.launch", "--annotate", "none", "--wait-for", str(tmp_path / "never"),
            "--", str(script)]
    r = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=60,
                       env={**os.environ, "NSIGHTTC_GATE_OWNER": str(dead.pid)})
    assert r.returncode == 0 and "program ran" not in r.stdout


def test_passed_stop_when_the_run_goes_past_a_kernel_it_did_not_choose():
    """First-launch order from a real timeline (the H200 multi-phase torch.profiler recording); the ncu run
    is replayed in that order with one GEMM never launched (cuBLAS chose another): the watcher stops once
    three later kernels were profiled, and never while the missing one could still come."""
    from nsighttc.analysis.tensor_cores import classify_launches
    from nsighttc.collect.hardware_pass import first_launch_order
    from nsighttc.parse import load
    launches = classify_launches(load(FIXTURES / "multi_phase_torch.json.xz").kernels)
    order = first_launch_order(launches)
    need = needs_hardware(launches)
    names = list(dict.fromkeys(need["name"]))
    by_rank = sorted(names, key=lambda n: order[leaf_name(n)])
    leaves = list(dict.fromkeys(leaf_name(n) for n in by_rank))
    assert len(leaves) >= 6
    skipped = leaves[1]
    weights = {n: (1.0 if leaf_name(n) == skipped else 100.0) for n in names}
    stops = []
    w = StopWhenCovered(names, stop=lambda: stops.append(1), weights=weights, order=order)
    later = sorted(order.values())
    for leaf in leaves:
        if leaf == skipped:
            continue
        w.on_line(f'==PROF== Profiling "{leaf}": 0%....50%....100% - 7 passes')
        if w.stopped:
            break
    assert stops == [1] and w.reason == "passed" and w.remaining == {n for n in names if leaf_name(n) == skipped}
    assert w.frontier >= order[skipped] + StopWhenCovered.PASSED_BY and w.covered_share >= 0.8
    assert len(later) == len(set(later))  # one rank per leaf


def test_no_passed_stop_without_an_order_or_with_most_time_missing():
    w = StopWhenCovered(["a_gemm", "b_gemm"], stop=lambda: None, weights={"a_gemm": 1.0, "b_gemm": 1.0},
                        order={"a_gemm": 0, "b_gemm": 1, "c_gemm": 2, "d_gemm": 9})
    w.on_line('==PROF== Profiling "d_gemm": 0%....50%....100% - 7 passes')  # far past both, nothing measured
    assert not w.stopped
    w2 = StopWhenCovered(["a_gemm", "b_gemm"], stop=lambda: None, weights={"a_gemm": 10.0, "b_gemm": 90.0})
    w2.on_line('==PROF== Profiling "b_gemm": 0%....50%....100% - 7 passes')
    assert not w2.stopped  # no timeline order: only coverage or the idle rule can stop


def test_the_stop_rule_counts_the_demangled_names_a_filtered_pass_prints():
    """A real filtered pass (``--kernel-name-base demangled``) prints ncu's demangling of each kernel, not the
    timeline's: the needed kernels of the real Trainer trace, chosen by the real pass's filter, are counted."""
    win = FIXTURES / "window"
    rx = _ecma_to_python((win / "h100_trainer_after_pass_kernel_name.txt").read_text().strip())
    names = load(win / "trainer_window_torch.json.xz").kernels["name"].astype(str).unique()
    needed = [n for n in names if rx.search(n)]
    log = (win / "h100_trainer_after_pass_ncu.log").read_text().splitlines()
    printed = [ln for ln in log if "==PROF== Profiling" in ln]
    assert needed and printed and all("(" in ln for ln in printed)  # demangled: parameters printed too
    stops = []
    w = StopWhenCovered(needed, stop=lambda: stops.append(w.reason))
    for line in log:
        w.on_line(line)
    assert w.profiled == len(printed)
    # every kernel the pass profiled was one it was filtered to: each covered a needed kernel of that name
    seen = {ncu_token(re.search(r'"([^"]+)"', ln).group(1)) for ln in printed}
    # what is left are exactly the needed kernels this run never launched (cuBLAS chose other GEMMs under ncu)
    assert w.covered == len(needed) - len(w.remaining) > 0
    assert w.remaining and not {ncu_token(n) for n in w.remaining} & seen, sorted(w.remaining)
    assert {ncu_token(n) for n in needed} - {ncu_token(n) for n in w.remaining} == seen


def test_a_run_whose_ncu_pass_measured_some_kernels_marks_every_ranks_others_as_asked_for(tmp_path):
    """The cache learns what every rank launched, not only the rank the verdict shows: a kernel the plan asked for
    on another rank that no pass measured is marked, so the cached run never launches the job again for it (2 x
    H200, a DDP job's cached run went back under Nsight Compute: "89% ncu earlier, 11% ncu in this run")."""
    from types import SimpleNamespace
    from nsighttc.profile.evidence import Outcome, missing_evidence, remember
    shown = classify_launches(load(RAW).kernels)       # the rank the verdict shows: measured by ncu
    other = needs_hardware(classify_launches(load(KINETO).kernels))  # another rank's kernels, never measured
    cache = EvidenceCache("NVIDIA H200", "580.159.03", root=tmp_path)
    ncu = SimpleNamespace(engine="ncu", returncode=0, log=tmp_path / "ncu.log", mode="ncu", window_events=[])
    out = Outcome(done=[ncu], cache=cache, program="job", planned_names=list(other["name"]))
    remember(out, SimpleNamespace(launches=shown), SimpleNamespace(label="job"))
    again = EvidenceCache("NVIDIA H200", "580.159.03", root=tmp_path)
    opts = SimpleNamespace(hardware=False, counters="tensor")
    names, cached, have, tried, missing = missing_evidence(other, Outcome(cache=again), opts)
    assert names and not missing  # found in the cache, or asked for before: nothing sends the job back under ncu
    assert tried and set(tried) | have == set(names)


def test_a_program_whose_only_missing_kernels_were_tried_before_is_covered(tmp_path):
    """A program whose kernels an earlier run measured, but for a few that an earlier ncu pass could not measure, is
    covered once its own run found nothing else to measure: its next run starts no replay beside the timeline for
    them (2 x H200, a DDP job after another program's runs: 3 such kernels kept it uncovered, and its cached run
    started the replay and stopped it again, 2 s of a 1.22x run)."""
    from types import SimpleNamespace
    from nsighttc.profile.evidence import Outcome, remember
    launches = classify_launches(load(KINETO).kernels)
    still = list(dict.fromkeys(needs_hardware(launches)["name"]))
    assert still
    cache = EvidenceCache("NVIDIA H200", "580.159.03", root=tmp_path)
    remember(Outcome(done=[], cache=cache, program="job"), SimpleNamespace(launches=launches),
             SimpleNamespace(label="job"))
    assert not EvidenceCache("NVIDIA H200", "580.159.03", root=tmp_path).program("job")["complete"]  # (not tried)
    cache = EvidenceCache("NVIDIA H200", "580.159.03", root=tmp_path)
    cache.add_unmeasured(still, "an earlier ncu pass")
    cache.save()
    cache = EvidenceCache("NVIDIA H200", "580.159.03", root=tmp_path)
    remember(Outcome(done=[], cache=cache, program="job"), SimpleNamespace(launches=launches),
             SimpleNamespace(label="job"))
    assert EvidenceCache("NVIDIA H200", "580.159.03", root=tmp_path).program("job")["complete"]
