"""The contrastive track's artefacts (thesis Ch. 4): the attack table, its membership rows'
per-record scores and its attribute rows' per-record guesses (with their writers), and the
splits and model files of the contrastive_data and contrastive_train rules with their loaders."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privssl.artefacts.record_scores import (
    ATTRIBUTE_GUESSES,
    BASELINE_GUESSES,
    attach_decisions,
    called_by_a_threshold,
    line_schema,
    row_codes,
    score_key,
    score_lines,
    score_schema,
    split_records,
    with_calls,
)
from privssl.artefacts.specs import COUNT, PROBABILITY, Decisions, Each, Flag, Num, Tensor, Text, check_fields, fail
from privssl.artefacts.splits import _check_disjoint, _check_pool
from privssl.artefacts.tables import Table, load_csv_file, load_csv_files, load_json_file, load_tensor_file
from privssl.attacks.contrastive_spec import (
    ATTRIBUTE,
    ATTRIBUTE_ATTACK,
    INFERENCES,
    MEMBERSHIP,
    MEMBERSHIP_ATTACKS,
    MEMBERSHIP_TASK,
    TARGET_KINDS,
)
from privssl.data.label_maps import membership_task_of
from privssl.data.splits import CONTRASTIVE_SPLITS, DATASETS
from privssl.grids import NONE
from privssl.training.encoder_names import ENCODERS


# contrastive_attack rule (thesis Ch. 4): membership rows have no baseline, attribute rows no AUC or TPR
_MEMBERSHIP_ONLY = Num(0, 1, nan_where=("inference", "attribute"))
CONTRASTIVE = {"dataset": Text(), "target": Text(("supervised", "contrastive", "talos")),
               "lambda": Num(0, nan_where=("target", "supervised")), "repeat": COUNT,
               "inference": Text(INFERENCES), "attack": Text(),
               **{name: PROBABILITY for name in ("task_accuracy", "task_accuracy_lo", "task_accuracy_hi", "accuracy",
                                                 "accuracy_lo", "accuracy_hi")},
               **{f"queried_{split}_accuracy{end}": _MEMBERSHIP_ONLY
                  for split in ("train", "test") for end in ("", "_lo", "_hi")},
               "n_test": COUNT, "n": COUNT,
               **{name: _MEMBERSHIP_ONLY for name in ("auc", "auc_lo", "auc_hi", "tpr_at_*")},
               **{name: Num(0, integer=True, nan_where=("inference", "attribute"))
                  for name in ("n_members", "n_nonmembers", "fp_at_*")},
               **{name: Num(0, 1, nan_where=("inference", (MEMBERSHIP, MEMBERSHIP_TASK)))
                  for name in ("baseline", "baseline_lo", "baseline_hi")},
               # a row's decisions are read from its per-record file (load_contrastive): a membership
               # row's from its scores' calls (CONTRASTIVE_SCORES), an attribute row's and its
               # baseline's from the guesses (CONTRASTIVE_GUESSES)
               "task_decisions": Decisions(("n_test",)),
               "grid": (("dataset", "target", "inference", "attack"), ("lambda", "repeat"))}
# its per-record scores (contrastive/scores.parquet): per membership row, a line per record, the
# target model's members (target_train) then its non-members (target_test), with the attack's call
# (called_member: score >= the threshold it fitted on the shadow model); attribute rows have none
CONTRASTIVE_KEY = score_key(CONTRASTIVE)
CONTRASTIVE_SCORES = {**score_schema(CONTRASTIVE, {"split": Text(("target_train", "target_test")), "record": COUNT,
                                                   "member": Flag(), "called_member": Flag()}),
                      "relations": lambda path, frame: called_by_a_threshold(path, frame, CONTRASTIVE_KEY)}


def _one_majority_guess(path, frame: pd.DataFrame) -> None:
    """The majority baseline guesses one attribute (the auxiliary set's most frequent) for every
    record of its row: a baseline that varies within a row is not that baseline."""
    codes = row_codes(frame, CONTRASTIVE_KEY)
    guess = frame.baseline_guess.to_numpy()
    first = np.unique(codes, return_index=True)[1][codes]  # each line's row's first line
    other = np.flatnonzero(guess != guess[first])
    if other.size:
        i, j = int(other[0]), int(first[other[0]])
        fail(path, "baseline_guess", f"{guess[i]} on line {i + 2}, where its row's line {j + 2} guesses {guess[j]}",
             "one guess per row, the auxiliary set's majority attribute")


# the attribute rows' per-record guesses (contrastive/attribute_guesses.parquet): per attribute
# row, a line per member of the target model (target_train) with its attribute, the attack's guess
# of it and the majority baseline's (one guess per row); right where the guess is the attribute
CONTRASTIVE_GUESSES = {**line_schema(CONTRASTIVE, {"split": Text(("target_train",)), "record": COUNT,
                                                   "member": Flag(), "attribute": COUNT, "guess": COUNT,
                                                   "baseline_guess": COUNT}),
                       "relations": _one_majority_guess}


def contrastive_guess_table(guessed: list[tuple[dict, np.ndarray, int]], splits: dict,
                            attributes) -> pd.DataFrame:
    """CONTRASTIVE_GUESSES' lines of the attribute rows of `guessed` (each with the attack's guess
    of every member's attribute and the baseline's one guess; `splits`: splits.json's split -> pool
    indices; `attributes`: the members' attributes, splits.json's attribute.target_train)."""
    n = len(splits["target_train"])
    records = split_records(splits, {"target_train": (np.arange(n), True)})
    records["attribute"] = np.asarray(attributes, dtype=np.int64)
    lines = score_lines([row for row, *_ in guessed], CONTRASTIVE_KEY,
                        [np.asarray(g, dtype=np.int64) for _, g, _ in guessed], records, column="guess")
    lines["baseline_guess"] = np.repeat(np.asarray([m for *_, m in guessed], dtype=np.int64), n)
    return lines


def contrastive_score_table(scored: list[tuple[dict, np.ndarray, np.ndarray]], splits: dict) -> pd.DataFrame:
    """CONTRASTIVE_SCORES' lines of the membership rows of `scored` (each with its scores on the
    members then the non-members and its calls on them; `splits`: splits.json's split -> pool
    indices)."""
    records = split_records(splits, {"target_train": (np.arange(len(splits["target_train"])), True),
                                     "target_test": (np.arange(len(splits["target_test"])), False)})
    return with_calls(score_lines([row for row, *_ in scored], CONTRASTIVE_KEY, [s for _, s, _ in scored], records),
                      [called for *_, called in scored])


def load_contrastive(paths, score_paths, guess_paths, expect: dict[str, list[dict]] | None = None) -> pd.DataFrame:
    """contrastive/metrics.csv of each dataset (CONTRASTIVE, each file its `expect` grid), each
    row with its per-record decisions (its `decisions` cell, as privssl.reports.decisions reads
    it), as record_scores.attach_decisions pairs them: a membership row's from its attack's calls
    in contrastive/scores.parquet (`score_paths`, one per file), an attribute row's and its
    baseline's (`baseline_decisions`) from the guesses in contrastive/attribute_guesses.parquet
    (`guess_paths`). The rows are found by key: every row must be in exactly one file, and every
    file's rows among `paths`' (the scripts ask for one file of each per dataset)."""
    metrics = load_csv_files(paths, CONTRASTIVE, expect)
    scores = [(path, load_csv_file(path, CONTRASTIVE_SCORES)) for path in score_paths]
    guesses = [(path, load_csv_file(path, CONTRASTIVE_GUESSES)) for path in guess_paths]
    attribute = (metrics.inference == ATTRIBUTE).to_numpy()
    metrics = attach_decisions(metrics, paths, scores, CONTRASTIVE_KEY, ~attribute)
    metrics = attach_decisions(metrics, paths, guesses, CONTRASTIVE_KEY, attribute, ATTRIBUTE_GUESSES)
    return attach_decisions(metrics, paths, guesses, CONTRASTIVE_KEY, attribute, BASELINE_GUESSES)


def load_contrastive_splits(path) -> dict:
    """The contrastive_data rule's splits.json: pairwise disjoint index lists into the dataset's pool,
    and for each split a task label below n_task, a membership-task label below n_membership_task
    and an attribute below n_attribute per index."""
    record = load_json_file(path, {"dataset": Text(tuple(DATASETS)), "task_map": Text(),
                                   "n_task": Num(2, integer=True), "membership_task_map": Text(),
                                   "n_membership_task": Num(2, integer=True), "n_attribute": Num(2, integer=True),
                                   "splits": Each(Tensor(None, "int", None)), "task": Each(Tensor(None, "int", None)),
                                   "membership_task": Each(Tensor(None, "int", None)),
                                   "attribute": Each(Tensor(None, "int", None))})
    for prefix in ("", "membership_"):
        names, n = record.get(f"{prefix}task_names"), record[f"n_{prefix}task"]
        if not (isinstance(names, list) and len(names) == n and all(isinstance(name, str) for name in names)):
            fail(path, f"{prefix}task_names", repr(names)[:200], f"a list of n_{prefix}task = {n} names")
    info = DATASETS[record["dataset"]]
    bound = {"pool": info.labelled + info.unlabelled, "n_task": record["n_task"],
             "n_membership_task": record["n_membership_task"], "n_attribute": record["n_attribute"]}
    for field, limit in (("splits", "pool"), ("task", "n_task"), ("membership_task", "n_membership_task"),
                         ("attribute", "n_attribute")):
        schema = {s: Tensor((f"|{s}|",), "int", Num(0, limit, high_open=True, integer=True)) for s in CONTRASTIVE_SPLITS}
        check_fields(path, record[field], schema, bound, f"{field}.")
    _check_disjoint(path, record["splits"])
    _check_pool(path, record)
    return record


CONTRASTIVE_MODELS = {"role": Text(("target", "shadow")), "dataset": Text(tuple(DATASETS)),
                      "encoder": Text(ENCODERS), "width": Num(1, integer=True),
                      "in_channels": Num(1, integer=True), "image_size": Num(1, integer=True),
                      "n_task": Num(2, integer=True), "membership_task": Text(),
                      "n_membership_task": Num(2, integer=True)}
# λ is None for a supervised model; the layer maps the encoder's output (F) to the task's classes, the
# membership model's layer to the membership task's (its encoder None: the model's own)
CONTRASTIVE_MODEL = {"kind": Text(("supervised", "contrastive", "talos")), "lambda": Num(0, optional=True),
                     "repeat": COUNT, "encoder": Each(Tensor(None, "number"))}
CONTRASTIVE_LAYER = {"weight": Tensor((1, "F", "n_task")), "bias": Tensor((1, "n_task"))}
CONTRASTIVE_MEMBERSHIP_LAYER = {"weight": Tensor((1, "F", "n_membership_task")),
                                "bias": Tensor((1, "n_membership_task"))}


def load_contrastive_models(path, role: str, dataset: str) -> dict:
    """A contrastive_train file of `role` (target or shadow) on `dataset`: the role's models, each
    an encoder state and a finite linear layer to the task's classes, and its membership model (a
    layer to the membership task's classes, with an encoder of its own only for a supervised
    model); λ None exactly for the supervised models."""
    bundle = load_tensor_file(path, CONTRASTIVE_MODELS, recorded={"role": role, "dataset": dataset})
    models = bundle.get("models")
    if not (isinstance(models, list) and models):
        fail(path, "models", repr(models)[:200], "a non-empty list of models")
    for i, model in enumerate(models):
        check_fields(path, model, CONTRASTIVE_MODEL, prefix=f"models[{i}].")
        if (model["kind"] == "supervised") != (model.get("lambda") is None):
            fail(path, f"models[{i}].lambda", f"{model.get('lambda')} for a {model['kind']} model",
                 "None for supervised models, a number >= 0 otherwise")
        check_fields(path, model.get("layer"), CONTRASTIVE_LAYER, {"n_task": bundle["n_task"]}, f"models[{i}].layer.")
        membership = model.get("membership")
        if not (isinstance(membership, dict) and set(membership) == {"encoder", "layer"}):
            fail(path, f"models[{i}].membership", repr(membership)[:200],
                 "a dict of its encoder (None: the model's own) and its layer")
        if membership["encoder"] is not None:
            if model["kind"] != "supervised":
                fail(path, f"models[{i}].membership.encoder", "an encoder of its own",
                     "None for a contrastive or Talos model, whose encoder serves both tasks")
            check_fields(path, membership, {"encoder": Each(Tensor(None, "number"))}, prefix=f"models[{i}].membership.")
        check_fields(path, membership["layer"], CONTRASTIVE_MEMBERSHIP_LAYER,
                     {"n_membership_task": bundle["n_membership_task"]}, f"models[{i}].membership.layer.")
    return bundle



# --------------------------------------------------------------------------------- the tables, declared

def contrastive_rows(config: dict, dataset: str) -> list[dict]:
    """contrastive/metrics.csv: every membership and the attribute attack on every target model
    (supervised; contrastive = Talos at λ = 0; Talos at every other λ) and repeat; the membership
    attacks again on the membership task's models where the dataset has a task of its own for them."""
    section = config["contrastive"]
    entry = section["datasets"][dataset]
    lambdas = {"supervised": NONE, "contrastive": [0.0],
               "talos": [lam for lam in section["talos"]["lambdas"] if lam != 0]}
    repeats = list(range(section["repeats"]))
    inferences = [MEMBERSHIP] + ([MEMBERSHIP_TASK] if membership_task_of(entry) != entry["task"] else [])
    blocks = []
    for target in TARGET_KINDS:
        if not lambdas[target]:
            continue  # no Talos λ > 0 configured
        key = {"dataset": [dataset], "target": [target], "lambda": lambdas[target], "repeat": repeats}
        blocks += [key | {"inference": inferences, "attack": list(MEMBERSHIP_ATTACKS)},
                   key | {"inference": [ATTRIBUTE], "attack": [ATTRIBUTE_ATTACK]}]
    return blocks


