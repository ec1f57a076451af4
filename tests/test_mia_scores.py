"""The MIA rows' per-record decisions, read back from the attack's per-record scores
(artefacts.image.MIA_SCORES' called_member, load_mia): each row's calls are one threshold on its
scores, its decisions are its calls against membership in the file's record order, and every row
of mia.csv has exactly one row of scores, deciding the same records as every other row of its
dataset. Expectations are built here line by line, with numpy alone."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from privssl.artefacts.contrastive import CONTRASTIVE_SCORES
from privssl.artefacts.image import MIA_KEY, MIA_SCORES, load_mia
from privssl.artefacts.record_scores import row_codes, row_decisions
from privssl.artefacts.specs import ArtefactError
from privssl.artefacts.tables import load_csv_file
from privssl.io import atomic_write_csv, atomic_write_parquet, unpack_decisions
from privssl.reports.release_table import mia_accuracy

MEMBERS, NONMEMBERS = [5, 8, 2], [9, 4, 0, 7]  # pool indices of the evaluated records, in the file's order
MEMBER = np.array([True] * len(MEMBERS) + [False] * len(NONMEMBERS))


def mia_row(mechanism: str, eps: float, repeat: int, attack: str, adaptive: bool, right: np.ndarray) -> dict:
    accuracy = float(right.mean())
    return {"dataset": "digits", "mechanism": mechanism, "eps": eps, "repeat": repeat, "attack": attack,
            "adaptive": adaptive, "n_members": len(MEMBERS), "n_nonmembers": len(NONMEMBERS),
            "accuracy": accuracy, "accuracy_lo": 0.0, "accuracy_hi": 1.0, "auc": 0.5, "auc_lo": 0.0, "auc_hi": 1.0,
            "tpr_at_1pct_fpr": 0.0, "tpr_at_1pct_fpr_lo": 0.0, "tpr_at_1pct_fpr_hi": 1.0, "fp_at_1pct_fpr": 0}


def score_lines(row: dict, scores: np.ndarray, threshold: float, records=MEMBERS + NONMEMBERS) -> pd.DataFrame:
    n = len(records)
    return pd.DataFrame({**{c: [row[c]] * n for c in MIA_KEY},
                         "split": ["finetune"] * len(MEMBERS) + ["nonmember"] * len(NONMEMBERS),
                         "record": records, "member": MEMBER, "called_member": scores >= threshold, "score": scores})


def written(tmp_path, targets: dict) -> tuple[list, list, dict]:
    """mia.csv and one scores file per target (`targets`: mechanism -> [(eps, repeat, scores,
    threshold)]), each row its two attacks; with each row's expected decisions by key."""
    rows, paths, right = [], [], {}
    for mechanism, draws in targets.items():
        lines = []
        for eps, repeat, scores, threshold in draws:
            for attack, adaptive in (("loss", False), ("shadow_mlp", True)):
                correct = (scores >= threshold) == MEMBER
                row = mia_row(mechanism, eps, repeat, attack, adaptive, correct)
                rows.append(row)
                right[(mechanism, -1.0 if math.isnan(eps) else eps, repeat, attack)] = correct
                lines.append(score_lines(row, scores, threshold))
        path = tmp_path / f"scores_{mechanism}.parquet"
        atomic_write_parquet(pd.concat(lines, ignore_index=True), path)
        paths.append(path)
    atomic_write_csv(pd.DataFrame(rows), tmp_path / "mia.csv")
    return [tmp_path / "mia.csv"], paths, right


def draws(rng, *eps: float) -> list:
    return [(e, r, rng.normal(size=len(MEMBER)), float(rng.normal(scale=0.5))) for e in eps for r in range(2)]


def test_each_rows_decisions_are_its_calls_against_membership_in_the_files_record_order(tmp_path):
    rng = np.random.default_rng(3)
    paths, scores, right = written(tmp_path, {"none": draws(rng, math.nan)[:1], "alm": draws(rng, 1.0, 10.0)})
    mia = load_mia(paths, scores)
    assert list(mia.mechanism) == ["none"] * 2 + ["alm"] * 8  # mia.csv's order
    for row in mia.to_dict("records"):
        key = (row["mechanism"], -1.0 if math.isnan(row["eps"]) else row["eps"], row["repeat"], row["attack"])
        np.testing.assert_array_equal(unpack_decisions(row["decisions"], len(MEMBER)), right[key])
    # the reports' record-clustered accuracy of a release: the mean of its draws' decisions
    alm = mia[(mia.mechanism == "alm") & (mia.eps == 10.0) & (mia.attack == "shadow_mlp")]
    expected = np.mean([right[("alm", 10.0, r, "shadow_mlp")] for r in range(2)])
    assert mia_accuracy(alm).value == pytest.approx(expected)


