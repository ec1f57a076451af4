"""The Semi-Leak track's artefacts (thesis Ch. 3): the attack table and its per-record scores
(attached to the rows as ranks), the training history, and the splits and model files of the
semileak_data and semileak_train rules with their loaders."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privssl.artefacts.record_scores import score_key, score_schema
from privssl.artefacts.specs import (
    COUNT,
    POSITIVE,
    PROBABILITY,
    Decisions,
    Each,
    Flag,
    Num,
    Tensor,
    Text,
    check_fields,
    fail,
)
from privssl.artefacts.splits import _check_disjoint, _check_pool
from privssl.artefacts.tables import (
    _METRICS,
    Table,
    expected_of,
    load_csv_file,
    load_json_file,
    load_tensor_file,
)
from privssl.attacks.semi_leak_spec import ATTACKS, DA_ATTACK, METRIC_ATTACKS, NN_ATTACK
from privssl.data.splits import DATASETS, SEMILEAK_SPLITS
from privssl.grids import NONE
from privssl.io import InputError
from privssl.training.semi_supervised_spec import (
    ARCHITECTURES,
    DEFENCES,
    DPSGD_TARGET,
    MEMBER_KINDS,
    SIMILARITIES,
    SUPERVISED,
    TARGETS,
)


# semileak_attack rule (thesis Ch. 3): eps only for the DP-SGD target; views and similarity only for A_DA
SEMILEAK = {"dataset": Text(), "repeat": Num(0, integer=True), "target": Text(TARGETS),
            "eps": Num(0, low_open=True, nan=True),
            "step": Num(1, integer=True),
            "steps": Num(1, integer=True), "defence": Text(DEFENCES), "attack": Text(ATTACKS),
            "similarity": Text(("", *SIMILARITIES), empty=True), "views": Num(1, integer=True, nan=True),
            "is_default": Flag(), "member_kind": Text(MEMBER_KINDS), **_METRICS,
            "test_decisions": Decisions(("n_test",)),
            **{f"{split}_accuracy{end}": PROBABILITY for split in ("test", "train") for end in ("", "_lo", "_hi")},
            "n_test": Num(1, integer=True), "n_train": Num(1, integer=True), "overfitting": Num(-1, 1),
            "js_entropy": Num(0, 1), "js_entropy_lo": Num(0, 1), "js_entropy_hi": Num(0, 1),
            "noise_multiplier": Num(0, nan=True), "eps_spent": Num(0, nan=True),
            "delta": Num(0, 1, nan=True), "accountant": Text(("", "pld", "rdp", "prv"), empty=True),
            "grid": (("dataset", "repeat", "target", "eps", "step", "defence", "attack", "similarity", "views"),
                     ("member_kind",))}
# semileak_attack's per-record scores (scores.parquet): a line per (metrics row, record), the row by
# its key; `record` the image's index in the data set's pool; every score finite (the report ranks them)
SCORE_KEY = score_key(SEMILEAK)
SEMILEAK_SCORES = {**score_schema(SEMILEAK, {"record": COUNT, "member": Flag()}), "score": Num()}


def _score_key(values) -> tuple:
    """A row key that compares equal between metrics.csv and scores.parquet: empty text and NaN
    (a CSV's empty cell) are both None."""
    return tuple(None if v is None or (isinstance(v, str) and v == "") or (isinstance(v, float) and np.isnan(v))
                 else v for v in values)


def attach_score_ranks(path, metrics: pd.DataFrame, queried: dict | None = None) -> pd.DataFrame:
    """`metrics` (one semileak_attack job's metrics.csv, loaded) with a `ranks` column: per row, the
    average ranks of its records' scores in scores.parquet `path`, members first, each group by
    record, which the report's paired AUC comparisons read. Checked against the rows: each row's
    records are its n_members members and n_nonmembers non-members, none twice, the same in every
    row of its dataset and member kind, every score finite, the AUC of the scores the row's own, and
    no scores of a row metrics.csv lacks. `queried` ((dataset, member kind) -> records) carries the
    record sets over the files of several repeats, whose trainings are pooled record by record."""
    from scipy.stats import rankdata

    scores = load_csv_file(path, SEMILEAK_SCORES)
    groups = {_score_key(key): rows for key, rows in scores.groupby(list(SCORE_KEY), dropna=False, sort=False)}
    queried = {} if queried is None else queried  # (dataset, member kind) -> the records of its first row
    ranks = []
    for i, row in enumerate(metrics.itertuples(index=False)):
        key = _score_key(getattr(row, c) for c in SCORE_KEY)
        rows = groups.pop(key, None)
        where = f"the row of {dict(zip(SCORE_KEY, key))}"
        if rows is None:
            fail(path, None, f"no scores for {where} (metrics.csv line {i + 2})", "scores for every metrics row")
        members, others = rows[rows.member].sort_values("record"), rows[~rows.member].sort_values("record")
        if (len(members), len(others)) != (row.n_members, row.n_nonmembers) or rows.record.duplicated().any():
            fail(path, "record", f"{len(members)} members and {len(others)} non-members (some twice: "
                 f"{bool(rows.record.duplicated().any())}) for {where}",
                 f"its {row.n_members} members and {row.n_nonmembers} non-members, each once")
        # every target, checkpoint, attack and repeat is queried on the same records (the report
        # pairs two rows, and pools the repeats, record by record): one record set per member kind
        records = (tuple(members.record), tuple(others.record))
        if queried.setdefault((row.dataset, row.member_kind), records) != records:
            fail(path, "record", f"other records than the first {row.dataset} {row.member_kind} row's for {where}",
                 f"the same members and non-members in every row (and repeat) of member kind {row.member_kind}")
        row_ranks = rankdata(np.concatenate([members.score.to_numpy(), others.score.to_numpy()]))
        auc = (row_ranks[:row.n_members].sum() - row.n_members * (row.n_members + 1) / 2) / (row.n_members *
                                                                                           row.n_nonmembers)
        if abs(auc - row.auc) > 1e-9:
            fail(path, "score", f"scores of AUC {auc:.6f} for {where}", f"the row's AUC {row.auc:.6f}")
        ranks.append(row_ranks)
    if groups:
        fail(path, None, f"scores of {len(groups)} rows metrics.csv lacks, e.g. {next(iter(groups))}",
             "the rows of metrics.csv only")
    return metrics.assign(ranks=ranks)


def load_semileak_metrics(paths, scores, expect: dict[str, list[dict]] | None = None) -> pd.DataFrame:
    """Every dataset's semileak_attack metrics.csv (`paths`), each with its scores.parquet
    (`scores`, in the same order) attached as the rows' `ranks`: what the Semi-Leak report, the
    claims ledger and the digest read."""
    if len(scores) != len(paths):
        raise InputError(f"{len(scores)} scores.parquet files for {len(paths)} metrics.csv files (allowed: one each, "
                         f"in the same order)")
    grids = [expected_of(expect, p) for p in paths]  # every path has its grid before any file is read
    queried: dict = {}  # shared: the repeats of a dataset are pooled record by record (attacks.repeated)
    frames = [attach_score_ranks(s, load_csv_file(p, SEMILEAK, grid), queried)
              for p, s, grid in zip(paths, scores, grids)]
    return pd.concat(frames, ignore_index=True)


# semileak_train's history: per checkpoint the means over its steps (DP-SGD: its last step only)
SEMILEAK_HISTORY = {"role": Text(("target", "shadow")), "target": Text(TARGETS), "eps": Num(0, low_open=True, nan=True),
                    "step": Num(1, integer=True), "lr": Num(0), "loss_labelled": Num(0), "loss_unlabelled": Num(0, nan=True),
                    "mask_rate": Num(0, 1, nan=True), "clipped_fraction": Num(0, 1, nan=True),
                    "grid": (("role", "target", "eps"), ("step",))}


# semileak_attack's copy of its repeat's histories in one file, each row with its dataset and repeat
# and the sentence that it is not private
SEMILEAK_MERGED_HISTORY = {**{c: spec for c, spec in SEMILEAK_HISTORY.items() if c != "grid"},
                           "privacy": Text(), "dataset": Text(), "repeat": COUNT,
                           "grid": (("dataset", "repeat", "role", "target", "eps"), ("step",))}


def load_semileak_splits(path) -> dict:
    """The semileak_data rule's splits.json: four pairwise disjoint parts of one size, index lists into
    the dataset's pool, and the labelled images of each train part, a subset of that part."""
    record = load_json_file(path, {"dataset": Text(tuple(DATASETS)), "n_classes": Num(2, integer=True),
                                   "splits": Each(Tensor(None, "int", None)),
                                   "labelled": Each(Tensor(None, "int", None))})
    info = DATASETS[record["dataset"]]
    bound = {"pool": info.labelled + info.unlabelled}
    index = Num(0, "pool", high_open=True, integer=True)
    check_fields(path, record["splits"], {s: Tensor(("part",), "int", index) for s in SEMILEAK_SPLITS}, bound,
                 "splits.")
    train = ("target_train", "shadow_train")
    check_fields(path, record["labelled"], {s: Tensor((f"|{s}|",), "int", index) for s in train}, bound, "labelled.")
    _check_disjoint(path, record["splits"])
    for name in train:
        outside = sorted(set(record["labelled"][name]) - set(record["splits"][name]))
        if outside or len(set(record["labelled"][name])) != len(record["labelled"][name]):
            fail(path, f"labelled.{name}", f"indices {outside[:5]} outside the part, or repeated",
                 f"distinct indices of splits.{name}")
    _check_pool(path, record)
    return record


SEMILEAK_MODELS = {"role": Text(("target", "shadow")), "target": Text(TARGETS), "dataset": Text(tuple(DATASETS)),
                   "architecture": Text(ARCHITECTURES), "width": Num(1, integer=True),
                   "in_channels": Num(1, integer=True), "n_classes": Num(2, integer=True),
                   "steps": Num(1, integer=True)}


def load_semileak_models(path, role: str, target: str | None, dataset: str) -> dict:
    """A semileak_train file of `role` on `dataset` (of `target`, when given): one model per ε (one
    model, ε None, without DP-SGD), each the EMA states at its checkpoint steps, the last of them
    at `steps`; the DP-SGD models with their σ, δ and spent ε."""
    recorded = {"role": role, "dataset": dataset} | ({} if target is None else {"target": target})
    bundle = load_tensor_file(path, SEMILEAK_MODELS, recorded=recorded)
    models = bundle.get("models")
    if not (isinstance(models, list) and models):
        fail(path, "models", repr(models)[:200], "a non-empty list of models")
    private = {"eps": POSITIVE, "noise_multiplier": POSITIVE, "eps_spent": Num(0), "delta": Num(0, 1, low_open=True),
               "accountant": Text(("pld", "rdp", "prv"))}
    for i, model in enumerate(models):
        if (bundle["target"] == "fixmatch_dpsgd") != (model.get("eps") is not None):
            fail(path, f"models[{i}].eps", repr(model.get("eps")), "a number > 0 for fixmatch_dpsgd, None otherwise")
        if model["eps"] is not None:
            check_fields(path, model, private, prefix=f"models[{i}].")
        states = model.get("states")
        if not (isinstance(states, dict) and states and all(isinstance(k, int) and 1 <= k <= bundle["steps"]
                                                            for k in states) and bundle["steps"] in states):
            fail(path, f"models[{i}].states", repr(sorted(states) if isinstance(states, dict) else states)[:200],
                 f"EMA states at integer steps 1 .. {bundle['steps']}, the last step among them")
        for step, state in states.items():
            check_fields(path, state, {name: Tensor(None, "number") for name in state},
                         prefix=f"models[{i}].states[{step}].")
    return bundle



# --------------------------------------------------------------------------------- the tables, declared

def semileak_rows(config: dict, dataset: str, repeat: int) -> list[dict]:
    """semileak/repeat<r>/metrics.csv: the baselines and A_DA (default K, similarity) against every
    algorithm at every checkpoint; at the last step A_DA's views and similarity grids and the top-1
    defence; the supervised reference (members: all) and DP-SGD at every ε at their last step."""
    section = config["semileak"]
    train, attack, defences = section["train"], section["attack"], section["defences"]
    views, similarity = attack["views"], attack["similarity"]
    steps, last = train["steps"], [train["steps"]]
    baselines = {"attack": [NN_ATTACK, *METRIC_ATTACKS], "similarity": NONE, "views": NONE}
    default = {"attack": [DA_ATTACK], "similarity": [similarity], "views": [views]}
    ablations = [{"attack": [DA_ATTACK], "similarity": [similarity], "views": attack["views_grid"]},
                 {"attack": [DA_ATTACK], "similarity": attack["similarities"], "views": [views]}]

    def block(target, eps, step, defence, attacks, kinds=MEMBER_KINDS):
        return {"dataset": [dataset], "repeat": [repeat], "target": [target], "eps": eps, "step": step,
                "defence": [defence],
                **attacks, "member_kind": list(kinds)}

    checkpoints = list(range(train["checkpoint_every"], steps + 1, train["checkpoint_every"]))
    blocks = []
    for algorithm in section["algorithms"]:
        blocks += [block(algorithm, NONE, checkpoints, "none", attacks) for attacks in (baselines, default)]
        blocks += [block(algorithm, NONE, last, "none", attacks) for attacks in ablations]
        if defences["top1"]:
            blocks += [block(algorithm, NONE, last, "top1", attacks) for attacks in (baselines, default)]
    blocks += [block(SUPERVISED, NONE, last, "none", attacks, ["all"]) for attacks in (baselines, default)]
    if "dpsgd" in defences:
        dp = defences["dpsgd"]
        blocks += [block(DPSGD_TARGET, dp["eps"], [dp["steps"]], "none", attacks) for attacks in (baselines, default)]
    return blocks


def semileak_history_rows(config: dict, dataset: str, part: dict) -> list[dict]:
    """A role's and target's training history (`part`: its repeat, role and target): one row per
    checkpoint step (DP-SGD: per ε, its last step)."""
    role, target = part["role"], part["target"]
    section = config["semileak"]
    train, dpsgd = section["train"], section["defences"].get("dpsgd")
    if target == DPSGD_TARGET:
        return [{"role": [role], "target": [target], "eps": dpsgd["eps"], "step": [dpsgd["steps"]]}]
    steps = list(range(train["checkpoint_every"], train["steps"] + 1, train["checkpoint_every"]))
    return [{"role": [role], "target": [target], "eps": NONE, "step": steps}]


def semileak_merged_history_rows(config: dict, dataset: str, repeat: int) -> list[dict]:
    """A repeat's histories merged by its attack job: every role's and target's rows."""
    section = config["semileak"]
    targets = [*section["algorithms"], SUPERVISED] + ([DPSGD_TARGET] if "dpsgd" in section["defences"] else [])
    return [block | {"dataset": [dataset], "repeat": [repeat]}
            for role in ("target", "shadow") for target in targets
            for block in semileak_history_rows(config, dataset, {"repeat": repeat, "role": role, "target": target})]


SEMILEAK_TABLE = Table(None, SEMILEAK, semileak_rows, part="semileak/repeat{repeat}/metrics.csv")
SEMILEAK_SCORE_TABLE = Table(None, SEMILEAK_SCORES, semileak_rows, part="semileak/repeat{repeat}/scores.parquet")
SEMILEAK_MERGED_HISTORY_TABLE = Table(None, SEMILEAK_MERGED_HISTORY, semileak_merged_history_rows,
                                      part="diagnostics/not_private/semileak/repeat{repeat}/history.csv")
SEMILEAK_HISTORY_TABLE = Table(None, SEMILEAK_HISTORY, semileak_history_rows,
                               part="diagnostics/not_private/semileak/repeat{repeat}/{role}/{target}_history.csv")
