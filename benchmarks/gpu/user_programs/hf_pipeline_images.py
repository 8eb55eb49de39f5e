"""Image classification through a transformers ``pipeline``, one image a call, as its docs' first example shows.

A ViT-base classifier (random weights from its config: the GPU machine reaches no model hub) in fp16 on the GPU, fed
photos of several sizes (PIL images, 480x360 to 1280x960) one at a time: ``pipe(image)`` per image. The pipeline's
``preprocess`` resizes and normalises each image in numpy on the host, then the model runs, then ``postprocess`` reads
the scores back (a sync). The GPU idles while the host prepares each image.

    python3 hf_pipeline_images.py                             # as written: one image a call
    python3 hf_pipeline_images.py --batch-size 32 --workers 8 # the pipeline's own batching and DataLoader workers
    python3 hf_pipeline_images.py --trace T.json              # the loop recorded by torch.profiler by hand

Prints ``images/s`` over the timed images (after --warmup calls).
"""
from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=240)
    ap.add_argument("--warmup", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=None, help="pass the images as one list with this batch size")
    ap.add_argument("--workers", type=int, default=None, help="DataLoader workers of the pipeline (with a list)")
    ap.add_argument("--trace", default=None, help="record the timed images with torch.profiler into this file")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()

    import numpy as np
    import torch
    from PIL import Image
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor, pipeline

    rng = np.random.default_rng(0)
    sizes = [(480, 360), (640, 480), (800, 600), (1024, 768), (1280, 960)]
    photos = [Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)) for w, h in sizes]
    images = [photos[i % len(photos)] for i in range(a.images + a.warmup)]

    dtype = torch.float16 if a.device == "cuda" else torch.float32
    model = ViTForImageClassification(ViTConfig(num_labels=1000)).to(dtype)
    pipe = pipeline("image-classification", model=model, image_processor=ViTImageProcessor(), device=a.device,
                    dtype=dtype)

    def run(batch):
        if a.batch_size or a.workers:
            kw = {"batch_size": a.batch_size or 1}
            if a.workers is not None:
                kw["num_workers"] = a.workers
            return pipe(batch, **kw)
        return [pipe(img) for img in batch]

    run(images[:a.warmup])
    if a.device == "cuda":
        torch.cuda.synchronize()
    prof = None
    if a.trace:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                  torch.profiler.ProfilerActivity.CUDA], with_stack=True)
        prof.start()
    t0 = time.perf_counter()
    out = run(images[a.warmup:])
    if a.device == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    if prof is not None:
        prof.stop()
        prof.export_chrome_trace(a.trace)
    print(f"{len(out)} images in {dt:.2f} s: {len(out) / dt:.1f} images/s", flush=True)


if __name__ == "__main__":
    main()