def test_a_row_of_mia_csv_without_scores_and_scores_without_a_row_are_refused(tmp_path):
    rng = np.random.default_rng(4)
    paths, scores, _ = written(tmp_path, {"none": draws(rng, math.nan)[:1], "alm": draws(rng, 1.0)})
    with pytest.raises(ArtefactError, match=r"mechanism: alm.*without per-record lines \(called_member\) for it"):
        load_mia(paths, scores[:1])
    frame = pd.read_csv(paths[0])
    atomic_write_csv(frame[frame.repeat == 0], paths[0])  # alm's repeat 1 has scores, no row
    with pytest.raises(ArtefactError, match=r"repeat: 1.*without its summary row"):
        load_mia(paths, scores)


def test_score_files_of_one_dataset_deciding_other_records_are_refused(tmp_path):
    rng = np.random.default_rng(5)
    paths, scores, _ = written(tmp_path, {"none": draws(rng, math.nan)[:1], "alm": draws(rng, 1.0)})
    lines = pd.read_parquet(scores[1])
    swapped = lines.record.to_numpy().reshape(-1, len(MEMBER))[:, [1, 0, *range(2, len(MEMBER))]].reshape(-1)
    atomic_write_parquet(lines.assign(record=swapped), scores[1])  # same records, another order
    with pytest.raises(ArtefactError, match="other records, or in another order"):
        load_mia(paths, scores)


def test_rows_of_one_file_deciding_other_records_or_as_many_are_refused(tmp_path):
    rng = np.random.default_rng(6)
    row = mia_row("alm", 1.0, 0, "loss", False, np.ones(len(MEMBER), bool))
    other = {**row, "repeat": 1}
    s = rng.normal(size=len(MEMBER))
    rows, records = row_decisions("x", pd.concat([score_lines(row, s, 0.0), score_lines(other, s, 0.0)]), MIA_KEY)
    assert list(records[0]) == MEMBERS + NONMEMBERS and list(records[1]) == list(MEMBER)
    assert list(rows.repeat) == [0, 1]
    reordered = score_lines(other, s, 0.0, MEMBERS[::-1] + NONMEMBERS)
    with pytest.raises(ArtefactError, match="other records, or in another order"):
        row_decisions("x", pd.concat([score_lines(row, s, 0.0), reordered]), MIA_KEY)
    with pytest.raises(ArtefactError, match="the same records for every row"):
        row_decisions("x", pd.concat([score_lines(row, s, 0.0), score_lines(other, s, 0.0).iloc[1:]]), MIA_KEY)


def test_scores_of_as_many_records_for_every_row_but_not_the_rows_count_are_refused(tmp_path):
    """Every row of the file decides the same records, the calls give its accuracy, but there are
    not n_members + n_nonmembers of them: each row's lines twice over under other record ids."""
    rng = np.random.default_rng(8)
    paths, scores, _ = written(tmp_path, {"none": draws(rng, math.nan)[:1]})
    lines = pd.read_parquet(scores[0])
    doubled = pd.concat([g for _, row in lines.groupby("attack", sort=False)
                         for g in (row, row.assign(record=row.record + 100))], ignore_index=True)
    atomic_write_parquet(doubled, scores[0])
    with pytest.raises(ArtefactError, match=r"'record'.*14 records decided.*n_members \+ n_nonmembers = 7"):
        load_mia(paths, scores)


def test_a_row_whose_members_and_non_members_are_not_its_counts_is_refused(tmp_path):
    """n_members and n_nonmembers swapped keep their sum: the members among the lines tell."""
    rng = np.random.default_rng(10)
    paths, scores, _ = written(tmp_path, {"none": draws(rng, math.nan)[:1]})
    frame = pd.read_csv(paths[0])
    atomic_write_csv(frame.assign(n_members=frame.n_nonmembers, n_nonmembers=frame.n_members), paths[0])
    with pytest.raises(ArtefactError, match=r"scores_none.parquet: field 'member': 3 members among the records "
                                            r"decided for the row .*the n_members = 4 it counts"):
        load_mia(paths, scores)
    atomic_write_csv(frame.assign(n_members=frame.n_members + 1), paths[0])  # more than its lines
    with pytest.raises(ArtefactError, match=r"'record': 7 records decided for the row .*= 8 it counts"):
        load_mia(paths, scores)


def test_a_row_in_two_score_files_is_refused_naming_both(tmp_path):
    rng = np.random.default_rng(11)
    paths, scores, _ = written(tmp_path, {"none": draws(rng, math.nan)[:1], "alm": draws(rng, 1.0)})
    copy = tmp_path / "copy_of_alm.parquet"
    copy.write_bytes(scores[1].read_bytes())
    with pytest.raises(ArtefactError, match=r"the row \{.*mechanism: alm.*\} in .*scores_alm.parquet and in "
                                            r".*copy_of_alm.parquet"):
        load_mia(paths, [*scores, copy])


