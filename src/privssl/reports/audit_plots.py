"""Fig. 4 (ROC at low false-positive rates) and Fig. 5 (claimed ε against the audited lower
bound), from lira.csv, the lira rule's per-record scores and audit.csv only."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from privssl.attacks.statistics import roc
from privssl.release.methods import METHODS, REGISTRY
from privssl.reports.plotting import _datasets, _panels, fit_width, plt
from privssl.reports.release_table import nearest_eps

FIG4_EPS = (1.0, 100.0, 10000.0)  # columns of Fig. 4: the grid's ε nearest to these
NONE_STYLE = {"color": "black", "marker": None, "label": "no protection"}


def _style(method: str) -> dict:
    if method == "none":
        return NONE_STYLE
    entry = REGISTRY[method]
    return {"color": entry.colour, "marker": entry.marker, "label": entry.label}


def strongest_attacks(lira: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, method, ε), the adaptive attack with the highest TPR at the lowest FPR level
    of the table (ties: higher AUC)."""
    tpr_columns = sorted((c for c in lira.columns if c.startswith("tpr_at_") and c.endswith("pct_fpr")),
                         key=lambda c: float(c[len("tpr_at_"):-len("pct_fpr")]))
    if not tpr_columns:
        raise ValueError("lira.csv has no tpr_at_*pct_fpr column")
    adaptive = lira[lira.adaptive.astype(bool)].sort_values([tpr_columns[0], "auc"], ascending=False)
    return adaptive.drop_duplicates(["dataset", "method", "eps"], keep="first")


CURVE_KEY = ("dataset", "method", "eps", "attack", "adaptive")  # a lira.csv row, one ROC curve


def corners(fpr: np.ndarray, tpr: np.ndarray) -> np.ndarray:
    """Indices of the ROC points that are not inside a horizontal or vertical run: the step curve
    through them is the full curve, at a fraction of the points."""
    keep = np.ones(len(fpr), dtype=bool)
    inner = ((fpr[:-2] == fpr[1:-1]) & (fpr[1:-1] == fpr[2:])) | ((tpr[:-2] == tpr[1:-1]) & (tpr[1:-1] == tpr[2:]))
    keep[1:-1] = ~inner
    return np.flatnonzero(keep)


