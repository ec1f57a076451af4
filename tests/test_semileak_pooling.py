"""privssl.reports.semileak_pooling on hand-built drafts and metrics: the table's row of one claim
(every column under its name, the note, the text of what differs between trainings, the order of
a claim's parts by how settled they are, the need of a resolved claim, the refusal of trainings
that compare different parts) and the fingerprints that tell a new training from a copy.

The drafts have the shape semileak_report._row gives them; their estimates are known by their
interval only (no record terms), so one training's estimate is the row's as it is, and two
trainings' value is the plain mean of theirs (attacks.repeated.over_trainings)."""

import functools
import hashlib
import re

import numpy as np
import pandas as pd
import pytest

from privssl.attacks.repeated import Estimate
from privssl.reports.semileak_pooling import pooled, training_fingerprints, trainings_of
from privssl.reports.verdicts import (
    CONTRADICTED,
    REPRODUCED,
    UNRESOLVED,
    directional,
    within,
)

KEY = ("digits", "similarity", "fixmatch", np.nan)
QUOTES = {"similarity": {"statement": "JS is the best similarity", "quoted_values": "0.80 vs 0.70",
                         "source": "thesis §3.4"}}
MEAN_NOTE = "the mean over 2 trainings (interval: records and trainings, attacks.repeated.over_trainings)"


def estimate(value: float, lo: float, hi: float, n: int = 400) -> Estimate:
    """An estimate known by its 95 % interval (as semileak_report._from_interval builds one)."""
    se = (hi - lo) / (2 * 1.959963984540054)
    return Estimate(value, lo, hi, n, 1, se ** 2, 0.0, np.inf)


def part(name: str, d: Estimate, test, b: Estimate | None = None, compared: str | None = None) -> dict:
    return {"name": name, "d": d, "test": test, "b": b, "compared": compared}


def draft(parts: list[dict], note: str = "", quantity: str = "membership AUC", compared: str = "JS vs cosine",
          a: Estimate | None = None, b: Estimate | None = None, least_settled_first: bool = False,
          repeat: int = 0) -> dict:
    return {"key": KEY, "quantity": quantity, "compared": compared,
            "a": a or estimate(0.80, 0.77, 0.83), "b": b or estimate(0.70, 0.66, 0.74), "parts": parts,
            "test": "JS − each other similarity > 0", "note": note, "quote": "similarity",
            "design": "paired by record (DeLong)", "arms": [("fixmatch", None)],
            "least_settled_first": least_settled_first, "repeat": repeat}


def decides(verdict: str, need: float):
    """A part's test that returns a fixed verdict and need, whatever the pooled difference."""
    return lambda d: (verdict, need)


# --------------------------------------------------------------------------------- pooled: the row

def test_one_trainings_row_carries_every_column_under_its_name():
    """One training, one part: every column of the table under its own name, the sides and the
    difference the training's own estimates, the verdict and need the part's test's, and the note
    the training's note alone (no 'parts:' list for a single part)."""
    a, b, d = estimate(0.81, 0.78, 0.84, n=400), estimate(0.66, 0.62, 0.70, n=380), estimate(0.15, 0.11, 0.19)
    got = pooled([draft([part("JS − cosine", d, decides(UNRESOLVED, 640.0))], note="seed 7", a=a, b=b)], 1, QUOTES)
    assert got == {"dataset": "digits", "claim": "similarity", "target": "fixmatch", "eps": got["eps"],
                   "quantity": "membership AUC", "compared": "JS vs cosine",
                   "value_a": 0.81, "value_a_lo": 0.78, "value_a_hi": 0.84, "value_b": 0.66, "value_b_lo": 0.62,
                   "value_b_hi": 0.70, "n_a": 400, "n_b": 380,
                   "difference": 0.15, "difference_lo": 0.11, "difference_hi": 0.19,
                   "design": "paired by record (DeLong)", "test": "JS − each other similarity > 0", "trainings": 1,
                   "verdict": UNRESOLVED, "n_for_80pct_power": 640.0, "note": "seed 7",
                   "thesis_statement": "JS is the best similarity", "thesis_values": "0.80 vs 0.70",
                   "thesis_source": "thesis §3.4"}
    assert np.isnan(got["eps"])


def test_the_trainings_column_is_the_count_given_not_the_drafts():
    """`trainings` is the fewer-trained arm's count passed in (trainings_of), not len(drafts)."""
    d = estimate(0.15, 0.11, 0.19)
    got = pooled([draft([part("JS − cosine", d, decides(REPRODUCED, np.nan))])], 3, QUOTES)
    assert got["trainings"] == 3


