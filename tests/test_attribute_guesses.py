"""The contrastive attribute rows' per-record guesses (contrastive/attribute_guesses.parquet): the
loader gives each attribute row its attack's and its baseline's decisions from the guesses, and
refuses guesses that are not the rows' (artefacts.contrastive.load_contrastive)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privssl.artefacts.contrastive import (
    CONTRASTIVE_GUESSES,
    contrastive_guess_table,
    contrastive_score_table,
    load_contrastive,
)
from privssl.artefacts.specs import ArtefactError
from privssl.artefacts.tables import load_csv_file
from privssl.attacks.statistics import clopper_pearson
from privssl.io import atomic_write_csv, atomic_write_parquet, pack_decisions, unpack_decisions

MEMBERS = [7, 3, 11, 5, 0, 9]  # pool indices of the target's members, in splits.json's order
ATTRIBUTE = np.array([0, 1, 2, 1, 1, 0])  # each member's attribute
MAJORITY = 1  # the auxiliary set's most frequent attribute: right on 3 of 6
N_TEST = 4


def row(target: str, lam: float, repeat: int, inference: str, attack: str, accuracy: float, n: int) -> dict:
    """A metrics.csv row of the contrastive table (membership rows: AUC and TPR; attribute rows: the baseline)."""
    attribute = inference == "attribute"
    lo, hi = clopper_pearson(round(accuracy * n), n)
    baseline = (ATTRIBUTE == MAJORITY).mean() if attribute else np.nan
    b_lo, b_hi = clopper_pearson(3, len(ATTRIBUTE)) if attribute else (np.nan, np.nan)
    membership = np.nan if attribute else 0.5
    count = np.nan if attribute else n // 2
    return {"dataset": "digits", "target": target, "lambda": lam, "repeat": repeat, "inference": inference,
            "attack": attack, "task_accuracy": 0.5, "task_accuracy_lo": 0.1, "task_accuracy_hi": 0.9,
            "n_test": N_TEST, "task_decisions": pack_decisions(np.array([True, False, True, False])),
            "n": n, "accuracy": accuracy, "accuracy_lo": lo, "accuracy_hi": hi,
            **{f"queried_{s}_accuracy{e}": membership for s in ("train", "test") for e in ("", "_lo", "_hi")},
            "auc": membership, "auc_lo": membership, "auc_hi": membership, "n_members": count,
            "n_nonmembers": count, "tpr_at_1pct_fpr": membership, "tpr_at_1pct_fpr_lo": membership,
            "tpr_at_1pct_fpr_hi": membership, "fp_at_1pct_fpr": count,
            "baseline": baseline, "baseline_lo": b_lo, "baseline_hi": b_hi}


GUESSES = {("supervised", np.nan): np.array([0, 1, 0, 1, 2, 2]),  # right on records 0, 1, 3: 3 of 6
           ("contrastive", 0.0): np.array([0, 1, 2, 1, 1, 1])}  # right on 5 of 6


def written(tmp_path, guesses: dict = GUESSES) -> tuple[list, list, list]:
    """metrics.csv (per model a membership row and an attribute row), the membership rows' scores
    and the attribute rows' guesses, as contrastive_attack writes them."""
    rows, scored, guessed = [], [], []
    member = np.arange(12) < 6
    for (target, lam), guess in guesses.items():
        calls = np.arange(12) < 4
        rows.append(row(target, lam, 0, "membership", "nn", (calls == member).mean(), 12))
        scored.append((rows[-1], calls.astype(float), calls))
        rows.append(row(target, lam, 0, "attribute", "attribute_mlp", (guess == ATTRIBUTE).mean(), len(ATTRIBUTE)))
        guessed.append((rows[-1], guess, MAJORITY))
    splits = {"target_train": MEMBERS, "target_test": list(range(20, 26))}
    paths = [tmp_path / "metrics.csv", tmp_path / "scores.parquet", tmp_path / "guesses.parquet"]
    atomic_write_csv(pd.DataFrame(rows), paths[0])
    atomic_write_parquet(contrastive_score_table(scored, splits), paths[1])
    atomic_write_parquet(contrastive_guess_table(guessed, splits, ATTRIBUTE.tolist()), paths[2])
    return [[str(p)] for p in paths]


