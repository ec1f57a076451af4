"""The link-stealing results as the thesis reports them: mean ± std AUC over runs per
(graph, shadow graph, attack, feature set, distance), beside the thesis's number for the same
cell where the thesis gives one (`thesis_reference`)."""

from __future__ import annotations

import pandas as pd

from privssl.graphs.thesis_reference import PROJECT_NAMES, reference_rows

KEYS = ["dataset", "shadow", "attack", "feature_set", "distance"]


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over runs of AUC, precision, recall and F1, with the thesis's AUC."""
    rows = rows.assign(shadow=rows.shadow.fillna(""), distance=rows.distance.fillna(""))
    stats = rows.groupby(KEYS, sort=False).agg(
        runs=("run", "nunique"), auc_mean=("auc", "mean"), auc_std=("auc", "std"),
        precision_mean=("precision", "mean"), recall_mean=("recall", "mean"), f1_mean=("f1", "mean")).reset_index()
    return stats.merge(thesis_auc(), on=["dataset", "shadow", "attack", "distance"], how="left")


def thesis_auc() -> pd.DataFrame:
    """The thesis's AUCs under the project's graph names; Attack-0 cells name their distance,
    Attack-3 and 6 cells none, transfer cells their shadow graph."""
    to_project = {thesis: project for project, thesis in PROJECT_NAMES.items()}
    reference = pd.DataFrame([r for r in reference_rows() if r["metric"] == "auc" and r["attack"] != "attack-2"])
    reference = reference[reference.dataset.isin(to_project)]
    # A transfer cell whose shadow graph is not one of the project's stays unmatched.
    reference = reference[reference.shadow.isna() | reference.shadow.isin(to_project)]
    return pd.DataFrame({
        "dataset": reference.dataset.map(to_project), "shadow": reference.shadow.map(to_project).fillna(""),
        "attack": reference.attack, "distance": reference.distance.fillna(""),
        "thesis_auc": reference["value"], "thesis_std": reference["std"], "thesis_source": reference["source"],
    }).drop_duplicates(["dataset", "shadow", "attack", "distance"])


def headline(summary: pd.DataFrame) -> pd.DataFrame:
    """One line per (graph, attack[, shadow]) for the Markdown table: Attack-0 with the
    correlation distance (the thesis's Table 5.14) and with its best distance, Attack-2's best
    information type and distance, Attack-3 and 6, and each transfer attack per shadow graph."""
    parts = [summary[(summary.attack == "attack-0") & (summary.distance == "correlation")]]
    for attack in ("attack-0", "attack-2"):
        rows = summary[summary.attack == attack]
        parts.append(rows.loc[rows.groupby("dataset", sort=False).auc_mean.idxmax()].assign(
            attack=f"{attack} (best)"))
    parts.append(summary[~summary.attack.isin(["attack-0", "attack-2"])])
    order = {name: i for i, name in enumerate(dict.fromkeys(summary.dataset))}
    table = pd.concat(parts, ignore_index=True)
    return table.sort_values(["dataset", "attack", "shadow"], key=lambda c: c.map(order) if c.name == "dataset" else c,
                             kind="stable").reset_index(drop=True)


def markdown(table: pd.DataFrame) -> str:
    lines = ["| graph | attack | shadow | feature set | distance | AUC (mean ± std) | thesis AUC | source |",
             "|---|---|---|---|---|---:|---:|---|"]
    for r in table.itertuples():
        thesis = "" if pd.isna(r.thesis_auc) else (
            f"{r.thesis_auc:.3f}" + ("" if pd.isna(r.thesis_std) else f" ± {r.thesis_std:.3f}"))
        std = 0.0 if pd.isna(r.auc_std) else r.auc_std
        lines.append(f"| {r.dataset} | {r.attack} | {r.shadow} | {r.feature_set} | {r.distance} "
                     f"| {r.auc_mean:.3f} ± {std:.3f} | {thesis} | {'' if pd.isna(r.thesis_source) else r.thesis_source} |")
    runs = int(table.runs.max()) if len(table) else 0
    return "\n".join(lines) + (f"\n\nMean ± std over {runs} runs (a new target GCN, labelled nodes and attack "
                               "dataset each). The thesis's numbers are its 5-run means on its own splits.\n")
