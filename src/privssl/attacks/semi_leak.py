"""Membership inference against semi-supervised models (thesis Ch. 3, Semi-Leak): the features of
A_NN and A_DA, the analyses of §3.4.4, and the protocol that fits every attack on a shadow model.

- A_NN (§3.2.2): the target's posteriors sorted in descending order, into an MLP (64-32, Adam).
- Metric attacks (§3.2.2, Song & Mittal): correctness, confidence, entropy, modified entropy,
  thresholds fitted on the shadow (privssl.attacks.mia, the code every branch uses).
- A_DA (§3.3, Algorithm 1): K weak and K strong views of a record, the target's posteriors of
  each, three K×K distance matrices (weak–weak, strong–strong, weak–strong) under a distance
  between distributions (JS by default), each flattened and sorted in descending order, and the
  3K² values concatenated into the same MLP. The thesis calls them similarities; all four are
  distances (larger = less alike), which the sort makes immaterial.

Each target is attacked with a shadow trained the same way (same algorithm, step, defence) on the
attacker's parts (shadow train = 'in', shadow test = 'out'), so the attacks on a defence are
adaptive. Every score is evaluated for all members, the labelled members and the unlabelled
members of the target, each against every non-member (the thesis's unbalanced AUCs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from privssl.attacks.mia import AttackSpec, best_threshold, metric_scores, train_attack_mlps
from privssl.attacks.semi_leak_spec import DA_ATTACK, METRIC_ATTACKS, NN_ATTACK
from privssl.attacks.statistics import membership_metrics
from privssl.io import Progress
from privssl.training.semi_supervised_spec import MEMBER_KINDS, SIMILARITIES

_EPS = 1e-12  # guards log(0) in the JS distance


def distance_matrix(a: torch.Tensor, b: torch.Tensor, similarity: str) -> torch.Tensor:
    """(..., K, L) distances between the rows of a (..., K, C) and b (..., L, C), probability vectors:
    js = √(JS divergence) in nats (scipy's `jensenshannon`); cosine = 1 − cos; correlation =
    1 − Pearson's r (scipy's `correlation`); euclidean = L2."""
    a, b = a.double(), b.double()
    if similarity == "euclidean":
        return torch.cdist(a, b)
    if similarity in ("cosine", "correlation"):
        if similarity == "correlation":
            a, b = a - a.mean(-1, keepdim=True), b - b.mean(-1, keepdim=True)
        a = a / a.norm(dim=-1, keepdim=True).clamp(min=_EPS)
        b = b / b.norm(dim=-1, keepdim=True).clamp(min=_EPS)
        return (1 - a @ b.transpose(-1, -2)).clamp(min=0)
    if similarity == "js":
        # JS(p, q) = H((p + q) / 2) − (H(p) + H(q)) / 2: the row entropies once, one pairwise entropy
        m = (a.unsqueeze(-2) + b.unsqueeze(-3)) / 2  # (..., K, L, C)
        js = _entropy(m) - (_entropy(a).unsqueeze(-1) + _entropy(b).unsqueeze(-2)) / 2
        return js.clamp(min=0).sqrt()
    raise ValueError(f"unknown similarity {similarity!r}; allowed: {', '.join(SIMILARITIES)}")


def augmentation_features(weak: torch.Tensor, strong: torch.Tensor, similarity: str) -> torch.Tensor:
    """A_DA's input (..., 3K²) from the posteriors of K weak and K strong views (..., K, C)."""
    blocks = [distance_matrix(weak, weak, similarity), distance_matrix(strong, strong, similarity),
              distance_matrix(weak, strong, similarity)]
    return torch.cat([m.flatten(-2).sort(-1, descending=True).values for m in blocks], -1).float()


def sorted_posteriors(probs: torch.Tensor) -> torch.Tensor:
    """A_NN's input: the posteriors in descending order (Salem et al.)."""
    return probs.sort(-1, descending=True).values.float()


