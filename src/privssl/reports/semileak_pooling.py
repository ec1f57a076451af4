"""Semi-Leak's trainings pooled: a claim measured in each of R trainings (`repeat`: its own
targets, shadows and attack) becomes one row of privssl.reports.semileak_report's table.

A repeat whose models decided every record alike is a copy of an earlier one (a cached model, the
same seed), not a new training: `training_fingerprints` finds copies from the metric attacks'
per-record ranks and the test decisions, `trainings_of` counts the independent trainings of each
model, `distinct_drafts` keeps one row per training, and `pooled` takes the mean of every side and
part over the trainings with over_trainings' interval (records and trainings), judging each part
on its pooled difference.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from privssl.attacks.repeated import over_trainings
from privssl.attacks.semi_leak_spec import METRIC_ATTACKS
from privssl.reports.contrastive_report import difference_text
from privssl.reports.verdicts import CONTRADICTED, REPRODUCED, combined, largest_need


def _least_settled_first(part: dict) -> tuple[int, float]:
    """A part's place in a claim whose row shows its least settled part: a contradicted part first,
    then an unresolved one, then a reproduced one; within each, the lowest interval first."""
    return {CONTRADICTED: 0, REPRODUCED: 2}.get(part["verdict"], 1), part["d"].lo


def _same(texts: list[str]) -> str:
    """One text where every training gives it, else the first with each training's in order."""
    distinct = list(dict.fromkeys(texts))
    return distinct[0] if len(distinct) == 1 else f"{texts[0]} (by training: {' | '.join(texts)})"


def _parts_note(parts: list[dict]) -> str:
    return "; ".join(f"{p['name']}: {difference_text(p['d'].value, p['d'].lo, p['d'].hi)} ({p['verdict']})"
                     for p in parts)


def pooled(drafts: list[dict], trainings: int, quotes) -> dict:
    """The table's row of one claim from its rows of R trainings (one each): every side and part
    the mean over the trainings with over_trainings' interval (records and trainings), each part
    judged on its pooled difference; the claim's verdict from its parts (verdicts.combined) and,
    while unresolved, the largest need of the parts not reproduced. `trainings`: the independent
    trainings behind the fewer-trained arm (`trainings_of`), for the ledger's rule; the drafts are of
    distinct trainings (`distinct_drafts`)."""
    first = drafts[0]
    names = [p["name"] for p in first["parts"]]
    by_name = [{p["name"]: p for p in d["parts"]} for d in drafts]
    if any(sorted(parts) != sorted(names) for parts in by_name):
        raise ValueError(f"metrics.csv: the trainings of {first['key']} compare different parts "
                         f"({[sorted(parts) for parts in by_name]})")
    parts = []
    for name in names:
        d = over_trainings([parts_of[name]["d"] for parts_of in by_name])
        verdict, need = first["parts"][names.index(name)]["test"](d)
        parts.append({"name": name, "d": d, "verdict": verdict, "need": need})
    if first["least_settled_first"]:  # parts each training ordered by its own AUCs: the pooled verdicts decide
        parts.sort(key=_least_settled_first)
    verdict = combined([p["verdict"] for p in parts])
    need = largest_need([p["need"] for p in parts if p["verdict"] != REPRODUCED]) if verdict not in (
        REPRODUCED, CONTRADICTED) else np.nan
    a, b = (over_trainings([d[side] for d in drafts]) for side in ("a", "b"))
    compared = _same([d["compared"] for d in drafts])
    if first["least_settled_first"]:  # side b: the least settled part's, pooled over the trainings alike
        lead = parts[0]["name"]
        b, compared = over_trainings([parts_of[lead]["b"] for parts_of in by_name]), by_name[0][lead]["compared"]
    note = first["note"] if len(drafts) == 1 else (
        f"the mean over {len(drafts)} trainings (interval: records and trainings, attacks.repeated.over_trainings)"
        + (f"; training 0: {first['note']}" if first["note"] else ""))
    if len(parts) > 1:
        note = (note + "; " if note else "") + "parts: " + _parts_note(parts)
    dataset, claim, target, eps = first["key"]
    thesis, main = quotes[first["quote"]], parts[0]["d"]
    return {"dataset": dataset, "claim": claim, "target": target, "eps": eps,
            "quantity": _same([d["quantity"] for d in drafts]), "compared": compared,
            **{f"value_{k}{s}": getattr(side, key) for k, side in (("a", a), ("b", b)) for s, key in
               (("", "value"), ("_lo", "lo"), ("_hi", "hi"))}, "n_a": a.n, "n_b": b.n,
            "difference": main.value, "difference_lo": main.lo, "difference_hi": main.hi, "design": first["design"],
            "test": first["test"], "trainings": trainings, "verdict": verdict, "n_for_80pct_power": need,
            "note": note, "thesis_statement": thesis["statement"], "thesis_values": thesis["quoted_values"],
            "thesis_source": thesis["source"]}


def training_fingerprints(metrics: pd.DataFrame) -> dict[tuple, tuple]:
    """(dataset, target, ε, repeat) -> what its models decided: every metric attack's score ranks
    and test decisions (as decisions.distinct_trainings reads a repeat). Two repeats of equal
    fingerprints are one training, their models copies (a cached model, the same seed). Only the
    metric attacks' scores count: they are functions of the model's posteriors alone, where A_NN's
    and A_DA's also move with the attack's seed (a copied model attacked again would pass for a
    new training). ε is None for the undefended targets."""
    own = metrics[metrics.attack.isin(METRIC_ATTACKS)]
    digests = own.assign(ranks_digest=[hashlib.sha256(np.asarray(r, dtype=np.float64).tobytes()).hexdigest()
                                       for r in own.ranks], eps=own.eps.fillna(-1.0))  # NaN keys do not group
    return {(dataset, target, None if e == -1.0 else float(e), int(repeat)):
            tuple(tuple(sorted(group[c].astype(str))) for c in ("ranks_digest", "test_decisions"))
            for (dataset, target, e, repeat), group in digests.groupby(["dataset", "target", "eps", "repeat"],
                                                                        sort=False)}


def trainings_of(fingerprints: dict[tuple, tuple]) -> dict[tuple, int]:
    """(dataset, target, ε) -> its independent trainings: the distinct fingerprints of its repeats
    (`training_fingerprints`)."""
    distinct: dict[tuple, set] = {}
    for (dataset, target, eps, _), fingerprint in fingerprints.items():
        distinct.setdefault((dataset, target, eps), set()).add(fingerprint)
    return {key: len(found) for key, found in distinct.items()}


def distinct_drafts(group: list[dict], fingerprints: dict[tuple, tuple]) -> list[dict]:
    """The rows of one claim from distinct trainings: a repeat whose models in every arm of the
    claim are copies of an earlier repeat's is dropped, so that over_trainings pools each training
    once. (A repeat that copies one arm only stays: its other arm is a training of its own, and the
    row's `trainings` counts the fewer-trained arm.)"""
    dataset, seen, kept = group[0]["key"][0], set(), []
    for draft in group:
        signature = tuple(fingerprints[dataset, target, None if eps is None else float(eps), draft["repeat"]]
                          for target, eps in draft["arms"])
        if signature not in seen:
            seen.add(signature)
            kept.append(draft)
    return kept
