"""Black-box membership inference against a released head (paper §6.2 and Appendix B).

The paper's attack (`shadow_mlp`, after Shokri et al. 2017): the attacker trains a shadow head
the victim's way on half of its own data ('in'), keeps the other half 'out', and trains an
MLP with 5 ReLU hidden layers (Adam, lr 1e-3) to tell 'in' from 'out' from the pair
(probability vector, one-hot true label). It is then applied to the victim's outputs.

Metric attacks (seed 003 Ch. 4; Song & Mittal 2021): a score per query, higher = more likely a
member, and a threshold fitted on the shadow head's in/out scores:
confidence p_y, entropy (−H(p)), modified entropy (−Mentr(p, y)), loss (log p_y) and
correctness (1 if the prediction is right).

Besides accuracy (the paper's metric) every attack reports ROC AUC and the TPR at 1 % FPR
(Carlini et al. 2022): accuracy alone hides how confidently a few members are exposed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from privssl.attacks.mia_spec import ATTACKS
from privssl.attacks.statistics import finite_scores, membership_metrics

_EPS = 1e-30  # guards log(0) of saturated probabilities


def metric_scores(probs: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """Membership scores (..., N) of every metric attack for probabilities (..., N, C)."""
    probs = probs.double()
    p_true = probs.gather(-1, labels.expand(probs.shape[:-1]).unsqueeze(-1)).squeeze(-1)
    log_p = torch.log(probs.clamp(min=_EPS))
    log_1mp = torch.log((1 - probs).clamp(min=_EPS))
    is_true = F.one_hot(labels, probs.shape[-1]).bool().expand(probs.shape)
    # Mentr(p, y) = −(1 − p_y) log p_y − Σ_{i≠y} p_i log(1 − p_i)
    mentr = -(1 - p_true) * torch.log(p_true.clamp(min=_EPS)) - torch.where(is_true, 0.0, probs * log_1mp).sum(-1)
    return {
        "confidence": p_true,
        "entropy": (probs * log_p).sum(-1),
        "modified_entropy": -mentr,
        "loss": torch.log(p_true.clamp(min=_EPS)),
        "correctness": (probs.argmax(-1) == labels).double(),
    }


def best_threshold(scores: np.ndarray, is_member: np.ndarray) -> float:
    """Threshold t maximising the accuracy of 'member iff score >= t' on (shadow) data."""
    candidates = np.unique(scores)
    candidates = np.concatenate([candidates, [np.inf]])
    order = np.argsort(scores)
    sorted_scores, sorted_members = scores[order], is_member[order]
    # For each candidate t: members at or above t are right, non-members below t are right.
    below = np.searchsorted(sorted_scores, candidates, side="left")
    members_below = np.concatenate([[0], np.cumsum(sorted_members)])[below]
    correct = (sorted_members.sum() - members_below) + (below - members_below)
    return float(candidates[int(np.argmax(correct))])


def tpr_at_fpr(scores: np.ndarray, is_member: np.ndarray, fpr_target: float = 0.01) -> float:
    """Largest true-positive rate over thresholds whose false-positive rate is <= fpr_target."""
    from sklearn.metrics import roc_curve  # here only: sklearn's import costs every job a second

    # Keep every ROC point: with tied scores the dropped "collinear" points can be the best one.
    fpr, tpr, _ = roc_curve(is_member, scores, drop_intermediate=False)
    return float(tpr[fpr <= fpr_target].max())


def evaluate(scores: np.ndarray, is_member: np.ndarray, threshold: float) -> dict[str, float]:
    """Accuracy at the attacker's threshold, threshold-free AUC and TPR at 1 % FPR."""
    from sklearn.metrics import roc_auc_score  # here only: sklearn's import costs every job a second

    # A NaN score (a saturated head) ranks lowest; sklearn rejects infinities, so use a finite floor.
    finite = scores[np.isfinite(scores)]
    floor = np.nextafter(finite.min(), -np.inf) if finite.size else 0.0
    scores = np.nan_to_num(scores, nan=floor, neginf=floor, posinf=np.finfo(float).max)
    return {
        "accuracy": float(((scores >= threshold) == is_member).mean()),
        "auc": float(roc_auc_score(is_member, scores)),
        "tpr_at_1pct_fpr": tpr_at_fpr(scores, is_member),
    }


