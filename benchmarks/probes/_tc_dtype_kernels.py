"""A few kernels of known Tensor Core use, for metric probes (benchmarks/probes/gpu_ncu_passes_probe.sh): fp16, bf16
and TF32 GEMMs, an fp32 GEMM with TF32 off (CUDA cores), an fp16 conv, and an elementwise kernel."""
import torch

torch.backends.cuda.matmul.allow_tf32 = False
a = torch.randn(1024, 1024, device="cuda")
for dt in (torch.float16, torch.bfloat16):
    x = a.to(dt)
    (x @ x).sum()
(a @ a).sum()                                   # fp32, TF32 off: FFMA
torch.backends.cuda.matmul.allow_tf32 = True
(a @ a).sum()                                   # TF32
img = torch.randn(8, 64, 56, 56, device="cuda", dtype=torch.float16)
w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.float16)
torch.nn.functional.conv2d(img, w, padding=1).relu_()
torch.cuda.synchronize()
