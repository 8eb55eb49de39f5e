"""Kernel families settled as "no Tensor Cores" by measurement, and the Nsight Compute filter that leaves them
out. Its own module, without pandas: ``nsighttc profile`` builds ncu's command line before the program starts,
and importing the analysis stack first (~0.5-1 s) would delay the program by as much.
"""
from __future__ import annotations

# Families whose "no Tensor Cores" is settled by measurement (H200: hmma == hfma2 in every one of them):
# the ncu engine leaves them out of hardware profiling, which is most of what makes ncu slow.
NO_MATRIX_FAMILIES = ("elementwise", "reduce_kernel", "distribution_", "max_pool", "avg_pool", "adaptive_",
                      "nchwToNhwc", "nhwcToNchw", "splitKreduce", "copy_kernel", "fill_kernel",
                      "CatArrayBatchedCopy", "softmax", "layer_norm", "batch_norm", "index_", "gather_kernel",
                      "RadixSort", "randperm", "epilogue", "triton_poi_",
                      "triton_red_", "triton_per_",
                      # name rule "no" (reduce-pool-copy), and no tensor math measured on H100 (multi_phase's
                      # first run, reports/profile_overhead/default_run/multi_phase): 9 of its 32 profiles were these
                      "nll_loss", "multi_tensor_apply",
                      # rule cudnn-batchnorm: no tensor math measured on H100 (ResNet-50 AMP's replayed operators)
                      "bn_fw_", "bn_bw_", "init_device_workspace",
                      # rule cudnn-wgrad-reduce-amp-scale: no tensor math measured on H100 (same replay); 6 of its
                      # 66 profiles were these
                      "reduce_wgrad", "amp_update_scale",
                      # rule foreach-norm-cleanup: no tensor math measured on H100 (torch._foreach_norm); the
                      # replay cannot rebuild its TensorList, so a Trainer's first run ran the program under ncu
                      # for it (reports/window call19)
                      "lpnorm_cleanup",
                      # rules cudnn-nonmatrix and softmax-transpose-pad: no tensor math measured on H100 (known-kernel
                      # table) and on H200 (DDP ResNet-50 AMP's replays, reports/profile_overhead/torchrun_cost call 27:
                      # 4 of each replay's 63 profiles were cuDNN's padding of the 3-channel first layer's input)
                      "nhwcAddPaddingKernel",
                      "nccl")  # never replay a collective under ncu: the other ranks stall in it


def ncu_kernel_filter() -> str:
    """ncu ``--kernel-name`` value matching every kernel except the settled no-matrix families
    (ECMAScript negative lookahead; verified with ncu 2025.3.1 on H100: 50 -> 10 profiled configs on VGG16)."""
    return "regex:^(?!.*(" + "|".join(NO_MATRIX_FAMILIES) + ")).*"
