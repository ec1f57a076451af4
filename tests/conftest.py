"""Suite-wide settings: one thread per test process, and the order in which `make test`'s two
xdist workers take the test modules.

One thread: the tests' tensors are small, and on a shared two-core machine a second intra-op
thread only adds synchronisation and spinning (the LiRA over-fitting test takes 52 s on every
thread, 2.9 s on one). The environment variables are set before torch or numpy is imported, so
OpenMP and BLAS pools start at one thread, and they carry over to the Snakemake subprocesses of
the workflow tests (whose jobs then run one per core); torch.set_num_threads and threadpoolctl
cover a library that was loaded first anyway.

Order: `make test` runs `pytest -n 2 --dist loadfile --no-loadscope-reorder`, so every module
stays on one worker (its module-scoped fixtures are built once) and the workers take modules in
collection order. The longest modules go first, longest first: test_tiny_run.py (the whole DAG
on the tiny config, by far the longest) on one worker while the other starts on the next ones,
so that the short modules are left for the end, where they fill whichever worker is free. (In
alphabetical order test_workflow.py, ~75 s, came last and ran alone for its last ~50 s while
the other worker, done with the tiny DAG, had nothing left to take.) (xdist's `loadgroup` would
be finer, but it renames node ids in a way pytest 9 ignores.)
"""

import os

for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[variable] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

torch.set_num_threads(1)
threadpool_limits(limits=1)

# measured on 2 cores (pytest --durations, summed per module), longest first
LONGEST_FIRST = ("test_tiny_run.py", "test_workflow.py", "test_resources.py", "test_certified.py",
                 "test_figure_canvas.py", "test_dpsgd_accountants.py", "test_dpcl_accounting.py")


def pytest_collection_modifyitems(config, items):
    # stable: every worker collects the same order, as xdist requires
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))


@pytest.fixture(scope="session")
def session_folder(tmp_path_factory):
    """A folder of this test session that every xdist worker sees (their own temporary folders
    are siblings in it), for work one worker does and the other reuses; pytest clears it with
    the rest of its old temporary folders."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