def test_a_record_decided_twice_in_a_row_is_refused(tmp_path):
    rng = np.random.default_rng(9)
    row = mia_row("alm", 1.0, 0, "loss", False, np.ones(len(MEMBER), bool))
    s = rng.normal(size=len(MEMBER))
    twice = score_lines(row, s, 0.0, MEMBERS + NONMEMBERS[:-1] + MEMBERS[:1])
    with pytest.raises(ArtefactError, match="'record'.*5 on line 2 and again.*each record once per row"):
        row_decisions("x", twice, MIA_KEY)


@pytest.mark.parametrize("plant", ["swap two calls", "a -inf score called, a finite one not",
                                   "a tie split"])
def test_calls_that_no_threshold_on_the_scores_gives_are_refused(tmp_path, plant):
    row = mia_row("alm", 1.0, 0, "loss", False, np.ones(len(MEMBER), bool))
    scores = np.array([0.9, -0.2, 0.4, 0.1, -1.0, 0.7, -np.inf])
    lines = score_lines(row, scores, 0.3)  # called: 0.9, 0.4, 0.7
    path = tmp_path / "scores_alm.parquet"
    atomic_write_parquet(lines, path)
    load_csv_file(path, MIA_SCORES)  # one threshold: loads
    called = lines.called_member.to_numpy().copy()
    if plant == "swap two calls":
        called[[0, 1]] = called[[1, 0]]
    elif plant == "a -inf score called, a finite one not":
        called[6] = True  # -inf called, 0.1 and -0.2 not
    else:  # two records of score 0.4, one called and one not
        scores[3] = 0.4
    atomic_write_parquet(lines.assign(called_member=called, score=scores), path)
    with pytest.raises(ArtefactError, match="called_member"):
        load_csv_file(path, MIA_SCORES)


@pytest.mark.parametrize("plant", ["a member flag flipped", "two rows' scores swapped", "every call negated"])
def test_calls_that_do_not_give_their_rows_accuracy_are_refused(tmp_path, plant):
    rng = np.random.default_rng(8)
    paths, scores, _ = written(tmp_path, {"alm": draws(rng, 1.0)})
    mia = load_mia(paths, scores)
    assert mia.accuracy.nunique() == 2  # the two draws' (a swap of rows of equal accuracy is not seen)
    lines = pd.read_parquet(scores[0])
    n = len(MEMBER)
    if plant == "a member flag flipped":  # in every row alike (one row alone: the next test)
        lines.loc[::n, "member"] = ~lines.member[::n]
    elif plant == "two rows' scores swapped":  # the loss attack's lines of repeat 0 and of repeat 1
        first, second = np.arange(n), np.arange(2 * n, 3 * n)
        for column in ("called_member", "score"):
            values = lines[column].to_numpy().copy()
            values[first], values[second] = values[second], values[first].copy()
            lines[column] = values
    else:  # a threshold still, the other way round
        lines["called_member"] = ~lines.called_member
        lines["score"] = -lines.score
    atomic_write_parquet(lines, scores[0])
    match = ("'member': 2 members among the records" if plant == "a member flag flipped"  # before the accuracy
             else "called_member.*calls of the row.*expected its accuracy")
    with pytest.raises(ArtefactError, match=match):
        load_mia(paths, scores)


def test_row_codes_number_the_rows_as_a_group_by_would_whether_or_not_their_lines_are_together():
    rng = np.random.default_rng(9)
    rows = [mia_row(m, e, r, a, ad, np.ones(len(MEMBER), bool)) for m, e in (("none", math.nan), ("alm", 1.0))
            for r in range(2) for a in ("loss", "shadow_mlp") for ad in (False, True)]
    lines = pd.concat([score_lines(row, rng.normal(size=len(MEMBER)), 0.0) for row in rows], ignore_index=True)
    lines = lines.astype({"mechanism": "category", "attack": "category"})
    for frame in (lines, lines.sample(frac=1, random_state=1)):  # the rows' lines together, then scattered
        expected = frame.groupby(list(MIA_KEY), observed=True, sort=False, dropna=False).ngroup().to_numpy()
        np.testing.assert_array_equal(row_codes(frame, MIA_KEY), expected)
    assert row_codes(lines, MIA_KEY).max() == len(rows) - 1  # the NaN eps of `none` one key, not one per line


