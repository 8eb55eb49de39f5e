"""GPU check (issue 10): does cuDNN pick its kernel by the data pointers' alignment? ResNet-50 AMP's 1x1
convolutions ran cutlass ``..._nn_align2`` kernels in the program but other kernels when replayed on fresh,
aligned storage. Calls each recorded ``aten::cudnn_convolution`` of the replay list on storage shifted by
0, 1, 2, 4 elements and prints the kernels torch.profiler saw.

    python3 benchmarks/probes/gpu_replay_alignment_probe.py tests/fixtures/replay_ops_resnet_amp.json
"""
import json
import sys

import torch

from nsighttc.runtime import replay_args

calls = [c for c in json.load(open(sys.argv[1])) if c["name"] == "aten::cudnn_convolution"]
orig = replay_args.make_tensor
for shift in (0, 1, 2, 4):
    def shifted(torch_, dtype_name, dims, strides, device, _s=shift):
        t = orig(torch_, dtype_name, [d for d in dims], strides, device)
        if _s == 0 or t.dim() == 0:
            return t
        base = torch_.empty(t.untyped_storage().nbytes() // t.element_size() + _s, device=device, dtype=t.dtype)
        out = base.as_strided(t.shape, t.stride(), _s)
        out.copy_(t)
        return out
    replay_args.make_tensor = shifted
    for c in calls:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            replay_args.call_op(torch, c, torch.device("cuda"))
            torch.cuda.synchronize()
        names = sorted({e.name for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA})
        print(f"shift {shift} dims {c['dims'][:2]} wanted {[k[:60] for k in c['kernels']]}")
        print(f"    got {[n[:60] for n in names]}")
