"""The report and merge scripts read CSV and JSON files only, so they import no torch: its import
alone costs a job ~2 s of CPU on this project's CUDA build, and these scripts are a fifth of a
run's jobs. A module they import that pulled torch in at its top would fail this test."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REPORT_SCRIPTS = ["merge_csv", "make_table1", "make_table2", "claims_ledger", "results_digest", "plot_figures",
                  "plot_audit", "plot_graph_protection", "contrastive_report", "semileak_report",
                  "training_time_report", "link_table"]
# each script's imports, as `--help` runs them, in one fresh process; the first to import torch is named
PROBE = """
import contextlib, io, runpy, sys
for script in sys.argv[1:]:
    sys.argv = [script, "--help"]
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit:
            pass
    if "torch" in sys.modules:
        sys.exit(f"{script} imports torch")
"""


def test_the_report_scripts_import_no_torch():
    proc = subprocess.run([sys.executable, "-c", PROBE, *(str(REPO / "scripts" / f"{s}.py") for s in REPORT_SCRIPTS)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
