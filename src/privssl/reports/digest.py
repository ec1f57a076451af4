"""The run's digest (`results/digest.md`): every headline figure of a run in one Markdown page,
each beside the file and column it comes from, so that a document quoting the run (docs/results.md
is the default run's digest, copied by `make docs`) cannot drift from what the run wrote.

It computes nothing new: values are copied from the run's files, or averaged over the draws of a
release (said where they are), and the tables that other rules write in Markdown are included
whole. Estimates keep their intervals and decision counts as the files give them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from privssl.attacks.statistics import accuracy_interval
from privssl.release.methods import release_method

PROVEN = ("pure_dp", "approx_dp")  # claims an audit bound above them would contradict


def fmt(value: float) -> str:
    """Three decimals below 10, up to six significant digits above (ε = 100000, Δ1 = 1603.4); ∞ and
    NaN spelt out."""
    if isinstance(value, float) and math.isnan(value):
        return "n/a"
    if math.isinf(value):
        return "∞"
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.6g}"


def eps_text(eps: float) -> str:
    """An ε of the grid as the config writes it (0.1, 1, 100000); ∞ for a noise-free limit."""
    return "∞ (no noise)" if math.isinf(eps) else f"{eps:g}"


def interval(row: pd.Series, column: str) -> str:
    return f"{fmt(row[column])} [{fmt(row[f'{column}_lo'])}, {fmt(row[f'{column}_hi'])}]"


def source(path: str, columns: str, rows: str = "") -> str:
    where = f", rows {rows}" if rows else ""
    return f"*Source: `{path}`{where}; columns {columns}.*"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def clean_head(dataset: str, metrics: dict, mia: pd.DataFrame, lira: pd.DataFrame) -> str:
    """The non-private head's accuracy and every attack on it, with intervals and counts."""
    run = f"{dataset}/finetune/metrics.json"
    lines = [f"### {dataset}", "",
             f"Non-private head: train accuracy {fmt(metrics['train_accuracy'])}, test accuracy "
             f"{fmt(metrics['test_accuracy'])}, |d| = {metrics['finetune_size']}. "
             + source(f"results/{run}", "`train_accuracy`, `test_accuracy`, `finetune_size`"), ""]
    rows = []
    for _, row in mia[mia.mechanism == "none"].sort_values("attack").iterrows():
        rows.append([f"paper: `{row.attack}`", interval(row, "accuracy"), interval(row, "auc"),
                     f"{interval(row, 'tpr_at_1pct_fpr')} ({row['fp_at_1pct_fpr']})",
                     f"{row.n_members} + {row.n_nonmembers}"])
    for _, row in lira[lira.method == "none"].sort_values(["attack", "adaptive"]).iterrows():
        rows.append([f"LiRA: `{row.attack}`", interval(row, "accuracy"), interval(row, "auc"),
                     f"{interval(row, 'tpr_at_1pct_fpr')} ({row['fp_at_1pct_fpr']})",
                     f"{row.n_members} + {row.n_nonmembers}"])
    lines += [markdown_table(["attack on the non-private head", "accuracy [95 %]", "AUC [95 %]",
                              "TPR at 1 % FPR [95 %] (false positives)", "members + non-members"], rows), "",
              source(f"results/{dataset}/mia.csv", "`accuracy*`, `auc*`, `tpr_at_1pct_fpr*`, `fp_at_1pct_fpr`, "
                     "`n_members`, `n_nonmembers`", "`mechanism == none`")
              + " " + source(f"results/{dataset}/lira.csv", "the same", "`method == none`")]
    return "\n".join(lines)


def pooled_accuracy(accuracies, n_test: int) -> tuple[float, float, float, int]:
    """(accuracy, lo, hi, n): every draw's answers on the n_test test images pooled, with the
    Clopper–Pearson interval of the pooled count (each accuracy is a count over n_test)."""
    correct = np.rint(np.asarray(accuracies, float) * n_test)
    if not np.allclose(correct, np.asarray(accuracies, float) * n_test, atol=1e-6):
        raise ValueError(f"accuracies {list(accuracies)} are not counts over {n_test} test images")
    n = n_test * len(correct)
    return (*accuracy_interval(int(correct.sum()), n), n)


def release_accuracy(dataset: str, utility: pd.DataFrame, n_test: int) -> str:
    """Test accuracy of every release method at every ε, pooled over its draws, with its interval,
    and its noise-free limit (ε = ∞: an output-perturbation method's head without noise is one
    head, counted once; DP-SGD's σ = 0 trainings are independent draws)."""
    grid = sorted(utility.eps.unique())
    rows = []
    for method, rows_of in utility.groupby("mechanism", sort=False):
        kinds = "/".join(dict.fromkeys(rows_of[np.isfinite(rows_of.eps)].guarantee_kind))
        by_eps = dict(tuple(rows_of.groupby("eps")))
        if math.inf in by_eps and release_method(method).release == "output_perturbation":
            by_eps[math.inf] = by_eps[math.inf].head(1)
        cells = []
        for e in grid:
            if e in by_eps:
                acc, lo, hi, n = pooled_accuracy(by_eps[e].accuracy, n_test)
                cells.append(f"{fmt(acc)} [{fmt(lo)}, {fmt(hi)}] ({n})")
            else:
                cells.append("")
        rows.append([f"`{method}`", kinds, *cells])
    clean, lo, hi, n = pooled_accuracy([utility.clean_accuracy.iloc[0]], n_test)
    drops = accuracy_drops(utility, n_test)
    falls = ("Accuracy falls as ε grows, beyond the intervals (disjoint 95 % intervals), at: "
             + "; ".join(f"`{m}` from ε = {eps_text(a)} to {eps_text(b)} ({fmt(x)} → {fmt(z)})"
                         for m, a, b, x, z in drops)
             + " (docs/tuning.md says why it can)." if drops else
             "No method's accuracy falls as ε grows by more than its interval (consecutive ε of each method, "
             "disjoint 95 % intervals).")
    return "\n".join([
        f"### {dataset}", "",
        f"Test accuracy with its Clopper–Pearson 95 % interval and (decisions): every draw's answers on the "
        f"{n_test} test images pooled; the non-private head: {fmt(clean)} [{fmt(lo)}, {fmt(hi)}] ({n}).", "",
        markdown_table(["method", "guarantee kind", *[f"ε = {eps_text(float(e))}" for e in grid]], rows), "",
        falls, "",
        source(f"results/{dataset}/utility.csv", "`accuracy` (pooled over `repeat`), `guarantee_kind`, "
               "`clean_accuracy`") + " " + source(f"results/{dataset}/splits.json", "the size of `splits.test`")])