def test_each_attribute_rows_decisions_are_its_guesses_against_the_attributes(tmp_path):
    loaded = load_contrastive(*written(tmp_path))
    attribute = loaded[loaded.inference == "attribute"]
    assert len(attribute) == 2
    for r, guess in zip(attribute.itertuples(index=False), GUESSES.values(), strict=True):  # in the file's order
        np.testing.assert_array_equal(unpack_decisions(r.decisions, 6), guess == ATTRIBUTE)
        np.testing.assert_array_equal(unpack_decisions(r.baseline_decisions, 6), ATTRIBUTE == MAJORITY)
    membership = loaded[loaded.inference == "membership"]
    assert membership.baseline_decisions.isna().all() and membership.decisions.notna().all()
    lines = load_csv_file(written(tmp_path)[2][0], CONTRASTIVE_GUESSES)
    assert lines.record.tolist() == MEMBERS * 2 and lines.attribute.tolist() == ATTRIBUTE.tolist() * 2
    assert lines.member.all() and (lines.split == "target_train").all()  # the guesses are on the members


def test_a_baseline_that_changes_its_guess_within_a_row_is_refused(tmp_path):
    *_, (path,) = written(tmp_path)
    lines = pd.read_parquet(path)
    lines.loc[2, "baseline_guess"] = 0
    atomic_write_parquet(lines, path)
    with pytest.raises(ArtefactError, match="baseline_guess.*0 on line 4, where its row's line 2 guesses 1.*one guess "
                                            "per row"):
        load_csv_file(path, CONTRASTIVE_GUESSES)


def _plant(tmp_path, change) -> list:
    paths = written(tmp_path)
    lines = pd.read_parquet(paths[2][0])
    atomic_write_parquet(change(lines), paths[2][0])
    return paths


@pytest.mark.parametrize("change, match", [
    # the guesses of one row on another: both rows' accuracies move
    (lambda f: f.assign(guess=np.r_[f.guess.to_numpy()[6:], f.guess.to_numpy()[:6]]), "guess.*right on"),
    # the baseline guessing another attribute than the one its accuracy gives
    (lambda f: f.assign(baseline_guess=0), "baseline_guess.*its baseline"),
    # the attributes of another split (another order of the members)
    (lambda f: f.assign(attribute=np.tile(ATTRIBUTE[::-1], 2)), "right on"),
    # one row's attributes moved between two records at unchanged accuracy
    (lambda f: f.assign(attribute=np.r_[ATTRIBUTE, ATTRIBUTE[[1, 0, 2, 3, 4, 5]]],
                        guess=np.r_[f.guess.to_numpy()[:6], f.guess.to_numpy()[[7, 6, 8, 9, 10, 11]]]),
     "'attribute'.*other attribute values than the first"),
    # another row's records
    (lambda f: f.assign(record=np.r_[MEMBERS, MEMBERS[::-1]]), "'record'.*other records"),
    # every row's guesses twice over, under other record ids: the same accuracy, twice its n
    (lambda f: pd.concat([f.iloc[:6], f.iloc[:6].assign(record=np.add(MEMBERS, 100)), f.iloc[6:],
                          f.iloc[6:].assign(record=np.add(MEMBERS, 100))], ignore_index=True),
     r"'record'.*12 records decided.*the n = 6"),
    # every row's guesses twice over: each record counted twice
    (lambda f: pd.concat([f.iloc[:6], f.iloc[:6], f.iloc[6:], f.iloc[6:]], ignore_index=True),
     "'record'.*and again in its row"),
    # a row's guesses lost, or guesses of a row metrics.csv lacks
    (lambda f: f.iloc[:6], r"without per-record lines \(guess\) for it"),
    (lambda f: f.assign(repeat=np.r_[np.zeros(6, int), np.ones(6, int)]), "without"),
])
def test_guesses_that_are_not_the_rows_are_refused(tmp_path, change, match):
    paths = _plant(tmp_path, change)
    with pytest.raises(ArtefactError, match=match):
        load_contrastive(*paths)


def test_a_guesses_file_given_twice_is_refused_naming_it(tmp_path):
    metrics, scores, (guesses,) = written(tmp_path)
    with pytest.raises(ArtefactError, match=r"target: supervised.* in .*guesses.parquet and in .*guesses.parquet.*"
                                            r"each row's per-record lines in one file"):
        load_contrastive(metrics, scores, [guesses, guesses])
