"""A_DA's AUC against Semi-Leak's training steps: how fast the leak grows, and how many steps its
line would need to reach the thesis's AUC (an extrapolation, with the slope's interval)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privssl.attacks.paired_auc import log_step_slope
from privssl.attacks.repeated import over_trainings
from privssl.reports.contrastive_report import difference_text, interval_text
from privssl.reports.semileak_pooling import training_fingerprints, trainings_of
from privssl.reports.semileak_report import THESIS_AUC, ada, algorithms, estimate_of, of


TREND_COLUMNS = ["dataset", "target", "trainings", "steps", "aucs", "auc_last", "auc_last_lo", "auc_last_hi",
                 "n_members", "slope_per_doubling", "slope_lo", "slope_hi", "thesis_auc", "steps_to_thesis",
                 "steps_to_thesis_lo", "steps_to_thesis_hi"]


def steps_trend(metrics: pd.DataFrame) -> pd.DataFrame:
    """A_DA's AUC (all members, no defence) against the training steps, per dataset and algorithm
    with two or more checkpoints: the least-squares slope per doubling of the steps with DeLong's
    interval (every checkpoint is queried on the same records: privssl.attacks.paired_auc), and the
    steps at which that line would reach the thesis's AUC from the last checkpoint. The steps are an
    extrapolation on a log scale, with the slope's interval (the last AUC's own is left out); inf
    where the slope's edge is not above 0 (no rise measured, no number of steps implied); the last
    step where the last AUC already reaches the thesis's. Several trainings: the slope, the AUCs
    and the last AUC are their means, with over_trainings' intervals; `trainings` counts the
    independent ones (trainings_of), and a copied model's curve is pooled once."""
    fingerprints = training_fingerprints(metrics)
    out, trainings = [], trainings_of(fingerprints)
    for dataset in dict.fromkeys(metrics.dataset):
        own = metrics[metrics.dataset == dataset]
        for algorithm in algorithms(own):
            distinct = {fingerprints[dataset, algorithm, None, int(r)]: int(r)
                        for r in sorted(own.repeat.unique(), reverse=True)}  # the first repeat of each training
            curves = [ada(of(training, algorithm, defence="none", member_kind="all")).sort_values("step")
                      for repeat, training in own.groupby("repeat", sort=True) if int(repeat) in distinct.values()]
            curves = [c for c in curves if not c.empty]
            curve = curves[0]
            if (curve.step.nunique() != len(curve) or len(curve) < 2
                    or any(list(c.step) != list(curve.step) for c in curves)):
                continue
            members = int(curve.n_members.iloc[0])
            slope = over_trainings([log_step_slope(list(c.ranks), c.step, members) for c in curves])
            last = over_trainings([estimate_of(c.iloc[-1]) for c in curves])
            aucs = np.mean([c.auc.to_numpy() for c in curves], axis=0)
            last_step_ = int(curve.step.iloc[-1])

            def reach(per_doubling: float) -> float:
                if last.value >= THESIS_AUC:  # reached: nothing to extrapolate
                    return float(last_step_)
                if per_doubling <= 0:
                    return np.inf
                return float(last_step_ * 2 ** ((THESIS_AUC - last.value) / per_doubling))

            out.append({"dataset": dataset, "target": algorithm, "trainings": trainings[dataset, algorithm, None],
                        "steps": " ".join(f"{s:d}" for s in curve.step), "aucs": " ".join(f"{a:.3f}" for a in aucs),
                        "auc_last": last.value, "auc_last_lo": last.lo, "auc_last_hi": last.hi, "n_members": members,
                        "slope_per_doubling": slope.value, "slope_lo": slope.lo, "slope_hi": slope.hi,
                        "thesis_auc": THESIS_AUC, "steps_to_thesis": reach(slope.value),
                        "steps_to_thesis_lo": reach(slope.hi), "steps_to_thesis_hi": reach(slope.lo)})
    return pd.DataFrame(out, columns=TREND_COLUMNS)


def _steps_text(steps: float) -> str:
    return "∞" if np.isinf(steps) else f"2^{np.log2(steps):.1f}"


def trend_markdown(trend: pd.DataFrame) -> str:
    """The steps trend as a Markdown section (empty when no target has two checkpoints)."""
    if trend.empty:
        return ""
    lines = ["", "A_DA's AUC (all members, no defence) against the training steps: the slope per doubling of the "
             "steps (least squares on log2 steps, DeLong's interval: every checkpoint on the same records), and the "
             f"steps at which that line would reach the thesis's {THESIS_AUC:.3f} (FixMatch, WRN-28-2, CIFAR-10, "
             "2^20 steps) from the last checkpoint, an extrapolation whose range is the slope's interval's (∞: no "
             "rise measured).", "",
             "| dataset | target | trainings | steps | A_DA AUC at each | last [95 % CI] (members) "
             "| AUC per doubling [95 % CI] | steps to the thesis's AUC [range] |",
             "|---|---|---:|---|---|---:|---:|---:|"]
    for r in trend.itertuples(index=False):
        lines.append(f"| {r.dataset} | {r.target} | {r.trainings} | {r.steps} | {r.aucs} "
                     f"| {interval_text(r.auc_last, r.auc_last_lo, r.auc_last_hi, r.n_members)} "
                     f"| {difference_text(r.slope_per_doubling, r.slope_lo, r.slope_hi)} "
                     f"| {_steps_text(r.steps_to_thesis)} [{_steps_text(r.steps_to_thesis_lo)}, "
                     f"{_steps_text(r.steps_to_thesis_hi)}] |")
    return "\n".join(lines) + "\n"