def accuracy_drops(utility: pd.DataFrame, n_test: int) -> list[tuple[str, float, float, float, float]]:
    """(method, ε, next ε, accuracy, next accuracy) wherever a method's pooled test accuracy at
    the next larger ε of its grid (its noise-free limit included) lies below the interval at ε,
    the two 95 % intervals disjoint: a fall that the draws' variation does not explain."""
    drops = []
    for method, rows_of in utility.groupby("mechanism", sort=False):
        once = release_method(method).release == "output_perturbation"
        points = []
        for eps, draws in sorted(rows_of.groupby("eps"), key=lambda item: item[0]):
            points.append((eps, *pooled_accuracy((draws.head(1) if once and math.isinf(eps) else draws).accuracy,
                                                 n_test)))
        for (eps, acc, lo, _, _), (after, acc_after, _, hi_after, _) in zip(points, points[1:]):
            if hi_after < lo:
                drops.append((method, float(eps), float(after), acc, acc_after))
    return drops


def audits(dataset: str, audit: pd.DataFrame) -> str:
    """Per method, ε and audit: the claimed ε and the largest 95 % lower bound over attacks, beside
    that row's ceiling (the bound were every decision right); a bound above a proven claim is
    flagged as a violation."""
    best = (audit.sort_values("eps_lower_bound", ascending=False, kind="stable")
            .drop_duplicates(["method", "eps", "audit"]).sort_values(["method", "eps", "audit"], kind="stable"))
    rows = []
    for _, row in best.iterrows():
        violation = row.guarantee_kind in PROVEN and row.eps_lower_bound > row.claimed_eps
        eps = "n/a" if math.isnan(row.eps) else eps_text(row.eps)
        rows.append([f"`{row.method}`", eps, row.guarantee_kind, fmt(row.claimed_eps), f"`{row.audit}`",
                     fmt(row.eps_lower_bound), fmt(row.eps_ceiling),
                     f"`{row.attack}`{' (adaptive)' if row.adaptive else ''}", str(row.n),
                     "**violation**" if violation else ""])
    return "\n".join([
        f"### {dataset}", "",
        "The largest audited lower bound over attacks, per method, ε and audit, beside the claim under "
        "substitution of one record (the audits' adjacency). The ceiling is the largest bound the audit "
        "could prove at its n (every decision right): a bound near 0 says little where the ceiling is low too.", "",
        markdown_table(["method", "ε", "guarantee kind", "claimed ε (substitution)", "audit", "ε lower bound (95 %)",
                        "ceiling", "attack", "n", ""], rows), "",
        source(f"results/{dataset}/audit.csv", "`claimed_eps`, `eps_lower_bound` (maximum over `attack`, "
               "`adaptive`), `eps_ceiling` (of that row), `n`, `guarantee_kind`")])


def link_protection(graph: str, table: pd.DataFrame) -> str:
    """Attack-0 (correlation distance) and Attack-3 AUC against the graph's unprotected and noisy heads."""
    chosen = table[(table.attack == "attack-3") | ((table.attack == "attack-0") & (table.distance == "correlation"))]
    grid = sorted(chosen.eps.dropna().unique())
    rows = []
    for (method, attack), rows_of in chosen.groupby(["mechanism", "attack"], sort=False):
        if method == "none":
            cells = [fmt(rows_of.auc.mean())] + [""] * (len(grid) - 1)
        else:
            stats = rows_of.groupby("eps").auc.agg(["mean", "std", "size"])
            cells = [f"{fmt(stats.loc[e, 'mean'])} ± {fmt(stats.loc[e, 'std'])} ({stats.loc[e, 'size']})"
                     if e in stats.index else "" for e in grid]
        rows.append([f"`{method}`", attack, *cells])
    return "\n".join([
        f"### Protection of links: {graph}", "",
        "Link-stealing AUC against the GNN head: mean ± std over noise draws (draws); `none`: the "
        "unprotected head, any ε. Each AUC rests on the graph's attack pairs (all edges and as many "
        "non-edges; see graphs.md).", "",
        markdown_table(["method", "attack", *[f"ε = {eps_text(float(e))}" for e in grid]], rows), "",
        source(f"results/{graph}/link_protection.csv", "`auc` (mean and std over `repeat`)",
               "attack-0 with `distance == correlation`, attack-3")])


def included(title: str, path: str, text: str, level: int = 2) -> str:
    """A Markdown table another rule wrote, included whole under its title."""
    return "\n".join([f"{'#' * level} {title}", "", f"*Included whole from `{path}`.*", "", text.strip()])


HEADER = """# Results of the run

Generated by the rule `digest` (`scripts/results_digest.py`) from this run's own files: every figure
below names the file and column it comes from, and nothing here is typed by hand. The default run's
digest is `docs/results.md` (`make docs` copies it). Intervals are 95 %; differences inside them
are not findings."""
