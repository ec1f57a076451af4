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


def minor_faults(env: dict) -> int:
    out = subprocess.run([sys.executable, "-c", ROUNDS], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_apply_sets_each_setting_once_and_keeps_a_users_own():
    environ = {"MALLOC_TRIM_THRESHOLD_": "12345", "PATH": "/bin"}
    assert apply(environ) == {"MALLOC_MMAP_THRESHOLD_": str(32 * 2**20), "MALLOC_TRIM_THRESHOLD_": "12345"}
    assert environ["PATH"] == "/bin" and set(MALLOC_SETTINGS) <= set(environ)


def test_the_settings_stop_a_training_steps_blocks_faulting_in_again():
    """A tenth of the page faults or fewer with the settings: a misspelt name (MALLOC_TRIM_THRESHOL_
    leaves 320,000 faults here) or a value this glibc ignores would leave the default's faults."""
    bare = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    default, kept = minor_faults(bare), minor_faults({**bare, **MALLOC_SETTINGS})
    assert default > 100_000, default  # the pattern does fault under glibc's defaults here
    assert kept * 10 < default, (kept, default)
