#!/usr/bin/env python
"""A_DA's AUC against the semi-supervised target's network width (issue 32, thesis Ch. 3's regime).

The thesis's A_DA reaches AUC 0.780 on FixMatch with a WRN-28-2 (1.5 M weights) after 2^20 steps;
the Fashion-MNIST preset trains a width-16 CNN (≈ 15 k weights) for 2000 steps. The preset's
report measures the trend against the steps (`semileak_report.steps_trend`); this script measures
the one against the width, with everything else the preset's: for each width it runs the
workflow's own Semi-Leak rules (`semileak_data`, `semileak_train`, `semileak_attack`) on the
preset config with `semileak.network.width` replaced, the chosen algorithms and the supervised
reference only (no defences: they are not what is measured), each in its own scratch copy of the
workflow, so the results of the preset are not touched. The splits, seeds and query records are
the same at every width (they derive from the config's seed, not from the width), so the AUCs of
one algorithm at different widths are paired on the same records: the slope per doubling of the
width has DeLong's interval (`privssl.attacks.paired_auc.log_step_slope`, with the width as x).

    python benchmarks/semileak_width.py --config configs/fashion.yaml --dataset fashion_mnist \\
        --widths 8 16 32 --algorithms flexmatch fixmatch --cores 2

Writes one row per (algorithm, width, checkpoint step) to --out (workflow_s: the seconds of this
call's Snakemake run for that width, near 0 where its results were already there), and prints the slope per doubling
of the width at the last step with the widths it would take to reach the thesis's 0.780 (a log-
scale extrapolation, like the steps trend's).
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import io
import tarfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from privssl.artefacts.semileak import load_semileak_metrics  # noqa: E402
from privssl.attacks.paired_auc import log_step_slope  # noqa: E402
from privssl.reports.semileak_report import THESIS_AUC, ada, of  # noqa: E402


def scratch_workflow(root: Path) -> None:
    """The committed workflow (git archive of HEAD) under `root`, its data folder the checkout's;
    results already there are kept (the run below judges them by their times only)."""
    root.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=REPO, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(root, filter="data")
    data = root / "data"
    if data.is_dir() and not data.is_symlink() and not any(data.iterdir()):
        data.rmdir()
    if not data.exists():
        data.symlink_to(REPO / "data")


def width_config(config: dict, dataset: str, width: int, algorithms: list[str]) -> dict:
    cfg = copy.deepcopy(config)
    section = cfg["semileak"]
    section["datasets"] = {dataset: section["datasets"][dataset]}
    section["algorithms"] = list(algorithms)
    section["network"]["width"] = width
    section["repeats"] = 1  # one training per width: a sizing, not a verdict
    section["defences"] = {"early_stopping": section["defences"]["early_stopping"], "top1": False}
    return cfg


def run_width(scratch: Path, config: dict, dataset: str, width: int, algorithms: list[str], cores: int) -> tuple:
    root = scratch / f"width{width}"
    scratch_workflow(root)
    cfg_path = root / "width.yaml"
    cfg_path.write_text(yaml.safe_dump(width_config(config, dataset, width, algorithms), sort_keys=False))
    metrics, scores = (f"results/{dataset}/semileak/repeat0/{name}" for name in ("metrics.csv", "scores.parquet"))
    start = time.perf_counter()
    # --rerun-triggers mtime: a finished width is not retrained because the workflow copy is newer
    subprocess.run([sys.executable, "-m", "snakemake", metrics, "--cores", str(cores), "--rerun-triggers", "mtime",
                    "--replace-workflow-config", "--configfile", cfg_path.name], cwd=root, check=True)
    # each row's ranks from its scores, as the Semi-Leak report reads them
    return load_semileak_metrics([root / metrics], [root / scores]), time.perf_counter() - start


def width_slopes(rows: pd.DataFrame) -> pd.DataFrame:
    out = []
    for algorithm, own in rows.groupby("target", sort=False):
        last = own[own.step == own.step.max()].sort_values("width")
        if len(last) < 2:
            continue
        members = int(last.n_members.iloc[0])
        slope = log_step_slope(list(last.ranks), last.width, members)
        top = last.iloc[-1]

        def reach(per_doubling: float) -> float:
            if top.auc >= THESIS_AUC:
                return float(top.width)
            return float(top.width * 2 ** ((THESIS_AUC - top.auc) / per_doubling)) if per_doubling > 0 else np.inf

        out.append({"target": algorithm, "step": int(top.step), "widths": " ".join(str(int(w)) for w in last.width),
                    "aucs": " ".join(f"{a:.3f}" for a in last.auc), "slope_per_doubling": slope.value,
                    "slope_lo": slope.lo, "slope_hi": slope.hi, "width_to_thesis": reach(slope.value),
                    "width_to_thesis_lo": reach(slope.hi), "width_to_thesis_hi": reach(slope.lo)})
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(REPO / "configs" / "fashion.yaml"))
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--widths", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--algorithms", nargs="+", default=["flexmatch", "fixmatch"])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--scratch", default="/tmp/semileak_width")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "semileak_width.csv"))
    args = parser.parse_args()
    config = yaml.safe_load(Path(args.config).read_text())
    if args.dataset not in config["semileak"]["datasets"]:
        sys.exit(f"--dataset {args.dataset!r} is not in {args.config}'s semileak.datasets; allowed: "
                 f"{', '.join(config['semileak']['datasets'])}")
    if min(args.widths) < 1 or len(set(args.widths)) != len(args.widths):
        sys.exit(f"--widths {args.widths}: allowed: distinct positive integers")
    rows = []
    for width in args.widths:
        metrics, seconds = run_width(Path(args.scratch), config, args.dataset, width, args.algorithms, args.cores)
        curve = ada(metrics[(metrics.defence == "none") & (metrics.member_kind == "all")])
        for algorithm in [*args.algorithms, "supervised"]:
            own = of(curve, algorithm, defence="none", member_kind="all")
            rows.append(own.assign(width=width, workflow_s=seconds))
    rows = pd.concat(rows, ignore_index=True)
    keep = ["dataset", "target", "width", "step", "auc", "auc_lo", "auc_hi", "n_members", "n_nonmembers",
            "workflow_s"]
    rows[keep].to_csv(args.out, index=False)
    slopes = width_slopes(rows[rows.target.isin(args.algorithms)])
    print(rows[keep].to_string(index=False))
    print(slopes.to_string(index=False))


if __name__ == "__main__":
    main()