def contrastive_score_rows(config: dict, dataset: str) -> list[dict]:
    """contrastive/scores.parquet: the membership rows of contrastive/metrics.csv."""
    return [block for block in contrastive_rows(config, dataset) if block["inference"] != [ATTRIBUTE]]


# contrastive_train's history of every contrastive and Talos training (the supervised model has
# none): per epoch its loss and contrastive accuracy, and the Talos adversary's (at λ = 0 it is
# trained and not followed); not private (computed on the model's own training set)
CONTRASTIVE_HISTORY = {"repeat": COUNT, "target": Text(("contrastive", "talos")), "lambda": Num(0),
                       "epoch": Num(1, integer=True), "loss": Num(0), "contrastive_accuracy": PROBABILITY,
                       "adversary_loss": Num(0), "adversary_accuracy": PROBABILITY,
                       "grid": (("repeat", "target", "lambda"), ("epoch",))}


def contrastive_history_rows(config: dict, dataset: str, role: str) -> list[dict]:
    """contrastive/<role>_history.csv: every repeat's contrastive model (λ = 0) and Talos model at
    every other λ, one row per fine-tuning epoch; the same for both roles."""
    section = config["contrastive"]
    key = {"repeat": list(range(section["repeats"])),
           "epoch": list(range(1, section["fine_tune"]["epochs"] + 1))}
    talos = [lam for lam in section["talos"]["lambdas"] if lam != 0]
    return [key | {"target": ["contrastive"], "lambda": [0.0]}] + (
        [key | {"target": ["talos"], "lambda": talos}] if talos else [])


def contrastive_guess_rows(config: dict, dataset: str) -> list[dict]:
    """contrastive/attribute_guesses.parquet: the attribute rows of contrastive/metrics.csv."""
    return [block for block in contrastive_rows(config, dataset) if block["inference"] == [ATTRIBUTE]]


CONTRASTIVE_TABLE = Table("contrastive/metrics.csv", CONTRASTIVE, contrastive_rows)
CONTRASTIVE_SCORE_TABLE = Table("contrastive/scores.parquet", CONTRASTIVE_SCORES, contrastive_score_rows)
CONTRASTIVE_GUESS_TABLE = Table("contrastive/attribute_guesses.parquet", CONTRASTIVE_GUESSES, contrastive_guess_rows)
CONTRASTIVE_HISTORY_TABLE = Table(None, CONTRASTIVE_HISTORY, contrastive_history_rows,
                                  part="contrastive/{role}_history.csv")
