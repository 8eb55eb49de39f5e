"""The global switches a replayed call is made under (``nsighttc.runtime.replay``): what the kernel choice depends on
but the recorded call does not carry. Standard library only besides torch (this runs in the replay's process)."""
from __future__ import annotations

# fp32 convolutions whose cuDNN TF32 choice comes from the global flag (``torch.backends.cudnn.allow_tf32``), not from
# an argument the call records (``aten::_convolution``, ``aten::cudnn_convolution`` and the transposed one carry
# ``allow_tf32``). Seen on the H200 (torch 2.11, wrappers/grad_accum.py, which sets the flag off as fp32 programs do):
# the replay's ``aten::convolution_backward`` ran TF32 kernels (``sm90_xmma_dgrad_..._tf32f32``, ``..._wgrad_...``)
# where the program had run ``dgrad_engine``, ``wgrad_alg0_engine``, FFT and Winograd kernels, so 5 of its 13 kernels
# were left to the program's own ncu pass: 10.5-11.3 s of a 29-32 s first run against a 19-22 s plain run
# (reports/profile_overhead/first_run_2026-11-29).
CUDNN_GLOBAL_TF32_OPS = frozenset({"aten::convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d",
                                   "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
                                   "aten::convolution_backward", "aten::convolution_overrideable"})
MATMUL_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::matmul",
                        "aten::linear", "aten::_addmm_activation"})


def settings(call: dict) -> list[dict]:
    """Global switches the kernel choice depends on but the call does not record: fp32 matmuls are run with
    TF32 off and on (``torch.backends.cuda.matmul.allow_tf32``), fp32 convolutions that read cuDNN's flag with it
    off and on (``torch.backends.cudnn.allow_tf32``); the kernel names then tell which ran (kernels are matched by
    exact name, so the other setting's kernels are profiled and left unused)."""
    if "float" not in call["types"]:
        return [{}]
    if call["name"] in MATMUL_OPS:
        return [{"tf32": False}, {"tf32": True}]
    if call["name"] in CUDNN_GLOBAL_TF32_OPS:
        return [{"cudnn_tf32": False}, {"cudnn_tf32": True}]
    return [{}]


class set_globals:
    """The switches of one of ``settings``, set around one call and put back after it."""

    def __init__(self, torch, s: dict):
        self.torch, self.s = torch, s

    def __enter__(self):
        b = self.torch.backends
        self.prev = (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32)
        if "tf32" in self.s:
            b.cuda.matmul.allow_tf32 = self.s["tf32"]
        if "cudnn_tf32" in self.s:
            b.cudnn.allow_tf32 = self.s["cudnn_tf32"]

    def __exit__(self, *exc):
        b = self.torch.backends
        b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = self.prev
        return False