def top1_posteriors(probs: torch.Tensor) -> torch.Tensor:
    """The top-1 defence (Shokri et al.): the model answers with its label and that label's
    posterior only. The attacker completes it as p_max on the label and (1 − p_max) / (C − 1) on
    every other class (the maximum-entropy distribution with that answer), so that every attack
    reads a probability vector and learns nothing the answer does not say."""
    top, label = probs.max(-1, keepdim=True)
    rest = (1 - top) / (probs.shape[-1] - 1)
    return torch.where(torch.arange(probs.shape[-1]) == label, top, rest.expand_as(probs))


def _entropy(probs: torch.Tensor) -> torch.Tensor:
    return -(probs * torch.log(probs.clamp(min=_EPS))).sum(-1)  # 0 · log ε = 0: the 0 log 0 = 0 convention


def prediction_entropy(probs: torch.Tensor) -> torch.Tensor:
    return _entropy(probs.double())


def _histogram_js(a: np.ndarray, b: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """√(JS divergence) in bits between the histograms of the rows of a and b (..., n) on `edges`."""
    def hist(x):
        counts = np.stack([np.histogram(row, edges)[0] for row in x.reshape(-1, x.shape[-1])]).astype(float)
        return counts / counts.sum(-1, keepdims=True)

    p, q = hist(a), hist(b)
    m = (p + q) / 2

    def entropy(x):
        return -np.sum(x * np.log2(np.where(x > 0, x, 1)), -1)

    return np.sqrt(np.clip(entropy(m) - (entropy(p) + entropy(q)) / 2, 0, None)).reshape(a.shape[:-1])


def entropy_js_distance(member_probs: torch.Tensor, nonmember_probs: torch.Tensor, bins: int = 20,
                        n_boot: int = 200, seed: int = 0) -> tuple[float, float, float]:
    """JS distance (Entropy) of §3.4.4: √(JS divergence) in bits between the histograms of the
    members' and the non-members' prediction entropies, on `bins` equal bins over [0, log C]
    (0: the same distribution, 1: disjoint supports), bias-corrected, with a 95 % interval.

    The plug-in distance of two finite histograms is biased upwards (two samples of one
    distribution are never exactly alike: with 400 records per side and 20 bins it is ≈ 0.1),
    and its percentile-bootstrap interval inherits the bias and can miss the estimate itself.
    So: the bootstrap bias correction 2θ̂ − mean(θ*) as the value and the basic bootstrap interval
    [2θ̂ − q97.5(θ*), 2θ̂ − q2.5(θ*)] (members and non-members resampled separately), clipped at 0."""
    hi = math.log(member_probs.shape[-1])
    edges = np.linspace(0, hi, bins + 1)
    members, nonmembers = (prediction_entropy(p).clamp(0, hi).numpy() for p in (member_probs, nonmember_probs))
    point = float(_histogram_js(members, nonmembers, edges))
    rng = np.random.default_rng(seed)
    draws = _histogram_js(members[rng.integers(0, len(members), (n_boot, len(members)))],
                          nonmembers[rng.integers(0, len(nonmembers), (n_boot, len(nonmembers)))], edges)
    lo, up = np.quantile(draws, [0.025, 0.975])
    return max(0.0, 2 * point - float(draws.mean())), max(0.0, 2 * point - float(up)), max(0.0, 2 * point - float(lo))


@dataclass
class Observed:
    """One model's answers on one role's records: clean posteriors (n, C) and, for A_DA, the
    posteriors of the weak and strong views (n, K, C) (None where A_DA is not run)."""

    clean: torch.Tensor
    weak: torch.Tensor | None = None
    strong: torch.Tensor | None = None

    def defended(self, defence: str) -> "Observed":
        if defence != "top1":
            return self
        return Observed(*(None if p is None else top1_posteriors(p) for p in (self.clean, self.weak, self.strong)))


@dataclass
class Case:
    """One target model (at one step, behind one defence) with the shadow trained its way, and the
    A_DA settings (views K, similarity) to attack it with."""

    key: dict
    target: Observed
    shadow: Observed
    augmentation: list[tuple[int, str]]
    member_kinds: tuple[str, ...] = MEMBER_KINDS  # the supervised reference has labelled members only: "all"
    columns: dict = field(default_factory=dict)  # the model's own measures, copied onto each of its rows


@dataclass(frozen=True)
class Records:
    """Labels and membership of the records an attack sees: the shadow's in/out records, the
    target's members (labelled or not) and non-members."""

    shadow_labels: torch.Tensor
    shadow_member: torch.Tensor  # bool
    target_labels: torch.Tensor
    target_member: torch.Tensor  # bool
    member_kinds: dict  # kind -> bool mask over the target's records (members of that kind)


@dataclass(frozen=True)
class RowScores:
    """A metrics row's per-record scores: which of the target's records it scored (positions in the
    target's record order) and the attack's score of each; the report pairs rows of one member
    kind record by record from them (privssl.attacks.paired_auc)."""

    records: np.ndarray  # int positions among the target's records
    scores: np.ndarray  # float64, one per record


def _score_rows(case: Case, attack: str, scores: torch.Tensor, threshold: float, records: Records,
                fpr: tuple, bootstrap: int, seed: int, extra: dict) -> list[tuple[dict, RowScores]]:
    rows = []
    nonmember = ~records.target_member
    for kind in case.member_kinds:
        chosen = (records.member_kinds[kind] | nonmember).numpy()
        values = scores.double().numpy()[chosen]
        metrics = membership_metrics(values, records.target_member.numpy()[chosen], threshold, fpr, bootstrap, seed)
        rows.append(({**case.key, "attack": attack, **extra, "member_kind": kind, **metrics, **case.columns},
                     RowScores(np.flatnonzero(chosen), values)))
    return rows


def run_attacks(cases: list[Case], records: Records, spec: AttackSpec, fpr: tuple, bootstrap: int, seed: int,
                default_views: int, default_similarity: str,
                log: Callable[[str], None] | None = None) -> list[tuple[dict, RowScores]]:
    """Every attack on every case: one stacked training per MLP input size (A_NN for all cases,
    A_DA for all cases of one (K, similarity)), thresholds and scores of the metric attacks; each
    metrics row with its per-record scores. `log` gets their progress, per case scored by A_NN and
    the metric attacks or by one A_DA."""
    rows: list[tuple[dict, RowScores]] = []
    progress = Progress(log or (lambda _: None), "cases scored (A_NN and metric attacks, then each A_DA setting)",
                        len(cases) + sum(len(set(c.augmentation)) for c in cases))
    shadow_member = records.shadow_member.numpy()
    nn_models = train_attack_mlps(torch.stack([sorted_posteriors(c.shadow.clean) for c in cases]),
                                  records.shadow_member, spec, seed)
    for case, model in zip(cases, nn_models):
        base = {"similarity": "", "views": np.nan}
        with torch.no_grad():
            scores = torch.sigmoid(model(sorted_posteriors(case.target.clean)).squeeze(-1))
        rows += _score_rows(case, NN_ATTACK, scores, 0.5, records, fpr, bootstrap, seed, base)
        shadow_metrics = metric_scores(case.shadow.clean, records.shadow_labels)
        target_metrics = metric_scores(case.target.clean, records.target_labels)
        for attack in METRIC_ATTACKS:
            threshold = best_threshold(shadow_metrics[attack].numpy(), shadow_member)
            rows += _score_rows(case, attack, target_metrics[attack], threshold, records, fpr, bootstrap, seed, base)
        progress.advance()
    settings = sorted({s for c in cases for s in c.augmentation})
    for views, similarity in settings:
        chosen = [c for c in cases if (views, similarity) in c.augmentation]
        features = [augmentation_features(c.shadow.weak[:, :views], c.shadow.strong[:, :views], similarity)
                    for c in chosen]
        models = train_attack_mlps(torch.stack(features), records.shadow_member, spec, seed)
        for case, model in zip(chosen, models):
            target = augmentation_features(case.target.weak[:, :views], case.target.strong[:, :views], similarity)
            with torch.no_grad():
                scores = torch.sigmoid(model(target).squeeze(-1))
            extra = {"similarity": similarity, "views": views,
                     "is_default": views == default_views and similarity == default_similarity}
            rows += _score_rows(case, DA_ATTACK, scores, 0.5, records, fpr, bootstrap, seed, extra)
            progress.advance()
    for row, _ in rows:
        row.setdefault("is_default", True)
    return rows
