"""The malloc settings every job starts with (privssl.job_env): applied without overriding a
user's own, and effective on this machine's glibc for the allocation pattern of a training step."""

import os
import subprocess
import sys

from privssl.job_env import MALLOC_SETTINGS, apply

# rounds of 50 blocks of 256 KiB allocated, touched and freed together, as a training step's
# tensors are: glibc's default trims the freed heap top after each round and faults it in again
ROUNDS = """
import resource
import numpy as np
for _ in range(100):
    blocks = [np.ones(32768) for _ in range(50)]
    del blocks
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
"""
# an attack's inference loop: one 64 MiB activation (a batch of 2048 images through a convolution)
# allocated, touched and freed per batch; above glibc's largest mmap threshold (32 MiB), mapped anew
# each time unless no block is mapped. In 4 KiB pages, as torch's allocator takes them: numpy asks
# for transparent huge pages above 4 MiB unless told not to
LARGE_BLOCKS = """
import os
os.environ["NUMPY_MADVISE_HUGEPAGE"] = "0"
import resource
import numpy as np
for _ in range(30):
    block = np.ones(8 * 2**20)
    del block
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
"""


def minor_faults(env: dict, program: str = ROUNDS) -> int:
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_apply_sets_each_setting_once_and_keeps_a_users_own():
    environ = {"MALLOC_TRIM_THRESHOLD_": "12345", "PATH": "/bin"}
    assert apply(environ) == {"MALLOC_MMAP_THRESHOLD_": str(32 * 2**20), "MALLOC_TRIM_THRESHOLD_": "12345",
                              "MALLOC_MMAP_MAX_": "0"}
    assert environ["PATH"] == "/bin" and set(MALLOC_SETTINGS) <= set(environ)


def test_the_settings_stop_a_training_steps_blocks_faulting_in_again():
    """A tenth of the page faults or fewer with the settings: a misspelt name (MALLOC_TRIM_THRESHOL_
    leaves 320,000 faults here) or a value this glibc ignores would leave the default's faults."""
    bare = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    default, kept = minor_faults(bare), minor_faults({**bare, **MALLOC_SETTINGS})
    assert default > 100_000, default  # the pattern does fault under glibc's defaults here
    assert kept * 10 < default, (kept, default)


def test_the_settings_stop_an_inference_loops_large_blocks_faulting_in_again():
    """30 batches' 64 MiB blocks: every one faults its 16,384 pages in under glibc's defaults and
    under a fixed 32 MiB mmap threshold alone; with no block mapped, only the first does."""
    bare = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    default, kept = minor_faults(bare, LARGE_BLOCKS), minor_faults({**bare, **MALLOC_SETTINGS}, LARGE_BLOCKS)
    assert default > 30 * 16_384 * 0.9, default  # the pattern does fault under glibc's defaults here
    assert kept * 10 < default, (kept, default)
