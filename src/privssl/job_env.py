"""The environment every job of the workflow starts with, beyond PATH and PYTHONPATH.

glibc's malloc hands freed blocks back to the kernel: above its mmap threshold by munmap, and the
top of the heap by trimming it once the free top exceeds the trim threshold (both start at 128 KiB
and only grow with the sizes freed, the mmap threshold to 32 MiB at most). A training allocates
and frees its per-step tensors in every step, so each step faults the same pages in again: a
Semi-Leak training on the Fashion-MNIST preset spent 12.3 s of its 37.9 s in the kernel (8.7
million minor faults), and the preset's whole run 1861 s of 7315 s of CPU. A fixed mmap threshold
of 32 MiB and a 4 GiB trim threshold keep the freed blocks in the heap for the next step: the same
bytes out, the preset's run 53 min instead of 66 (docs/presets.md). Blocks above 32 MiB were still
mapped and unmapped on every call: an attack that queries a network batch after batch (the
label-only attacks, A_DA's views, the robust accuracy's noisy networks) ran its batches of 2048
Fashion-MNIST images through Semi-Leak's CNN at 4.3x the time per image of batches of 64, and the
contrastive encoder's at 2.0x (benchmarks/inference_batch.py). `MALLOC_MMAP_MAX_=0` maps no block:
every batch size runs at the small batches' speed, the outputs bit for bit the same; the preset's
system CPU fell from 1184 s to 335 s. The price is memory kept: the fixed thresholds raised peak
RSS up to 1.25x for some jobs (DPAdapter's; benchmarks/malloc_env.py); with no block mapped, freed
large blocks fragment the heap, and the preset's peaks rose 1.0-2.0x, median 1.25x (the head's
tuning 2.0x, the contrastive attacks 1.6x to 3.7 GB; benchmarks/fashion_peaks.csv). Torch-free
and stdlib-only: the Snakefile applies it before any job starts, so that every job, the
warm-start server (privssl.warm) and a cluster job's own Snakemake inherit it.
"""

from __future__ import annotations

from typing import MutableMapping

MALLOC_SETTINGS = {
    "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),  # bytes; fixed, so the trim threshold stays as set
    "MALLOC_TRIM_THRESHOLD_": str(4 * 2**30),
    "MALLOC_MMAP_MAX_": "0",  # no block mapped, however large: freed ones stay in the heap too
}


def apply(environ: MutableMapping[str, str]) -> dict[str, str]:
    """Set each malloc setting the environment does not set already (a user's own value wins);
    return the settings now in force."""
    for name, value in MALLOC_SETTINGS.items():
        environ.setdefault(name, value)
    return {name: environ[name] for name in MALLOC_SETTINGS}