def roc_curves(scores: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """The full ROC curve (at its corners) of every lira.csv row in `points`, from its per-record
    scores in `scores` (artefacts.image.LIRA_SCORES): one column per CURVE_KEY, fpr, tpr."""
    curves = []
    for point in points.itertuples(index=False):
        key = {c: getattr(point, c) for c in CURVE_KEY}
        eps = scores.eps.isna() if point.method == "none" else np.isclose(scores.eps, point.eps)
        rows = scores[(scores.dataset == point.dataset) & (scores.method == point.method)
                      & (scores.attack == point.attack) & (scores.adaptive == bool(point.adaptive)) & eps]
        if rows.empty:
            raise ValueError(f"no per-record scores of the lira.csv row {key}")
        fpr, tpr, _ = roc(rows.score.to_numpy(), rows.member.to_numpy())
        kept = corners(fpr, tpr)
        curves.append(pd.DataFrame({**key, "fpr": fpr[kept], "tpr": tpr[kept]}))
    return pd.concat(curves, ignore_index=True)


def figure4(lira: pd.DataFrame, curves: pd.DataFrame) -> plt.Figure:
    """Log-log ROC of the strongest adaptive attack per method at a few ε (a column each), a row
    per dataset; the unprotected heads in black in every panel, chance as the diagonal. `curves`:
    roc_curves of (at least) strongest_attacks' rows."""
    best = strongest_attacks(lira)
    datasets = _datasets(lira)
    grid = sorted(e for e in lira.eps.dropna().unique() if e > 0)
    columns = list(dict.fromkeys(nearest_eps(grid, t) for t in FIG4_EPS)) if grid else [math.nan]
    fig, axes = _panels(len(datasets), len(columns), 4.2 * len(datasets) + 1.5)
    for row, dataset in enumerate(datasets):
        chosen = best[best.dataset == dataset]
        floor = 1.0 / chosen.n_nonmembers.max()
        for col, eps in enumerate(columns):
            ax = axes[row, col]
            for point in chosen.itertuples(index=False):
                if point.method != "none" and not np.isclose(point.eps, eps):
                    continue
                curve = curves[(curves.dataset == dataset) & (curves.method == point.method)
                               & (curves.attack == point.attack) & curves.adaptive.astype(bool)
                               & (curves.eps.isna() if point.method == "none" else np.isclose(curves.eps, point.eps))]
                style = _style(point.method)
                ax.step(curve.fpr.clip(lower=floor), curve.tpr.clip(lower=floor), where="post", color=style["color"],
                        label=f"{style['label']}: {point.attack}", gid=f"{point.method}:{point.attack}")
            ax.plot([floor, 1], [floor, 1], color="grey", ls=":", lw=0.8, label="chance")
            ax.set(xscale="log", yscale="log", xlim=(floor, 1), ylim=(floor, 1.05), xlabel="false-positive rate",
                   ylabel="true-positive rate", title=f"{dataset}, ε = {eps:g}")
            ax.legend(fontsize=6, loc="lower right")
    return fig


Y_LINEAR = 0.1  # Fig. 5's y axis: logarithmic above, linear below (a bound of 0 is a result too)


def figure5(audit: pd.DataFrame) -> plt.Figure:
    """Claimed ε (for each audit's adjacency: substitution for the black-box audits, add/remove
    for the DP-SGD head's gradient canary) against the audited lower bound, per
    method and audit; the strongest attack per (method, ε, audit); y = x drawn; points above it
    circled in red as violations; the unprotected head's bound as a dash-dot line. Each point's
    ceiling (its audit's bound were every decision right) is a grey dash above it, joined by a dotted
    line: a bound near 0 under a high ceiling is an audit that could have caught a leak and did not,
    under a ceiling near 0 an audit too small to prove anything. Both axes are logarithmic, the y
    axis linear below Y_LINEAR so that bounds of 0 stay drawn; the legend names each audit's
    threat model."""
    datasets = _datasets(audit)
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets) + 3.5, 5.2), squeeze=False,
                             layout="constrained")  # room on the right for the legend
    audits = sorted(audit.audit.unique())
    filled = "hypothesis_test" if "hypothesis_test" in audits else audits[0]  # the caption's filled marker
    markers = dict(zip(audits, ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p")))
    threat = audit.drop_duplicates("audit").set_index("audit").threat_model
    for ax, dataset in zip(axes[0], datasets):
        rows = audit[audit.dataset == dataset]
        best = rows.loc[rows.groupby(["method", "eps", "audit"], dropna=False).eps_lower_bound.idxmax()]
        released = best[(best.method != "none") & np.isfinite(best.claimed_eps)]  # ∞: no claim to test
        for (method, kind), group in released.groupby(["method", "audit"], sort=False):
            style = _style(method)
            ax.scatter(group.claimed_eps, group.eps_lower_bound, color=style["color"], marker=markers[kind],
                       facecolors="none" if kind != filled else style["color"], s=30,
                       gid=f"{method}:{kind}")
        ax.vlines(released.claimed_eps, released.eps_lower_bound, released.eps_ceiling, color="lightgrey", lw=0.6,
                  ls=":", zorder=0)
        ax.scatter(released.claimed_eps, released.eps_ceiling, marker="_", color="grey", s=60, linewidths=1,
                   label="ceiling: the bound were every decision right", gid="ceilings")
        violations = released[released.eps_lower_bound > released.claimed_eps]
        ax.scatter(violations.claimed_eps, violations.eps_lower_bound, s=140, facecolors="none", edgecolors="red",
                   linewidths=1.5, label=f"violation ({len(violations)})", gid="violations")
        for kind, group in best[best.method == "none"].groupby("audit"):
            strongest = group.loc[group.eps_lower_bound.idxmax()]
            ax.axhline(strongest.eps_lower_bound, color="black", ls="-.", lw=0.8,
                       label=f"no protection, {kind}: ε ≥ {strongest.eps_lower_bound:.2f} "
                             f"(ceiling {strongest.eps_ceiling:.2f})")
        top = max(1.0, float(max(best.eps_lower_bound.max(), released.eps_ceiling.max())) * 1.3)
        span = np.geomspace(released.claimed_eps.min() / 2, released.claimed_eps.max() * 2, 200)
        # On a log x axis y = x leaves the panel at x = top: shade where a point would violate its claim.
        ax.plot(span, span, color="grey", ls="--", lw=1, label="y = x (claim)")
        ax.fill_between(span, span, top, where=span < top, color="red", alpha=0.07, label="y > x: claim violated")
        ax.set(xscale="log", xlim=(span[0], span[-1]), ylim=(0, top), xlabel="claimed ε (the audit's adjacency)",
               ylabel=f"audited lower bound on ε (95 %; linear below {Y_LINEAR:g})", title=dataset)
        ax.set_yscale("symlog", linthresh=Y_LINEAR, linscale=0.5)
        for kind in audits:
            ax.scatter([], [], marker=markers[kind], color="dimgrey", facecolors="none" if kind != filled else None,
                       label=f"{kind} ({threat[kind].replace('_', ' ')})")
        for method in sorted(set(released.method), key=METHODS.index):
            ax.scatter([], [], marker="o", color=_style(method)["color"], label=_style(method)["label"])
    handles, labels = axes[0, -1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=7)
    fit_width(fig)
    return fig


def _lowest_tpr_column(frame: pd.DataFrame) -> str:
    columns = sorted((c for c in frame.columns if c.startswith("tpr_at_") and c.endswith("pct_fpr")),
                     key=lambda c: float(c[len("tpr_at_"):-len("pct_fpr")]))
    if not columns:
        raise ValueError("no tpr_at_*pct_fpr column")
    return columns[0]


def figure_references(references: pd.DataFrame) -> plt.Figure:
    """AUC and TPR at the lowest FPR level against the number of reference heads (log2), one line
    per attack with its interval as error bars, a row per dataset; chance dotted."""
    tpr = _lowest_tpr_column(references)
    level = float(tpr[len("tpr_at_"):-len("pct_fpr")]) / 100
    datasets = _datasets(references)
    fig, axes = _panels(len(datasets), 2, 3.6 * len(datasets) + 1.2)
    for row, dataset in enumerate(datasets):
        rows = references[references.dataset == dataset]
        for col, (metric, label, chance) in enumerate((("auc", "AUC", 0.5), (tpr, f"TPR at {level:g} FPR", level))):
            ax = axes[row, col]
            for i, (attack, group) in enumerate(rows.groupby("attack", sort=False)):
                group = group.sort_values("references")
                style = {"ls": "-" if attack.startswith("rmia") else "--", "marker": "os^vDP"[i % 6]}
                ax.errorbar(group.references, group[metric], yerr=[group[metric] - group[f"{metric}_lo"],
                                                                   group[f"{metric}_hi"] - group[metric]],
                            capsize=2, lw=1, ms=4, label=attack, gid=f"{metric}:{attack}", **style)
            ax.axhline(chance, color="grey", ls=":", lw=0.8, label="chance")
            ax.set(xscale="log", xlabel="reference (shadow) heads", ylabel=label, title=f"{dataset}: {label}")
            ax.xaxis.set_major_locator(plt.FixedLocator(sorted(rows.references.unique())))
            ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.legend(fontsize=6, loc="best")
    return fig


def references_markdown(references: pd.DataFrame) -> str:
    """The comparison as a Markdown table: per dataset and number of references, each attack's AUC
    and TPR at the lowest FPR level with their intervals and false positives."""
    tpr = _lowest_tpr_column(references)
    fp = "fp_at_" + tpr[len("tpr_at_"):]
    level = tpr[len("tpr_at_"):-len("pct_fpr")]
    lines = ["# LiRA and RMIA against the number of reference heads", "",
             "The unprotected target heads (T × pool decisions; intervals with the candidate record as the unit); "
             "RMIA's a chosen on all the shadows.", ""]
    for dataset, rows in references.groupby("dataset", sort=False):
        first = rows.iloc[0]
        lines += [f"## {dataset} ({int(first.n_members)} member and {int(first.n_nonmembers)} non-member decisions, "
                  f"{int(first.records)} records, {int(first.draws)} targets)", "",
                  f"| references | attack | AUC [95 %] | TPR at {level} % FPR [95 %] (false positives) |",
                  "|---:|---|---|---|"]
        for d in rows.sort_values(["references", "attack"]).to_dict("records"):  # "0.1pct": no attribute names
            lines.append(f"| {d['references']} | {d['attack']} | {d['auc']:.3f} [{d['auc_lo']:.3f}, {d['auc_hi']:.3f}] | "
                         f"{d[tpr]:.4f} [{d[tpr + '_lo']:.4f}, {d[tpr + '_hi']:.4f}] ({int(d[fp])}) |")
        lines.append("")
    return "\n".join(lines)
