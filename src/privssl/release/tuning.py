"""Each release method's training chosen on public data only: the `reference` split, never d.

Procedure (docs/tuning.md). The reference split is public (the sampler's pool), and it has more
than |d| records. Each of `folds` folds draws |d| of its records at random to train on — the
size of d, so that DP-SGD's sampling rate and step count, the certified head's Δ2 and hence the
noise at every ε are exactly those of the release — and scores the trained head on the fold's
other reference records. A point's score pools the decisions of every fold (and noise draw):
accuracy = correct / decisions. The grids are `privssl.release.tuning_spec`; the choice is the
best score, the first point of the grid on ties:

- `head` (A_S, perturbed by the ALM family and attacked as the clean head): trained once and
  released by every method of the family at every ε, so chosen once, for its noise: each point's
  Δ1, Δ2 are sampled on the reference pool by the population sampler (the release's own sampler,
  with its m, ρ, γ and the same pairs for every point), each fold's head is released with that
  noise (`draws` draws per method and ε), and the choice is the point of least worst-case regret
  over every (method, ε), as for the certified head. The noise-free accuracy alone would choose
  the head that fits d best, which is the least stable: on Fashion-MNIST the preset's MLP trained
  by Adam has Δ1 ≈ 5000 and is useless below ε = 10⁴ (docs/sensitivity_ablation.md). The
  release's Δ is sampled afresh (rule `sensitivity`, its own seed), so the choice does not bias
  the sample the guarantee rests on. Without a method of the family, the noise-free accuracy.
- `certified`: one head released at every ε too, so one (λ, R): the point whose largest shortfall
  from the best point of each (certified method, ε) is smallest (least worst-case regret), each
  point's head perturbed exactly as the release would be (its proven Δ2 at n = |d|). The table
  holds every row's regret, so a reader sees what per-ε tuning would add.
- `dpsgd`: one private training per ε, so one point per ε, each scored at that ε's σ (the
  accountant's, for that point's q and steps), and the noise-free limit (σ = 0, clipping kept).

Tuning reads no record of d, so it spends no privacy budget of d: the releases' claims hold as
stated (privssl.release.methods), and the chosen values are a function of public data only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from privssl.io import with_progress
from privssl.release.certified import CertifiedSpec, certified_sensitivity, fit_certified_head
from privssl.release.dpsgd_batched import train_dpsgd_heads
from privssl.release.dpsgd_spec import DPSGDSpec, sampling_plan
from privssl.release.protection import head_inputs, protected_heads
from privssl.release.sensitivity import PopulationSampler, population_sensitivity
from privssl.training.heads import DTYPE, HeadSpec, accuracy, flatten, train_heads_on_sets, unflatten


def folds(n_reference: int, n_train: int, count: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`count` (train, validation) index pairs of the reference split: a random n_train of its
    records, and the rest."""
    if not 0 < n_train < n_reference:
        raise ValueError(f"tuning trains on |d| = {n_train} of the {n_reference} reference records and scores on "
                         f"the rest: needs 0 < |d| < |reference|")
    out = []
    for fold in range(count):
        order = torch.from_numpy(np.random.default_rng([seed, fold]).permutation(n_reference))
        out.append((order[:n_train], order[n_train:]))
    return out


@dataclass(frozen=True)
class TuningFolds:
    """What the tuning trains and scores on, public data only: the reference split's features x and
    labels y, its class count, and the folds' (train, validation) index pairs (`folds`)."""

    x: torch.Tensor
    y: torch.Tensor
    n_classes: int
    splits: list[tuple[torch.Tensor, torch.Tensor]]

    @property
    def train_size(self) -> int:
        """|d|: every fold trains on as many records as the release's fine-tuning set."""
        return len(self.splits[0][0])

    def validation_decisions(self) -> np.ndarray:
        """Each fold's number of validation records: its noise-free decisions."""
        return np.array([len(val) for _, val in self.splits])


@dataclass(frozen=True)
class NoisyScoring:
    """How a point's trained heads are scored after noise: released by each method of `methods` at
    each ε of `eps` (δ = `delta`), `draws` noise draws per fold, seeded from `seed`."""

    methods: tuple[str, ...]
    eps: tuple[float, ...]
    delta: float
    draws: int
    seed: int


def _pooled(correct: np.ndarray, decisions: np.ndarray) -> float:
    return float(correct.sum() / decisions.sum())


