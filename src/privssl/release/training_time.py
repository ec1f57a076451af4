"""What the training-time branches (DPCL, DPAdapter) share: the private sets they train on
(loaded by `privssl.artefacts.image.load_private_sets`), the release record the attack rule reads, and
the utility rows of `utility.csv`, noise-free limits (ε = ∞) included.

A training-time release is a whole network, not a head on the public features, so what the
attacks need from it is its posteriors: on every member (d) and non-member, on the test split
(utility), and — for the adaptive attack — the posteriors of the attacker's shadow network,
trained by the same algorithm at the same ε on the shadow records `inside` of the attacker
file, on the attacker's balanced shadow pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from privssl.io import pack_decisions
from privssl.release.methods import NOISE_FREE, Guarantee, training_time_guarantee
from privssl.release.protection import utility_loss

EVALUATED = ("finetune", "nonmember", "test")  # the splits a release is queried on


@dataclass
class PrivateSets:
    """Images and labels of the private set d, the evaluation splits and the attacker's shadow data."""

    images: dict[str, torch.Tensor]  # finetune, nonmember, test, shadow_inside, shadow_pairs, pretrain
    labels: dict[str, torch.Tensor]
    n_classes: int
    attacker: dict  # the shadow rule's attacker file


def draw_seed(seed: int, *keys: int) -> int:
    """An independent seed per (stage seed, keys...), e.g. (variant, ε index, repeat, role)."""
    return int(np.random.SeedSequence([seed, *keys]).generate_state(1)[0])


def release_record(method: str, eps: list[float], repeats: int, n_classes: int,
                   probs: dict[str, list[torch.Tensor]]) -> dict:
    """The file the attack rule reads: posteriors (E, R, n, C) per queried set, releases in
    (ε, repeat) order."""
    shaped = {name: torch.stack(rows).reshape(len(eps), repeats, *rows[0].shape) for name, rows in probs.items()}
    return {"method": method, "eps": torch.tensor(eps, dtype=torch.float64), "repeats": repeats,
            "n_classes": n_classes, **shaped}


def utility_rows(dataset: str, method: str, runs: list[dict], delta: float, clean_accuracy: float) -> pd.DataFrame:
    """utility.csv rows of a training-time method, one per (ε, repeat). Each run dict holds eps,
    repeat, correct (whether the release classifies each test record right), noise_multiplier,
    sensitivity (the gradient's Δ), mechanisms, sample_rate, steps and eps_spent. A run at ε = ∞
    (σ = 0, eps_spent ∞) is the method's noise-free limit: the same training, clipping kept, which
    claims nothing and is not released."""
    rows = []
    for run in runs:
        correct = torch.as_tensor(run["correct"]).cpu()
        accuracy = correct.to(torch.float64).mean()
        if math.isinf(run["eps"]):
            if run["noise_multiplier"] != 0:
                raise ValueError(f"a noise-free run (ε = ∞) has σ = {run['noise_multiplier']}; it must be 0")
            claim = Guarantee("none", NOISE_FREE)
        else:
            claim = training_time_guarantee(method, run["eps_spent"], delta, run["noise_multiplier"],
                                            run["mechanisms"], run["sensitivity_statement"])
        rows.append({"dataset": dataset, "mechanism": method, "eps": run["eps"], "delta": delta,
                     "repeat": run["repeat"], "noise_scale": run["noise_multiplier"], "sensitivity_norm": "l2",
                     "sensitivity": run["sensitivity"], "guarantee_kind": claim.kind, "guarantee": claim.statement,
                     "clean_accuracy": clean_accuracy, "accuracy": float(accuracy),
                     "utility_loss": float(utility_loss(accuracy, clean_accuracy)), "n_test": len(correct),
                     "decisions": pack_decisions(correct.numpy()),
                     # the network is the release's own, not the clean head perturbed: no record-by-record
                     # pairing with the clean head (its utility loss takes the clean accuracy as exact)
                     "clean_decisions": None, "best_clean_decisions": None,
                     "noise_multiplier": run["noise_multiplier"], "sample_rate": run["sample_rate"],
                     "steps": run["steps"], "eps_spent": run["eps_spent"]})
    return pd.DataFrame(rows)