def test_a_rows_member_flags_moved_at_an_unchanged_accuracy_are_refused(tmp_path):
    """The referee's case: in one row, a right call and a wrong call of the same call trade member
    flags; its accuracy stands, its decisions do not. Every row must score the same members."""
    rng = np.random.default_rng(8)
    paths, scores, _ = written(tmp_path, {"alm": draws(rng, 1.0)})
    lines = pd.read_parquet(scores[0])
    row = lines.iloc[: len(MEMBER)]
    right = (row.called_member == row.member).to_numpy()
    called = row.called_member.to_numpy()
    side = next(c for c in (True, False) if (right & (called == c)).any() and (~right & (called == c)).any())
    a, b = int(np.flatnonzero(right & (called == side))[0]), int(np.flatnonzero(~right & (called == side))[0])
    lines.loc[[a, b], "member"] = lines.member[[b, a]].to_numpy()
    atomic_write_parquet(lines, scores[0])
    with pytest.raises(ArtefactError, match="'member'.*other member values than the first"):
        load_mia(paths, scores)


def test_interleaved_rows_keep_each_rows_record_order():
    """Lines of two rows alternating (not as the writers put them): each row's decisions in its
    own lines' order, as a stable sort keeps them (300 records: enough for an unstable sort to
    reorder them)."""
    rng = np.random.default_rng(10)
    n = 300
    member = np.arange(n) < n // 2
    frames = []
    for repeat in (0, 1):
        scores = rng.normal(size=n)
        frames.append(pd.DataFrame({"dataset": "digits", "mechanism": "alm", "eps": 1.0, "repeat": repeat,
                                    "attack": "loss", "adaptive": False, "split": "finetune", "record": np.arange(n),
                                    "member": member, "called_member": scores >= 0, "score": scores}))
    interleaved = pd.concat(frames).sort_index(kind="stable").reset_index(drop=True)  # line i of 0, of 1, ...
    rows, evaluated = row_decisions("x", interleaved, MIA_KEY)
    for frame, cell in zip(frames, rows.decisions):
        np.testing.assert_array_equal(unpack_decisions(cell, n), frame.called_member == member)
    np.testing.assert_array_equal(evaluated[0], np.arange(n))


def test_the_contrastive_scores_calls_are_one_threshold_too(tmp_path):
    key = {"dataset": "digits", "target": "talos", "lambda": 1.0, "repeat": 0, "inference": "membership_task",
           "attack": "loss"}
    scores = np.array([0.9, -0.2, 0.4, 0.1])
    lines = pd.DataFrame({**{c: [v] * 4 for c, v in key.items()}, "split": ["target_train"] * 2 + ["target_test"] * 2,
                          "record": [3, 1, 2, 0], "member": [True, True, False, False], "called_member": scores >= 0.3,
                          "score": scores})
    path = tmp_path / "scores.parquet"
    atomic_write_parquet(lines, path)
    load_csv_file(path, CONTRASTIVE_SCORES)
    atomic_write_parquet(lines.assign(called_member=[True, True, False, False]), path)  # -0.2 called, 0.4 not
    with pytest.raises(ArtefactError, match="called_member"):
        load_csv_file(path, CONTRASTIVE_SCORES)


def test_each_attacks_calls_are_the_decisions_behind_its_rows_accuracy():
    """MembershipEvaluation.scored_rows, the writer of the attack rules' calls: for every attack
    (thresholds fitted on a shadow's scores, so the correctness attack's scores tie with its
    threshold) the calls' agreement with membership is the row's accuracy as membership_metrics
    computed it, and the calls are one threshold on the row's scores."""
    import torch

    from privssl.attacks.mia import AttackSpec, MembershipEvaluation, fit_attacks

    torch.manual_seed(0)
    n, classes = 40, 3
    shadow = torch.softmax(3 * torch.randn(1, 2 * n, classes, dtype=torch.float64), -1).float()
    labels = torch.randint(classes, (2 * n,))
    shadow_member = torch.cat([torch.ones(n), torch.zeros(n)])
    fitted = fit_attacks(shadow, labels, shadow_member, AttackSpec(hidden=8, layers=1, epochs=2), 0)[0]
    evaluation = MembershipEvaluation.balanced(torch.randint(classes, (n,)), torch.randint(classes, (n,)), (0.1,),
                                               bootstrap=10, seed=0)
    probs = torch.softmax(3 * torch.randn(2 * n, classes), -1)
    scored = evaluation.scored_rows({"dataset": "digits"}, fitted, True, probs)
    assert [row["attack"] for row, *_ in scored] == ["shadow_mlp", "confidence", "entropy", "modified_entropy", "loss",
                                                     "correctness"]
    ties = 0
    for row, scores, called in scored:
        assert (called == evaluation.is_member).mean() == pytest.approx(row["accuracy"], abs=1e-12), row["attack"]
        if called.any() and not called.all():
            assert scores[called].min() > scores[~called].max(), row["attack"]
        ties += int((scores == fitted.thresholds[row["attack"]]).sum())
    assert ties > 0  # some score on its threshold: a call with > instead of >= would differ