def attack_inputs(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The paper's attack input: (probability vector, one-hot ground-truth label)."""
    onehot = F.one_hot(labels, probs.shape[-1]).to(probs.dtype).expand(probs.shape)
    return torch.cat([probs, onehot], -1).float()


@dataclass(frozen=True)
class AttackSpec:
    hidden: int | tuple[int, ...] = 64  # one width for `layers` hidden layers, or each layer's width
    layers: int = 5
    epochs: int = 200
    batch_size: int = 64
    lr: float = 1e-3

    @classmethod
    def from_config(cls, cfg: dict) -> "AttackSpec":
        fields = {k: cfg[k] for k in cls.__dataclass_fields__ if k in cfg}
        if isinstance(fields.get("hidden"), (list, tuple)):  # e.g. Semi-Leak's 64-32 (thesis §3.4.1)
            fields["hidden"] = tuple(fields["hidden"])
            fields["layers"] = len(fields["hidden"])
        return cls(**fields)

    def widths(self) -> tuple[int, ...]:
        return self.hidden if isinstance(self.hidden, tuple) else (self.hidden,) * self.layers


def attack_mlp(in_dim: int, spec: AttackSpec) -> nn.Module:
    """MLP with ReLU hidden layers of spec.widths() and one membership logit (a sigmoid output:
    the thesis's two-way softmax output layer, one logit fewer)."""
    layers, width = [], in_dim
    for hidden in spec.widths():
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    return nn.Sequential(*layers, nn.Linear(width, 1))


def train_attack_mlp(inputs: torch.Tensor, is_member: torch.Tensor, spec: AttackSpec, seed: int) -> nn.Module:
    """Fit one attack MLP on a shadow head's (input, in/out) pairs with Adam (minibatches of a
    fresh permutation per epoch, initialisation and permutations from `seed`)."""
    return train_attack_mlps(inputs[None], is_member, spec, seed)[0]


@torch.no_grad()
def attack_mlp_scores(model: nn.Module, probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Membership probabilities (..., N) for probabilities (..., N, C): one batched forward."""
    return torch.sigmoid(model(attack_inputs(probs, labels)).squeeze(-1))


@dataclass
class FittedAttacks:
    """The attack MLP and every metric attack's threshold, fitted on one shadow head's pairs."""

    model: nn.Module
    thresholds: dict[str, float]  # "member iff score >= threshold", shadow_mlp at probability ½


def train_attack_mlps(inputs: torch.Tensor, is_member: torch.Tensor, spec: AttackSpec, seed: int) -> list[nn.Module]:
    """E attack MLPs at once on inputs (E, N, D), one per shadow release: MLP e is what the plain
    training of one `attack_mlp` on inputs[e] with this seed gives (same initialisation, same
    batch order; Adam is element-wise, so one optimiser over the stacked weights is E independent
    ones), up to float rounding (tests/test_mia.py holds that plain loop as the reference). Each
    step is a few batched matrix products instead of E small ones."""
    torch.manual_seed(seed)
    template = [m for m in attack_mlp(inputs.shape[-1], spec) if isinstance(m, nn.Linear)]
    n_models = inputs.shape[0]
    weights = [m.weight.detach().T.expand(n_models, -1, -1).clone().requires_grad_(True) for m in template]
    biases = [m.bias.detach().expand(n_models, -1).clone().requires_grad_(True) for m in template]
    optimiser = torch.optim.Adam(weights + biases, lr=spec.lr)
    generator = torch.Generator().manual_seed(seed)
    target = is_member.float()
    for _ in range(spec.epochs):
        permutation = torch.randperm(inputs.shape[1], generator=generator)
        for start in range(0, inputs.shape[1], spec.batch_size):
            idx = permutation[start:start + spec.batch_size]
            hidden = inputs[:, idx]
            for i, (w, b) in enumerate(zip(weights, biases)):
                hidden = torch.baddbmm(b[:, None, :], hidden, w)
                hidden = torch.relu(hidden) if i < len(weights) - 1 else hidden
            # the sum over models of each model's mean loss: the gradients decouple
            loss = F.binary_cross_entropy_with_logits(hidden[..., 0], target[idx].expand(n_models, -1),
                                                      reduction="none").mean(1).sum()
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
    models = []
    for e in range(n_models):
        model = attack_mlp(inputs.shape[-1], spec)
        for layer, w, b in zip([m for m in model if isinstance(m, nn.Linear)], weights, biases):
            layer.weight.data.copy_(w[e].detach().T)
            layer.bias.data.copy_(b[e].detach())
        models.append(model.eval())
    return models


def fit_attacks(probs: torch.Tensor, labels: torch.Tensor, is_member: torch.Tensor, spec: AttackSpec,
                seed: int) -> list[FittedAttacks]:
    """Fit the paper's attack MLP and the metric attacks' thresholds on each of E releases of a
    shadow head: probabilities (E, N, C) of its 'in' and 'out' records."""
    models = train_attack_mlps(attack_inputs(probs, labels), is_member, spec, seed)
    members = is_member.numpy().astype(bool)
    fitted = []
    for model, p in zip(models, probs):
        thresholds = {name: best_threshold(s.numpy(), members) for name, s in metric_scores(p, labels).items()}
        fitted.append(FittedAttacks(model, {"shadow_mlp": 0.5, **thresholds}))
    return fitted


def attack_scores(fitted: FittedAttacks, probs: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """Scores (..., N) of every attack for probabilities (..., N, C)."""
    return {ATTACKS[0]: attack_mlp_scores(fitted.model, probs, labels), **metric_scores(probs, labels)}


def clean_attacks(attacker: dict) -> FittedAttacks:
    """The non-adaptive attack of an attacker file (rule `shadow`): its MLP and thresholds."""
    model = attack_mlp(attacker["in_dim"], AttackSpec(**attacker["spec"]))
    model.load_state_dict(attacker["mlp"])
    return FittedAttacks(model.eval(), attacker["thresholds"])


def balanced_evaluation(n_members: int, n_nonmembers: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """As many members of d as non-members (the smaller count), drawn by `seed`: (member indices,
    non-member indices, is_member of their concatenation). Every attack of a dataset, on the
    released heads and on the training-time releases, is evaluated on the same records."""
    n = min(n_members, n_nonmembers)
    generator = torch.Generator().manual_seed(seed)
    members, nonmembers = (torch.randperm(size, generator=generator)[:n] for size in (n_members, n_nonmembers))
    return members, nonmembers, np.r_[np.ones(n, bool), np.zeros(n, bool)]


@dataclass(frozen=True)
class MembershipEvaluation:
    """The records every attack on a dataset's releases is scored on, `members` (positions in d,
    the finetune split) then `nonmembers` (positions in the nonmember split), with their true
    `labels`, and how its rows report: TPR at the `fpr` levels, `bootstrap` resamples of the AUC
    interval, drawn by `seed`."""

    members: torch.Tensor
    nonmembers: torch.Tensor
    labels: torch.Tensor
    fpr: tuple[float, ...]
    bootstrap: int
    seed: int

    @classmethod
    def balanced(cls, finetune_labels: torch.Tensor, nonmember_labels: torch.Tensor, fpr: tuple[float, ...],
                 bootstrap: int, seed: int) -> "MembershipEvaluation":
        """balanced_evaluation's records, drawn by `seed`: the same for every release of a dataset."""
        members, nonmembers, _ = balanced_evaluation(len(finetune_labels), len(nonmember_labels), seed)
        return cls(members, nonmembers, torch.cat([finetune_labels[members], nonmember_labels[nonmembers]]),
                   tuple(fpr), bootstrap, seed)

    @property
    def is_member(self) -> np.ndarray:
        return np.r_[np.ones(len(self.members), bool), np.zeros(len(self.nonmembers), bool)]

    def evaluated(self, finetune: torch.Tensor, nonmember: torch.Tensor, dim: int = 0) -> torch.Tensor:
        """The records' rows of per-record values of d and of the non-members (along `dim`), in order."""
        return torch.cat([finetune.index_select(dim, self.members), nonmember.index_select(dim, self.nonmembers)], dim)

    def scored_rows(self, key: dict, fitted: FittedAttacks, adaptive: bool,
                    probs: torch.Tensor) -> list[tuple[dict, np.ndarray, np.ndarray]]:
        """Every attack of `fitted` (the `adaptive` attacker's or not) against one released head
        (`probs`, (N, C) on the records): its row (`key`, the attack, `adaptive` and the metrics),
        its per-record scores (float64: exactly those the row's metrics were computed from) and
        its per-record calls (member iff score >= the attack's threshold, as membership_metrics
        decides), from which the reports cluster and pair the rows by record."""
        scored = []
        for attack, scores in attack_scores(fitted, probs, self.labels).items():
            values = scores.numpy().astype(np.float64)
            threshold = fitted.thresholds[attack]
            scored.append(({**key, "attack": attack, "adaptive": adaptive,
                            **membership_metrics(values, self.is_member, threshold, self.fpr,
                                                 n_boot=self.bootstrap, seed=self.seed)},
                           values, finite_scores(values) >= threshold))
        return scored
