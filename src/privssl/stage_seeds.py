"""Each stage's seed, from the config seed and the stage's name alone.

A stage's randomness must not depend on which other stages or methods exist. Derived from a
position in a list of stages (the workflow's scheme until issue 51), registering one release
method shifted the seeds of every stage listed after it: Semi-Leak's models retrained and its
figures changed when a noise mechanism was added. A hash of (config seed, name) leaves every other
stage's seed, and so its outputs, byte-identical when a stage or method comes or goes.

SHA-256 rather than `hash()`, which Python salts per process; stdlib only, because the Snakefile
imports this before any job runs.
"""

from __future__ import annotations

import hashlib
import re

# Stage seeds stay below 2**31: scripts derive sub-seeds as seed * 1_000_003 + epoch (< 2**52) and
# seed + offsets, all within torch.manual_seed's and NumPy's ranges.
SEED_BITS = 31
STAGE_NAME = re.compile(r"[a-z][a-z0-9_]*")


def stage_seed(config_seed: int, stage: str) -> int:
    """The seed of stage `stage` (e.g. "pretrain", "protect_alm") of a run with config seed
    `config_seed`: the top SEED_BITS bits of SHA-256("privssl/<config seed>/<stage>")."""
    if isinstance(config_seed, bool) or not isinstance(config_seed, int) or config_seed < 0:
        raise ValueError(f"config seed {config_seed!r}: allowed a non-negative integer")
    if not isinstance(stage, str) or not STAGE_NAME.fullmatch(stage):
        raise ValueError(f"stage name {stage!r}: allowed lower-case letters, digits and _, starting with a letter")
    digest = hashlib.sha256(f"privssl/{config_seed}/{stage}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - SEED_BITS)


def repeat_seed(config_seed: int, stage: str, repeat: int) -> int:
    """The seed of one repeat (independent training) of `stage`: repeat 0 keeps the stage's own
    seed, repeat r > 0 is the seed of the name `<stage>_repeat<r>`, so no two repeats share one."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 0:
        raise ValueError(f"repeat {repeat!r}: allowed a non-negative integer")
    return stage_seed(config_seed, stage if repeat == 0 else f"{stage}_repeat{repeat}")