def test_a_contradicted_claim_needs_no_records_even_with_an_unresolved_part():
    """One part contradicted, another unresolved with a finite need: the claim is contradicted,
    and a contradicted claim has no n_for_80pct_power (more records cannot change it)."""
    contradicted, unresolved = estimate(-0.10, -0.15, -0.05), estimate(0.02, -0.03, 0.07)
    assert np.isfinite(directional(unresolved)[1])  # the case: the unresolved part alone would need records
    got = pooled([draft([part("JS − cosine", contradicted, directional),
                         part("JS − euclidean", unresolved, directional)])], 1, QUOTES)
    assert got["verdict"] == CONTRADICTED
    assert np.isnan(got["n_for_80pct_power"])


def test_an_unresolved_claim_needs_its_largest_unreproduced_parts_records():
    got = pooled([draft([part("JS − cosine", estimate(0.1, 0.05, 0.15), decides(REPRODUCED, np.nan)),
                         part("JS − correlation", estimate(0.02, -0.03, 0.07), decides(UNRESOLVED, 900.0)),
                         part("JS − euclidean", estimate(0.01, -0.04, 0.06), decides(UNRESOLVED, 2500.0))])],
                 1, QUOTES)
    assert got["verdict"] == UNRESOLVED and got["n_for_80pct_power"] == 2500.0


# --------------------------------------------------------------------------------- pooled: the note

def test_two_trainings_note_says_the_mean_and_training_0s_own_note():
    d0, d1 = estimate(0.10, 0.06, 0.14), estimate(0.20, 0.16, 0.24)
    got = pooled([draft([part("JS − cosine", d0, directional)], note="A_DA at step 1000"),
                  draft([part("JS − cosine", d1, directional)], note="other", repeat=1)], 2, QUOTES)
    assert got["note"] == MEAN_NOTE + "; training 0: A_DA at step 1000"
    assert got["difference"] == pytest.approx(0.15, abs=1e-12)


def test_two_trainings_without_a_note_say_the_mean_alone():
    d0, d1 = estimate(0.10, 0.06, 0.14), estimate(0.20, 0.16, 0.24)
    got = pooled([draft([part("JS − cosine", d0, directional)]),
                  draft([part("JS − cosine", d1, directional)], repeat=1)], 2, QUOTES)
    assert got["note"] == MEAN_NOTE


def test_several_parts_are_listed_after_the_note():
    parts = [part("JS − cosine", estimate(0.10, 0.06, 0.14), directional),
             part("JS − euclidean", estimate(0.02, -0.03, 0.07), decides(UNRESOLVED, 900.0))]
    listed = (f"parts: JS − cosine: +0.100 [+0.060, +0.140] ({REPRODUCED}); "
              f"JS − euclidean: +0.020 [-0.030, +0.070] ({UNRESOLVED})")
    assert pooled([draft(parts, note="seed 7")], 1, QUOTES)["note"] == "seed 7; " + listed
    assert pooled([draft(parts)], 1, QUOTES)["note"] == listed


# --------------------------------------------------------------------------------- pooled: texts that differ

def test_a_quantity_that_differs_between_trainings_is_shown_per_training():
    """Equal texts give one text; differing ones the first with every training's in order."""
    d = estimate(0.10, 0.06, 0.14)
    drafts = [draft([part("JS − cosine", d, directional)], quantity=q, compared=c, repeat=r)
              for r, (q, c) in enumerate((("AUC, step 1000", "JS vs cosine"), ("AUC, step 900", "JS vs cosine"),
                                          ("AUC, step 1000", "JS vs cosine")))]
    got = pooled(drafts, 3, QUOTES)
    assert got["quantity"] == "AUC, step 1000 (by training: AUC, step 1000 | AUC, step 900 | AUC, step 1000)"
    assert got["compared"] == "JS vs cosine"


def test_a_compared_text_that_differs_is_shown_per_training_with_the_first_leading():
    d = estimate(0.10, 0.06, 0.14)
    got = pooled([draft([part("JS − cosine", d, directional)], compared="JS vs cosine"),
                  draft([part("JS − cosine", d, directional)], compared="JS vs euclidean", repeat=1)], 2, QUOTES)
    assert got["compared"] == "JS vs cosine (by training: JS vs cosine | JS vs euclidean)"
    assert got["quantity"] == "membership AUC"


# --------------------------------------------------------------------------------- pooled: least settled first

