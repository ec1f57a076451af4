"""The run's digest (`results/digest.md`): every headline figure of a run in one Markdown page,
each beside the file and column it comes from, so that a document quoting the run (docs/results.md
is the default run's digest, copied by `make docs`) cannot drift from what the run wrote.

It computes nothing new: values are copied from the run's files, or averaged over the draws of a
release with an interval clustered by record (said where they are), and the tables that other
rules write in Markdown are included whole. Estimates keep their intervals and counts.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from privssl.release.methods import release_method
from privssl.reports.decisions import estimate, paired
from privssl.reports.release_table import test_accuracy

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


def _release_rows(rows_of: pd.DataFrame, eps: float, draws: pd.DataFrame) -> pd.DataFrame:
    """An output-perturbation method's noise-free limit is one head (the same in every draw):
    counted once; every other release's draws are its draws."""
    once = release_method(rows_of.mechanism.iloc[0]).release == "output_perturbation" and math.isinf(eps)
    return draws.head(1) if once else draws


def _check_test_size(utility: pd.DataFrame, n_test: int) -> None:
    sizes = sorted(set(utility.n_test.astype(int)))
    if sizes != [n_test]:
        raise ValueError(f"utility.csv decides {sizes} test records per row, the splits' test set has {n_test}")


def release_accuracy(dataset: str, utility: pd.DataFrame, n_test: int) -> str:
    """Test accuracy of every release method at every ε over its draws, with its 95 % interval
    clustered by test record (privssl.reports.release_table.test_accuracy), and its noise-free
    limit (ε = ∞: an output-perturbation method's head without noise is one head, counted once;
    DP-SGD's σ = 0 trainings are independent draws)."""
    _check_test_size(utility, n_test)
    grid = sorted(utility.eps.unique())
    rows = []
    for method, rows_of in utility.groupby("mechanism", sort=False):
        kinds = "/".join(dict.fromkeys(rows_of[np.isfinite(rows_of.eps)].guarantee_kind))
        by_eps = dict(tuple(rows_of.groupby("eps")))
        cells = []
        for e in grid:
            if e in by_eps:
                accuracy = test_accuracy(_release_rows(rows_of, e, by_eps[e]))
                cells.append(f"{fmt(accuracy.value)} [{fmt(accuracy.lo)}, {fmt(accuracy.hi)}] ({accuracy.draws})")
            else:
                cells.append("")
        rows.append([f"`{method}`", kinds, *cells])
    post_hoc = utility[utility.clean_decisions.notna()]
    clean = estimate(post_hoc.head(1), "n_test", "clean_decisions") if not post_hoc.empty else None
    clean_text = ("" if clean is None else
                  f"; the non-private head: {fmt(clean.value)} [{fmt(clean.lo)}, {fmt(clean.hi)}]")
    drops = accuracy_drops(utility)
    falls = ("Accuracy falls as ε grows, beyond the interval of the difference (paired on the test records), at: "
             + "; ".join(f"`{m}` from ε = {eps_text(a)} to {eps_text(b)} ({fmt(x)} → {fmt(z)})"
                         for m, a, b, x, z in drops)
             + " (docs/tuning.md says why it can)." if drops else
             "No method's accuracy falls as ε grows beyond the interval of the difference (consecutive ε of each "
             "method, paired on the test records).")
    return "\n".join([
        f"### {dataset}", "",
        f"Test accuracy with its 95 % interval clustered by test record and (draws): every draw decides the same "
        f"{n_test} test images, so the images are the independent units{clean_text}.", "",
        markdown_table(["method", "guarantee kind", *[f"ε = {eps_text(float(e))}" for e in grid]], rows), "",
        falls, "",
        source(f"results/{dataset}/utility.csv", "`decisions` (over `repeat`), `clean_decisions`, "
               "`guarantee_kind`") + " " + source(f"results/{dataset}/splits.json", "the size of `splits.test`")])


