"""The training-time branch's artefacts (DPCL, DPAdapter): the training-time release record, the
DPAdapter results table and the DPCL accounting table with its relation."""

from __future__ import annotations

import pandas as pd

from privssl.artefacts.specs import COUNT, POSITIVE, PROBABILITY, Decisions, Num, Tensor, Text
from privssl.artefacts.tables import Table, _first_line
from privssl.grids import NONE
from privssl.release.methods import DPCL_METHOD_OF_VARIANT, GUARANTEE_KINDS, TRAINING_TIME_METHODS


def accountant_within_target(path, frame: pd.DataFrame) -> None:
    """The calibration returns the smallest noise whose accountant ε is at most the target, so a
    row whose accountant ε exceeds its target ε (beyond float rounding) was not produced by it and
    would publish a budget the release does not meet. At a fixed noise multiplier there is no target.
    The calibrating accountant is the RDP one for sampling without replacement; the PLD ε of the
    Poisson analogue beside it is no claim and has no such bound."""
    over = (frame.eps_rdp_without_replacement > frame.eps_target * (1 + 1e-9)).to_numpy()  # NaN target: never over
    _first_line(path, "eps_rdp_without_replacement", over, frame.eps_rdp_without_replacement,
                "at most the row's eps_target: the calibrated noise reaches the target")


# a training-time release (privssl.release.training_time): posteriors (ε, repeat, records, classes) of the
# released network on each queried split, and of the attacker's shadow network on its pairs
TRAINING_RELEASE = {"method": Text(TRAINING_TIME_METHODS), "eps": Tensor(("E",), values=POSITIVE),
                    "repeats": Num(1, integer=True), "n_classes": Num(2, integer=True),
                    **{name: Tensor(("E", "repeats", size, "n_classes"), values=PROBABILITY) for name, size in
                       (("finetune", "|d|"), ("nonmember", "|nonmember|"), ("test", "|test|"), ("shadow_pairs", "K"))}}
# training-time branch: dpadapter_train's results, dpcl_train's accounting (read by its report)
DPADAPTER_RESULTS = {"dataset": Text(), "pretraining": Text(("standard", "sam", "dpadapter")), "rho": Num(0),
                     "eps": POSITIVE, "repeat": COUNT,
                     # the pre-training a row's fine-tuning starts from: the procedure the claims compare
                     "pretraining_seed": COUNT,
                     "accuracy": PROBABILITY, "n_test": Num(2, integer=True), "decisions": Decisions(("n_test",)),
                     "robust_accuracy": PROBABILITY, "pretrain_accuracy": PROBABILITY,
                     "pretrain_robust_accuracy": PROBABILITY, "robust_noise": POSITIVE,
                     "robust_draws": Num(1, integer=True), "noise_multiplier": POSITIVE, "eps_spent": Num(0),
                     "grid": (("dataset", "pretraining", "rho"), ("eps", "repeat"))}
DPCL_ACCOUNTING = {"dataset": Text(), "method": Text(TRAINING_TIME_METHODS), "variant": Text(("naive", "dpcl")),
                   "role": Text(("target", "shadow")), "n": Num(1, integer=True), "delta": Num(0, 1, low_open=True,
                                                                                             high_open=True),
                   "noise_multiplier": POSITIVE, "mechanisms": Text(), "encoder_steps": COUNT, "head_steps": COUNT,
                   "encoder_batch": Num(1, integer=True), "head_batch": Num(1, integer=True),
                   "eps_target": Num(0, low_open=True, nan=True),  # empty at a fixed noise multiplier
                   "eps_rdp_without_replacement": Num(0), "eps_pld_poisson": Num(0),
                   "guarantee_kind": Text(GUARANTEE_KINDS), "sensitivities": Text(),
                   "relations": accountant_within_target}