def _correct(params: dict, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Correct decisions (B,) of B stacked heads on one validation set."""
    return (accuracy(params, x, y) * len(y)).round().numpy()


def _noisy_hits(hits: dict, head: dict[str, torch.Tensor], queries: torch.Tensor, labels: torch.Tensor,
                scoring: NoisyScoring, record: dict, fold: int) -> None:
    """Appends to hits[(method, ε)] the correct validation decisions of `scoring.draws` releases of
    one fold's head (B = 1) by each method at each ε (noise calibrated to `record`, seeded per fold
    and method)."""
    flat = flatten(head)[0]
    shapes = {k: tuple(v.shape[1:]) for k, v in head.items()}
    eps_grid = list(scoring.eps)
    for m, method in enumerate(scoring.methods):
        noisy, _ = protected_heads(flat, method, eps_grid, scoring.draws, scoring.delta, record,
                                   scoring.seed + 1000 * fold + m)
        right = _correct(unflatten(noisy.reshape(-1, flat.numel()), shapes), queries, labels)
        for e, eps in enumerate(eps_grid):
            hits.setdefault((method, eps), []).append(right.reshape(len(eps_grid), scoring.draws)[e].sum())


def tune_head(data: TuningFolds, points: list[dict], scoring: NoisyScoring | None = None,
              sampler: PopulationSampler | None = None, log: Callable[[str], None] | None = None,
              precision: str | None = None) -> list[dict]:
    """Validation accuracy of A_S at every point: noise-free (method `head`, ε = ∞; one batched
    training per point, its folds stacked) and, given `scoring`, released by each of its
    output-perturbation methods at each ε with the noise of the point's own Δ: `sampler` samples
    it on (x, y), the public pool, with data sets of |d| = the folds' size (the same pairs for
    every point).

    `precision` (config `tuning.head_precision`): the arithmetic of each point's sampled Δ (its 2m
    trainings, most of the tuning's time), whatever the point's own; None keeps the point's. The
    folds' heads, scored noise-free and after noise, train in the point's own precision: the
    noise-free scores also pick the grid's best head, the second baseline of the utility loss
    (rule finetune). The chosen point is trained, and its Δ sampled afresh, in its own precision
    by the release's rules (docs/tuning.md: the two precisions' agreement)."""
    rows = []
    x, y, splits = data.x, data.y, data.splits
    sets = torch.stack([train for train, _ in splits])
    decisions = data.validation_decisions()
    for index, point in with_progress(enumerate(points), len(points), log, "head grid points"):
        own = HeadSpec.from_config(point)
        spec = own if precision is None else HeadSpec.from_config({**point, "precision": precision})
        heads = train_heads_on_sets(own, x, y, sets, data.n_classes)
        fold_heads = [{k: v[f:f + 1] for k, v in heads.items()} for f in range(len(splits))]
        correct = np.array([_correct(head, x[val], y[val])[0] for head, (_, val) in zip(fold_heads, splits)])
        rows.append({"point": index, "eps": math.inf, "method": "head", "correct": int(correct.sum()),
                     "decisions": int(decisions.sum()), "accuracy": _pooled(correct, decisions),
                     "delta1": math.nan, "delta2": math.nan})
        if scoring is None or not scoring.methods:
            continue
        # the same pairs (seed) for every point: the points differ by their training only
        record = population_sensitivity(spec, x, y, data.n_classes, data.train_size, sampler)
        hits = {}  # (method, ε) -> correct decisions per fold
        for f, (head, (_, val)) in enumerate(zip(fold_heads, splits)):
            _noisy_hits(hits, head, x[val], y[val], scoring, record, f)
        noisy_decisions = decisions * scoring.draws
        for (method, eps), right in hits.items():
            rows.append({"point": index, "eps": eps, "method": method, "correct": int(sum(right)),
                         "decisions": int(noisy_decisions.sum()), "accuracy": _pooled(np.array(right), noisy_decisions),
                         "delta1": record["delta1"], "delta2": record["delta2"]})
    return rows


def tune_certified(data: TuningFolds, points: list[dict], scoring: NoisyScoring,
                   log: Callable[[str], None] | None = None) -> list[dict]:
    """Validation accuracy of every (λ, R) point, released by each certified method of `scoring`
    at every ε (`scoring.draws` noise draws per fold) and noise-free (ε = ∞)."""
    rows = []
    for index, point in with_progress(enumerate(points), len(points), log, "certified grid points"):
        spec = CertifiedSpec.from_config(point)
        record = certified_sensitivity(data.train_size, data.n_classes, spec)
        correct = {}  # (method, ε) -> correct decisions per fold
        for f, (train, val) in enumerate(data.splits):
            fit = fit_certified_head(data.x[train], data.y[train], data.n_classes, spec)
            queries = head_inputs(data.x[val], spec.clip_norm)
            correct.setdefault(("noise_free", math.inf), []).append(_correct(fit.params, queries, data.y[val]).sum())
            _noisy_hits(correct, fit.params, queries, data.y[val], scoring, record, f)
        for (method, eps), hits in correct.items():
            # the noise-free head is one head per fold; each noisy release, `draws` of them
            decisions = data.validation_decisions() * (1 if math.isinf(eps) else scoring.draws)
            hits = np.array(hits)
            rows.append({"point": index, "eps": eps, "method": method, "correct": int(hits.sum()),
                         "decisions": int(decisions.sum()), "accuracy": _pooled(hits, decisions)})
    return rows


def tune_dpsgd(data: TuningFolds, head_spec: HeadSpec, points: list[dict], eps_grid: list[float], delta: float,
               seed: int, log: Callable[[str], None] | None = None) -> list[dict]:
    """Validation accuracy of every DP-SGD point at every ε of the grid that its (q, steps) can
    reach (σ by the point's accountant) and at σ = 0: per point one batched training of
    (ε's + 1) × folds heads (privssl.release.dpsgd_batched, Opacus' algorithm). An unreachable
    ε gets a row with no score (it cannot be chosen there)."""
    # here only: the accountants import dp_accounting and SciPy, a second of CPU that the head's and
    # the certified head's tuning jobs need not pay
    from privssl.accounting.dpsgd import calibrate_grid

    rows = []
    x, y, splits = data.x, data.y, data.splits
    n = data.train_size
    sets = torch.stack([train for train, _ in splits])
    calibrated = {}  # (q, steps, accountant) -> σ per ε: points differing in lr or clip share it
    for index, point in with_progress(enumerate(points), len(points), log, "DP-SGD grid points"):
        spec = DPSGDSpec.from_config(point)
        sample_rate, steps = sampling_plan(n, spec)
        plan = (sample_rate, steps, spec.accountant)
        if plan not in calibrated:
            calibrated[plan] = calibrate_grid(eps_grid, delta, sample_rate, steps, spec.accountant)
        reached, unreachable = calibrated[plan]
        levels = [(c.eps, c.noise_multiplier) for c in reached] + [(math.inf, 0.0)]
        sigma = torch.tensor([s for _, s in levels], dtype=DTYPE).repeat_interleave(len(splits))
        heads = train_dpsgd_heads(x, y, sets.repeat(len(levels), 1), data.n_classes, head_spec, spec, sigma, seed)
        decisions = data.validation_decisions()
        for e, (eps, noise_multiplier) in enumerate(levels):
            hits = np.array([_correct({k: v[e * len(splits) + f:e * len(splits) + f + 1] for k, v in heads.items()},
                                      x[val], y[val])[0] for f, (_, val) in enumerate(splits)])
            rows.append({"point": index, "eps": eps, "method": "dpsgd", "noise_multiplier": noise_multiplier,
                         "sample_rate": sample_rate, "steps": steps, "correct": int(hits.sum()),
                         "decisions": int(decisions.sum()), "accuracy": _pooled(hits, decisions)})
        rows += [{"point": index, "eps": u.eps, "method": "dpsgd", "noise_multiplier": math.nan,
                  "sample_rate": sample_rate, "steps": steps, "correct": 0, "decisions": 0, "accuracy": math.nan}
                 for u in unreachable]
    return rows


def best_point(rows: list[dict], eps: float) -> int | None:
    """The point of the highest pooled accuracy at ε `eps` (∞: the noise-free limit); the first
    such point on ties; None if no point is scored there (an ε no point reaches)."""
    scores = {row["point"]: row["accuracy"] for row in rows if row["eps"] == eps and not math.isnan(row["accuracy"])}
    if not scores:
        return None
    top = max(scores.values())
    return min(p for p, v in scores.items() if v == top)


def regrets(rows: list[dict]) -> list[float]:
    """Each row's shortfall from the best point at its own (method, ε): best accuracy − its
    accuracy (NaN where unscored)."""
    best: dict[tuple, float] = {}
    for row in rows:
        if not math.isnan(row["accuracy"]):
            key = (row["method"], row["eps"])
            best[key] = max(best.get(key, -math.inf), row["accuracy"])
    return [best.get((row["method"], row["eps"]), math.nan) - row["accuracy"] for row in rows]


def least_regret_point(rows: list[dict]) -> int:
    """One point for every finite ε (a head released at every ε): the one whose largest shortfall
    from each (method, ε)'s own best is smallest, so that no ε of the grid is given up for the
    others (the mean over the grid would favour the large ε, where every point is near its
    noise-free limit); the first such point on ties."""
    finite = [(row, regret) for row, regret in zip(rows, regrets(rows)) if math.isfinite(row["eps"])]
    # before the max: max(0.0, nan) is 0.0, which would hide an unscored (method, ε)
    if not finite or any(math.isnan(regret) for _, regret in finite):
        raise ValueError("every point must be scored at every ε to compare their regrets")
    worst: dict[int, float] = {}
    for row, regret in finite:
        worst[row["point"]] = max(worst.get(row["point"], 0.0), regret)
    least = min(worst.values())
    return min(p for p, v in worst.items() if v == least)