def test_parts_are_ordered_contradicted_unresolved_reproduced_each_by_lowest_bound():
    """Four parts judged within ±0.05, given in the order R, U, C, U2, whose lower bounds run
    against their verdicts (C's is the highest, R's below U's): the row leads with C, then the
    two unresolved parts lowest bound first, then R; C's difference, side b and words lead."""
    test = functools.partial(within, margin=0.05)
    given = {"R": (estimate(-0.01, -0.04, 0.02), REPRODUCED), "U": (estimate(0.02, -0.03, 0.07), UNRESOLVED),
             "C": (estimate(0.10, 0.07, 0.13), CONTRADICTED), "U2": (estimate(0.0, -0.06, 0.06), UNRESOLVED)}
    assert {name: test(d)[0] for name, (d, _) in given.items()} == {n: v for n, (_, v) in given.items()}
    sides = {"R": estimate(0.79, 0.75, 0.83), "U": estimate(0.77, 0.73, 0.81), "C": estimate(0.70, 0.66, 0.74),
             "U2": estimate(0.80, 0.76, 0.84)}
    parts = [part(name, d, test, b=sides[name], compared=f"JS vs {name} (the least settled part)")
             for name, (d, _) in given.items()]
    got = pooled([draft(parts, least_settled_first=True)], 1, QUOTES)
    order = re.findall(r"(\w+): [+-]", got["note"].removeprefix("parts: "))
    assert order == ["C", "U2", "U", "R"]
    assert (got["difference"], got["difference_lo"], got["difference_hi"]) == (0.10, 0.07, 0.13)
    assert (got["value_b"], got["value_b_lo"], got["value_b_hi"]) == (0.70, 0.66, 0.74)
    assert got["compared"] == "JS vs C (the least settled part)"
    assert got["verdict"] == CONTRADICTED


def test_an_unresolved_part_leads_a_reproduced_part_of_lower_bound():
    test = functools.partial(within, margin=0.05)
    parts = [part("R", estimate(-0.01, -0.04, 0.02), test, b=estimate(0.6, 0.5, 0.7), compared="R"),
             part("U", estimate(0.03, -0.01, 0.07), test, b=estimate(0.5, 0.4, 0.6), compared="U")]
    got = pooled([draft(parts, least_settled_first=True)], 1, QUOTES)
    assert got["compared"] == "U" and got["difference"] == 0.03 and got["verdict"] == UNRESOLVED


# --------------------------------------------------------------------------------- pooled: refusals

def test_trainings_that_compare_different_parts_are_refused_naming_the_claim_and_the_parts():
    d = estimate(0.10, 0.06, 0.14)
    drafts = [draft([part("JS − cosine", d, directional), part("JS − euclidean", d, directional)]),
              draft([part("JS − euclidean", d, directional), part("JS − correlation", d, directional)], repeat=1)]
    message = (f"metrics.csv: the trainings of {KEY} compare different parts "
               "([['JS − cosine', 'JS − euclidean'], ['JS − correlation', 'JS − euclidean']])")
    with pytest.raises(ValueError, match=re.escape(message)):
        pooled(drafts, 2, QUOTES)


# --------------------------------------------------------------------------------- fingerprints

def metric_rows(dataset: str, target: str, eps: float, repeat: int, ranks, decisions: str = "abc") -> list[dict]:
    """Two metric attacks' rows and A_NN's of one model and repeat, every row with `ranks`."""
    return [{"dataset": dataset, "target": target, "eps": eps, "repeat": repeat, "attack": attack, "ranks": ranks,
             "test_decisions": decisions} for attack in ("entropy", "confidence", "nn")]


def test_ranks_stored_as_integers_fingerprint_as_the_same_ranks_as_floats():
    """Two repeats of equal ranks, one as int64 (no ties), one as float64: the fingerprint reads the
    rank values, so they are one training; the digest is sha256 of the float64 ranks."""
    ints, floats = np.array([3, 1, 4, 2]), np.array([3.0, 1.0, 4.0, 2.0])
    metrics = pd.DataFrame(metric_rows("digits", "fixmatch", np.nan, 0, ints)
                           + metric_rows("digits", "fixmatch", np.nan, 1, floats))
    fingerprints = training_fingerprints(metrics)
    digest = hashlib.sha256(floats.tobytes()).hexdigest()
    assert fingerprints == {("digits", "fixmatch", None, 0): ((digest, digest), ("abc", "abc")),
                            ("digits", "fixmatch", None, 1): ((digest, digest), ("abc", "abc"))}
    assert trainings_of(fingerprints) == {("digits", "fixmatch", None): 1}


def test_fingerprints_keep_the_order_the_metrics_give_the_repeats():
    """Keys in order of first appearance in metrics.csv (repeat 1 before 0, dataset 'svhn' before
    'digits', DP-SGD's ε before the undefended), not sorted."""
    ranks = np.arange(1.0, 5.0)
    metrics = pd.DataFrame(metric_rows("svhn", "fixmatch_dpsgd", 8.0, 1, ranks)
                           + metric_rows("svhn", "fixmatch", np.nan, 1, ranks)
                           + metric_rows("digits", "fixmatch", np.nan, 1, ranks)
                           + metric_rows("digits", "fixmatch", np.nan, 0, ranks[::-1]))
    assert list(training_fingerprints(metrics)) == [("svhn", "fixmatch_dpsgd", 8.0, 1), ("svhn", "fixmatch", None, 1),
                                                    ("digits", "fixmatch", None, 1), ("digits", "fixmatch", None, 0)]
