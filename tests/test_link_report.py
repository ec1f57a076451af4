"""The link-stealing summary: mean ± std over runs, joined with the thesis's number for the same cell."""

import numpy as np
import pandas as pd
import pytest

from privssl.graphs.link_report import headline, markdown, summarise


def rows() -> pd.DataFrame:
    out = []
    for run, (a0, a3, a1) in enumerate([(0.90, 0.95, 0.91), (0.92, 0.97, 0.93)]):
        out += [
            {"dataset": "cora", "shadow": None, "attack": "attack-0", "feature_set": "posteriors",
             "distance": "correlation", "run": run, "auc": a0, "precision": 0.8, "recall": 0.9, "f1": 0.85},
            {"dataset": "cora", "shadow": None, "attack": "attack-0", "feature_set": "posteriors",
             "distance": "canberra", "run": run, "auc": a0 - 0.2, "precision": 0.6, "recall": 0.9, "f1": 0.7},
            {"dataset": "cora", "shadow": None, "attack": "attack-2", "feature_set": "attributes",
             "distance": "cosine", "run": run, "auc": 0.8, "precision": 0.6, "recall": 0.9, "f1": 0.7},
            {"dataset": "cora", "shadow": None, "attack": "attack-3", "feature_set": "posteriors",
             "distance": None, "run": run, "auc": a3, "precision": 0.9, "recall": 0.9, "f1": 0.9},
            {"dataset": "cora", "shadow": "citeseer", "attack": "attack-1", "feature_set": "posteriors",
             "distance": None, "run": run, "auc": a1, "precision": 0.9, "recall": 0.9, "f1": 0.9},
        ]
    return pd.DataFrame(out)


def cell(summary, **keys):
    match = summary
    for key, value in keys.items():
        match = match[match[key] == value]
    assert len(match) == 1, match
    return match.iloc[0]


def test_mean_and_std_over_runs():
    summary = summarise(rows())
    attack_3 = cell(summary, attack="attack-3")
    assert attack_3.runs == 2
    assert attack_3.auc_mean == pytest.approx(0.96)
    assert attack_3.auc_std == pytest.approx(np.std([0.95, 0.97], ddof=1))


def test_thesis_numbers_join_the_matching_cell():
    summary = summarise(rows())
    # Table 5.5 (Attack-3, Cora), Table 5.14 (Attack-0 correlation, Cora), Table 5.3 (Cora, shadow Citeseer)
    assert cell(summary, attack="attack-3").thesis_auc == pytest.approx(0.954)
    assert cell(summary, attack="attack-0", distance="correlation").thesis_auc == pytest.approx(0.929)
    assert cell(summary, attack="attack-1").thesis_source == "Table 5.3"
    assert np.isnan(cell(summary, attack="attack-0", distance="canberra").thesis_auc)


def test_headline_keeps_correlation_and_best_rows():
    table = headline(summarise(rows()))
    zero = table[table.attack.str.startswith("attack-0")]
    assert list(zero.attack) == ["attack-0", "attack-0 (best)"]
    assert set(zero.distance) == {"correlation"}  # correlation is also the best distance here
    assert "| cora | attack-3 |" in markdown(table)
