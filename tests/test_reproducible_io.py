"""Byte-reproducible, group-readable outputs: the same object written to two paths, or by another
process a second later, gives the same bytes (.pt, .csv.gz, .csv, .parquet, .json, .pdf, .png); the
.pt still loads with weights_only=True; files get 0o666 less the umask, not mkstemp's 0o600."""

import gzip
import os
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from privssl.io import (  # noqa: E402
    atomic_path,
    atomic_torch_save,
    atomic_write_csv,
    atomic_write_json,
    atomic_write_parquet,
)
from privssl.reports.plotting import save_figure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("state.pt", "roc.csv.gz", "table.csv", "scores.parquet", "splits.json", "figure.pdf", "figure.png")


def tensors() -> dict:
    g = torch.Generator().manual_seed(0)
    return {"weight": torch.randn(7, 5, generator=g), "index": torch.arange(11), "spec": {"width": 16, "lr": 1e-3},
            "history": [{"epoch": 1, "loss": 2.5}]}


def frame() -> pd.DataFrame:
    return pd.DataFrame({"method": ["laplace", "gaussian"] * 50, "fpr": [i / 100 for i in range(100)],
                         "tpr": [(i / 100) ** 0.5 for i in range(100)]})


def figure() -> plt.Figure:
    fig, ax = plt.subplots(figsize=(3, 2), layout="constrained")  # save_figure refuses a cut label
    ax.plot([0.1, 1, 10], [0.2, 0.5, 0.9], marker="o", label="ε-DP Laplace")
    ax.set_xscale("log")
    ax.set_xlabel("ε")
    ax.set_title("TPR at FPR 10⁻³")
    ax.legend()
    return fig


def write_all(directory: Path, prefix: str) -> None:
    """Every kind of output, under names that start with `prefix` (the writers must not record them)."""
    atomic_torch_save(tensors(), directory / f"{prefix}state.pt")
    atomic_write_csv(frame(), directory / f"{prefix}roc.csv.gz")
    atomic_write_csv(frame(), directory / f"{prefix}table.csv")
    atomic_write_parquet(frame(), directory / f"{prefix}scores.parquet")
    atomic_write_json({"dataset": "digits", "splits": {"pretrain": [3, 1, 2]}}, directory / f"{prefix}splits.json")
    save_figure(figure(), [str(directory / f"{prefix}figure.pdf"), str(directory / f"{prefix}figure.png")])


def differing(first: Path, second: Path, prefix: str = "") -> list[str]:
    """The outputs whose bytes differ between `first` and `second` (where they carry `prefix`)."""
    return [n for n in NAMES if (first / n).read_bytes() != (second / f"{prefix}{n}").read_bytes()]


def test_same_object_same_bytes_at_other_paths(tmp_path):
    write_all(tmp_path / "a", "")
    write_all(tmp_path / "b" / "deeper", "a-much-longer-prefix-")
    assert differing(tmp_path / "a", tmp_path / "b" / "deeper", "a-much-longer-prefix-") == []


def test_same_bytes_from_another_process_later(tmp_path):
    """Another interpreter (other hash seed, object ids) writing over a second later: no time of
    writing (PDF CreationDate, gzip mtime have one-second resolution) and nothing per-process."""
    write_all(tmp_path / "here", "")
    written = time.time()
    child = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from test_reproducible_io import write_all
        time.sleep(max(0.0, {written} + 1.5 - time.time()))
        write_all(Path({str(tmp_path / "there")!r}), "")
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg", "PYTHONHASHSEED": "12345"}
    env.pop("SOURCE_DATE_EPOCH", None)  # the writers must not rely on it
    subprocess.run([sys.executable, "-c", child], check=True, env=env)
    assert differing(tmp_path / "here", tmp_path / "there") == []


def test_pt_loads_weights_only_with_a_fixed_root_record(tmp_path):
    atomic_torch_save(tensors(), tmp_path / "x.pt")
    with zipfile.ZipFile(tmp_path / "x.pt") as archive:
        assert {name.split("/")[0] for name in archive.namelist()} == {"archive"}
    loaded = torch.load(tmp_path / "x.pt", weights_only=True)
    expected = tensors()
    assert torch.equal(loaded["weight"], expected["weight"]) and torch.equal(loaded["index"], expected["index"])
    assert loaded["spec"] == expected["spec"] and loaded["history"] == expected["history"]


def test_csv_gz_header_has_no_name_and_no_time(tmp_path):
    atomic_write_csv(frame(), tmp_path / "roc.csv.gz")
    raw = (tmp_path / "roc.csv.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    flags, mtime = raw[3], int.from_bytes(raw[4:8], "little")
    assert not flags & 0x08 and mtime == 0  # RFC 1952: FNAME flag, MTIME field
    assert gzip.decompress(raw) == frame().to_csv(index=False).encode()
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "roc.csv.gz"), frame())


def test_figure_formats_other_than_pdf_png_are_refused(tmp_path):
    with pytest.raises(ValueError, match="fig.svg"):
        save_figure(figure(), [str(tmp_path / "fig.svg")])
    assert not list(tmp_path.iterdir())


@pytest.fixture
def umask():
    """Set a umask for the test; the process's own comes back afterwards."""
    saved = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(saved)


@pytest.mark.parametrize("mask, mode", [(0o027, 0o640), (0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_outputs_get_the_umask_mode(tmp_path, umask, mask, mode):
    umask(mask)
    write_all(tmp_path, "")
    with open(tmp_path / "plain.txt", "w"):  # what an ordinary open() gives, for comparison
        pass
    assert (tmp_path / "plain.txt").stat().st_mode & 0o777 == mode
    assert {n: oct((tmp_path / n).stat().st_mode & 0o777) for n in NAMES} == dict.fromkeys(NAMES, oct(mode))
    with atomic_path(tmp_path / "table.md") as tmp:
        tmp.write_text("| a |\n")
    assert (tmp_path / "table.md").stat().st_mode & 0o777 == mode


def test_umask_without_proc_is_read_and_kept(tmp_path, umask, monkeypatch):
    """Where /proc/self/status cannot be read, the umask is read by setting it, and restored."""
    umask(0o027)
    read_text = Path.read_text

    def no_proc(self, *args, **kwargs):
        if str(self) == "/proc/self/status":
            raise FileNotFoundError(self)
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", no_proc)
    atomic_write_json({"a": 1}, tmp_path / "a.json")
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640
    assert os.umask(0o027) == 0o027


def test_sigterm_during_an_atomic_write_leaves_no_temporary_file(tmp_path):
    """scancel sends SIGTERM: the script exits through its cleanup, removing the temporary file.

    The script waits in short sleeps, as a job's Python loop returns to the interpreter between
    its steps: Python runs a signal's handler in the main thread only, and the kernel may hand a
    process's SIGTERM to another of its threads (one that torch's import started), which would not
    interrupt one long sleep of the main thread (the test once waited out its 30 s that way)."""
    import signal
    import subprocess
    import sys
    import time

    code = ("import sys, time; from privssl.io import atomic_path, script_logger; script_logger('t')\n"
            "with atomic_path(sys.argv[1]) as tmp:\n"
            "    tmp.write_text('half'); print('writing', flush=True)\n"
            "    for _ in range(600): time.sleep(0.1)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "out.csv")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    time.sleep(0.1)
    assert list(tmp_path.iterdir()) == [], f"left behind: {list(tmp_path.iterdir())}"