def accuracy_drops(utility: pd.DataFrame) -> list[tuple[str, float, float, float, float]]:
    """(method, ε, next ε, accuracy, next accuracy) wherever a method's test accuracy at the next
    larger ε of its grid (its noise-free limit included) lies below its accuracy at ε beyond the
    95 % interval of their difference, paired on the test records: a fall that the draws' and the
    records' variation do not explain."""
    drops = []
    for method, rows_of in utility.groupby("mechanism", sort=False):
        points = [(eps, _release_rows(rows_of, eps, draws)) for eps, draws in
                  sorted(rows_of.groupby("eps"), key=lambda item: item[0])]
        for (eps, at), (after, at_after) in zip(points, points[1:]):
            d = paired(at_after, at, "n_test")
            if d.hi < 0:
                drops.append((method, float(eps), float(after), test_accuracy(at).value, test_accuracy(at_after).value))
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
                     row.threat_model.replace("_", " "),
                     fmt(row.eps_lower_bound), fmt(row.eps_ceiling),
                     f"`{row.attack}`{' (adaptive)' if row.adaptive else ''}", str(row.n),
                     "**violation**" if violation else ""])
    return "\n".join([
        f"### {dataset}", "",
        "The largest audited lower bound over attacks, per method, ε and audit, beside the claim for the "
        "audit's adjacency: substitution of one record for the black-box audits and the certified heads' "
        "crafted pair (final model), addition or removal for the DP-SGD head's gradient canary (white box with "
        "every update; final model). The ceiling is the largest bound the audit could prove at its n (every "
        "decision right; for the parametric bounds, the claim): a bound near 0 says little where the ceiling is "
        "low too.", "",
        markdown_table(["method", "ε", "guarantee kind", "claimed ε", "audit", "threat model", "ε lower bound (95 %)",
                        "ceiling", "attack", "n", ""], rows), "", *_crafted_pair(audit),
        source(f"results/{dataset}/audit.csv", "`claimed_eps`, `eps_lower_bound` (maximum over `attack`, "
               "`adaptive`), `eps_ceiling` (of that row), `n`, `guarantee_kind`, `threat_model`")])


def _crafted_pair(audit: pd.DataFrame) -> list[str]:
    """What caps the certified heads' crafted-pair audits: the share of the proven Δ2 the pair
    reaches, and the ε a perfect test of the pair would show (Gaussian noise)."""
    if "pair_fraction" not in audit.columns or audit.pair_fraction.isna().all():
        return []
    crafted = audit[audit.pair_fraction.notna()]
    first = crafted.iloc[0]
    shown = crafted[crafted.eps_of_pair.notna()] if "eps_of_pair" in crafted.columns else crafted.iloc[:0]
    perfect = "; ".join(f"`{r.method}` at ε = {eps_text(r.eps)}: {fmt(r.eps_of_pair)}" for r in shown.itertuples())
    return [f"The crafted pair ({first.pair_design}) moves the certified head ‖W_d − W_d'‖ = "
            f"{first.pair_distance:.4g}, {first.pair_fraction:.3f} of the proven Δ2 = {first.sensitivity:.4g}"
            + (f"; a perfect test of this pair would show ε = {perfect}" if perfect else "") + ".", ""]


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


def section(title: str, path, text: str, level: int = 2) -> str:
    """A table of the run under its title, built here from the files it is computed from (the
    same table as `path`, which the digest does not read)."""
    return "\n".join([f"{'#' * level} {title}", "", f"*Built from this run's checked inputs, as `{path}` is.*", "",
                       text.strip()])


HEADER = """# Results of the run

Generated by the rule `digest` (`scripts/results_digest.py`) from this run's own files: every figure
below names the file and column it comes from, every table is built here from the files it is
computed from (checked as its report rule checks them, never copied from another rule's page), and
nothing here is typed by hand. The default run's digest is `docs/results.md` (`make docs` copies
it). Intervals are 95 %; differences inside them are not findings."""