# not private (computed on the training data without noise, or the public data): dpadapter_train's
# pre-training history, per epoch (the warm-up's, then SAM's; the standard pre-training has no
# perturbed loss), and dpcl_train's per epoch of every released encoder
DPADAPTER_HISTORY = {"dataset": Text(), "pretraining": Text(("standard", "sam", "dpadapter")), "rho": Num(0),
                     "repeat": COUNT, "epoch": Num(1, integer=True), "phase": Text(("warmup", "sam")),
                     "loss": Num(0), "perturbed_loss": Num(0, nan=True),
                     "grid": (("dataset", "pretraining", "rho", "repeat"), ("epoch",))}
DPCL_HISTORY = {"dataset": Text(), "method": Text(TRAINING_TIME_METHODS), "objective": Text(),
                "eps": POSITIVE, "repeat": COUNT, "epoch": Num(1, integer=True), "loss": Num(),
                "clipped_fraction": PROBABILITY, "knn_accuracy": PROBABILITY, "eps_spent": Num(0),
                "grid": (("dataset", "method", "eps", "repeat"), ("epoch",))}



# --------------------------------------------------------------------------------- the tables, declared

def dpadapter_rows(config: dict, dataset: str) -> list[dict]:
    """dpadapter/results.csv: standard (ρ = 0), SAM and DPAdapter at every radius, each DP-SGD
    fine-tuned at every ε and repeat."""
    section = config["dpadapter"]
    key = {"dataset": [dataset], "eps": section["eps"], "repeat": list(range(section["repeats"]))}
    return [key | {"pretraining": ["standard"], "rho": [0.0]},
            key | {"pretraining": ["sam", "dpadapter"], "rho": section["radii"]}]


def dpcl_accounting_rows(config: dict, dataset: str) -> list[dict]:
    """dpcl/accounting.csv: per variant, target ε (empty at a fixed noise multiplier) and role."""
    section = config["dpcl"]
    return [{"dataset": [dataset], "method": [DPCL_METHOD_OF_VARIANT[v]], "variant": [v],
             "role": ["target", "shadow"], "eps_target": section["eps"] or NONE} for v in section["variants"]]


def dpadapter_history_rows(config: dict, dataset: str) -> list[dict]:
    """dpadapter/history.csv: every pre-training of dpadapter/results.csv's rows (each repeat's),
    one row per epoch, its warm-up's first."""
    section = config["dpadapter"]
    pretrain = section["pretrain"]
    key = {"dataset": [dataset], "repeat": list(range(section["repeats"])),
           "epoch": list(range(1, pretrain["warmup_epochs"] + pretrain["epochs"] + 1))}
    return [key | {"pretraining": ["standard"], "rho": [0.0]},
            key | {"pretraining": ["sam", "dpadapter"], "rho": section["radii"]}]


def dpcl_history_rows(config: dict, dataset: str) -> list[dict]:
    """diagnostics/not_private/dpcl_history.csv: every released encoder (variant, ε: its target or,
    at a fixed noise multiplier, the ε it spent; repeat), one row per encoder epoch."""
    section = config["dpcl"]
    return [{"dataset": [dataset], "method": [DPCL_METHOD_OF_VARIANT[v] for v in section["variants"]],
             "eps": section["eps"], "repeat": list(range(section["repeats"])),  # None: any, the spent ε
             "epoch": list(range(1, section["encoder"]["epochs"] + 1))}]


DPADAPTER_TABLE = Table("dpadapter/results.csv", DPADAPTER_RESULTS, dpadapter_rows)
DPADAPTER_HISTORY_TABLE = Table("dpadapter/history.csv", DPADAPTER_HISTORY, dpadapter_history_rows)
DPCL_HISTORY_TABLE = Table("diagnostics/not_private/dpcl_history.csv", DPCL_HISTORY, dpcl_history_rows)
DPCL_ACCOUNTING_TABLE = Table("dpcl/accounting.csv", DPCL_ACCOUNTING, dpcl_accounting_rows)
