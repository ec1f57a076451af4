"""The eight link-stealing attacks of He et al. (USENIX Security 2021; seed 003 Ch. 5, Table 5.1).

The adversary's knowledge K = (F, A*, D'): the target's node attributes F, its partial graph A*
(the attack-train pairs) and a shadow dataset D'. Three families:
- unsupervised (Attack-0: K = ∅; Attack-2: F): a distance is the score, "if there is a link
  between two nodes, then their posteriors [...] should be closer". A hard decision comes from
  K-means with K = 2 on the distances: "the cluster with lower average distance value is
  considered as the set of positive node pairs". Attack-2 compares d(f), d(F), d(f) − d(g) and
  d(g), g being the reference MLP trained on F.
- supervised (Attack-3: A*; Attack-6: F, A*): the attack MLP is trained on the attack-train
  pairs with the features of Table 5.2.
- transferring (Attack-1: D'; 4: A*, D'; 5: F, D'; 7: F, A*, D'): the attack MLP is trained on
  the shadow graph's pairs (4 and 7 add the target's attack-train pairs) with features whose
  width is independent of the graph.
Every attack is scored on the target's attack-test pairs: AUC (the thesis's metric) and the
precision / recall / F1 of the hard decision (the MLP's p >= 0.5, or K-means).

Attack MLP: "3 hidden layers [...] 32 [...] ReLU [...] Dropout (the rate is 0.5) [on] each hidden
layer [...] 50 epochs with a learning rate of 0.001 [...] cross-entropy [...] Adam"; two-class
softmax + cross-entropy is one sigmoid logit + binary cross-entropy. The thesis gives no batch
size: 128, as the authors' code. Its input is standardised per graph over all of that graph's
attack pairs (labels unused, so also for test pairs), as the authors' code standardises each
data set by its own statistics; this also puts a shadow and a target graph on one scale.

Releases: `Observation.posteriors` may be (B, N, C), B releases of the target's posteriors on the
same graph and pairs (e.g. B noise draws of a noisy head). Each attack then runs once per release
(the B attack MLPs train stacked, in one loop, from one initialisation) and each row carries its
`release`. The pairs are sampled once, in `AttackPairs`, and the blocks of g and F are computed
once per call for all releases; Attack-0 and Attack-3 use posterior features only, so calling
them again on new posteriors (`dataclasses.replace(observation, posteriors=...)`) costs a few
(P × C) tensor operations plus, for Attack-3, the attack MLP's training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from privssl.graphs.link_features import ATTACK_FEATURES, feature_matrix, pair_distances
from privssl.graphs.link_pairs import AttackPairs
from privssl.graphs.link_spec import ALL_INFORMATION, ATTACK_2_INFORMATION, DISTANCES

# Attack-2's four types of information (§5.3): d(f), d(F), d(f) − d(g), d(g).


@dataclass(frozen=True)
class AttackMLPSpec:
    hidden: int = 32
    layers: int = 3
    dropout: float = 0.5
    lr: float = 1e-3
    epochs: int = 50
    batch_size: int = 128

    @classmethod
    def from_config(cls, cfg: dict) -> "AttackMLPSpec":
        return cls(**{k: cfg[k] for k in cls.__dataclass_fields__ if k in cfg})


@dataclass(frozen=True)
class Observation:
    """What the adversary observes on one graph (target or shadow).

    posteriors: f(u) of every node from black-box queries, (N, C) or (B, N, C) for B releases;
    attributes: F, (N, |F|), when F is known; reference: g(u), (N, C), of the adversary's reference
    MLP trained on F; pairs: the attack dataset (for a shadow graph every pair is used to train).
    """

    pairs: AttackPairs
    posteriors: torch.Tensor
    attributes: torch.Tensor | None = None
    reference: torch.Tensor | None = None

    @property
    def releases(self) -> torch.Tensor:
        """The posteriors as (B, N, C)."""
        return self.posteriors if self.posteriors.ndim == 3 else self.posteriors.unsqueeze(0)

    @property
    def knows_attributes(self) -> bool:
        return self.attributes is not None and self.reference is not None

    def features(self, attack: str) -> torch.Tensor:
        """Standardised Table 5.2 features of `attack` on every pair, (B, P, K) float32."""
        x = feature_matrix(ATTACK_FEATURES[attack], self.pairs.pairs, self.releases, self.reference,
                           self.attributes)
        mean, std = x.mean(-2, keepdim=True), x.std(-2, keepdim=True)
        return (x - mean) / torch.where(std > 0, std, 1.0)  # a constant feature carries nothing


# --- metrics ---------------------------------------------------------------------------------

def two_means(values: np.ndarray) -> np.ndarray:
    """K-means with K = 2 on scalars: True for the cluster with the lower mean.

    In one dimension the optimal clusters are split by a threshold, so all P − 1 splits of the
    sorted values are scored at once by their within-cluster sum of squares: the global optimum
    that Lloyd's iterations only approximate. Equal values are never split. All values equal:
    one cluster, no pair is called an edge.
    """
    order = np.argsort(values, kind="stable")
    x = values[order] - values.mean()  # centred: the cumulative sums lose no precision
    n = len(x)
    k = np.arange(1, n)  # size of the lower cluster
    s1, s2 = np.cumsum(x)[:-1], np.cumsum(x * x)[:-1]
    t1, t2 = x.sum() - s1, (x * x).sum() - s2
    sse = (s2 - s1 ** 2 / k) + (t2 - t1 ** 2 / (n - k))
    sse[x[1:] == x[:-1]] = np.inf
    low = np.zeros(n, dtype=bool)
    if np.isfinite(sse).any():
        low[order[:int(np.argmin(sse)) + 1]] = True
    return low


def metrics_row(attack: str, feature_set: str, distance: str | None, release: int, scores: np.ndarray,
                predicted: np.ndarray, is_edge: np.ndarray) -> dict:
    """One tidy result row: AUC of the scores (higher = edge), precision / recall / F1 of `predicted`;
    and, under `scores` and `called_edge`, the per-pair scores and calls the writer puts beside the
    row (artefacts.graphs.link_score_lines: pop them before the row becomes a table's)."""
    from sklearn.metrics import precision_recall_fscore_support, roc_auc_score  # here only: a second per job

    precision, recall, f1, _ = precision_recall_fscore_support(is_edge, predicted, average="binary",
                                                               zero_division=0)
    return {"attack": attack, "feature_set": feature_set, "distance": distance, "release": release,
            "auc": float(roc_auc_score(is_edge, scores)), "precision": float(precision),
            "recall": float(recall), "f1": float(f1), "scores": np.asarray(scores, dtype=np.float64),
            "called_edge": np.asarray(predicted, dtype=bool)}


def best_rows(rows: list[dict]) -> list[dict]:
    """The highest-AUC row of each (attack, release): the thesis reports each attack's best result."""
    best = {}
    for row in rows:
        key = (row["attack"], row["release"])
        if key not in best or row["auc"] > best[key]["auc"]:
            best[key] = row
    return list(best.values())


# --- unsupervised: Attack-0, Attack-2 ---------------------------------------------------------

def _distance_rows(attack: str, feature_set: str, distances: torch.Tensor, is_edge: np.ndarray) -> list[dict]:
    """Rows for distances (B, P_test, 8): a smaller distance means an edge."""
    rows = []
    for release, per_release in enumerate(distances.cpu().numpy()):
        for name, d in zip(DISTANCES, per_release.T):
            rows.append(metrics_row(attack, feature_set, name, release, -d, two_means(d), is_edge))
    return rows


def attack_0(observation: Observation) -> list[dict]:
    """Attack-0, K = (×, ×, ×): each of the 8 distances d(f(u), f(v)) between posteriors."""
    test = observation.pairs.test
    is_edge = observation.pairs.is_edge[test].numpy()
    return _distance_rows("attack-0", "posteriors", pair_distances(observation.releases,
                                                                   observation.pairs.pairs[test]), is_edge)


def attack_2(observation: Observation) -> list[dict]:
    """Attack-2, K = (F, ×, ×): d(f), d(F), d(f) − d(g) and d(g), each with the 8 distances."""
    if not observation.knows_attributes:
        raise ValueError("Attack-2 needs the attributes F and the reference posteriors g")
    test = observation.pairs.test
    pairs, is_edge = observation.pairs.pairs[test], observation.pairs.is_edge[test].numpy()
    target = pair_distances(observation.releases, pairs)
    reference = pair_distances(observation.reference, pairs).expand_as(target)
    attributes = pair_distances(observation.attributes, pairs).expand_as(target)
    # "if two nodes are connected, the distance between their posteriors from the target model
    # should be smaller than the corresponding distance from the reference model"
    by_information = {"posteriors": target, "attributes": attributes, "posteriors-reference": target - reference,
                      "reference": reference}
    return [row for name in ATTACK_2_INFORMATION
            for row in _distance_rows("attack-2", name, by_information[name], is_edge)]


def unsupervised_attacks(observation: Observation) -> list[dict]:
    """Attack-0, and Attack-2 when the adversary knows F (and so has a reference model)."""
    rows = attack_0(observation)
    return rows + attack_2(observation) if observation.knows_attributes else rows


# --- the attack MLP, B of them stacked --------------------------------------------------------

def init_attack_mlps(spec: AttackMLPSpec, in_dim: int, n_models: int,
                     generator: torch.Generator) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """n_models copies of one draw of nn.Linear's default initialisation U(±1/√fan_in)."""
    params, width = [], in_dim
    for out in [spec.hidden] * spec.layers + [1]:
        bound = 1.0 / math.sqrt(width)
        weight = (torch.rand(width, out, generator=generator) * 2 - 1) * bound
        bias = (torch.rand(1, out, generator=generator) * 2 - 1) * bound
        params.append((weight.expand(n_models, -1, -1).clone(), bias.expand(n_models, -1, -1).clone()))
        width = out
    return params


def attack_mlp_logits(params: list[tuple[torch.Tensor, torch.Tensor]], x: torch.Tensor, dropout: float,
                      training: bool) -> torch.Tensor:
    """Edge logits (M, n) of M stacked MLPs on inputs (M, n, K); M = 1 broadcasts over the inputs."""
    for weight, bias in params[:-1]:
        x = F.dropout(torch.relu(torch.matmul(x, weight) + bias), dropout, training)
    weight, bias = params[-1]
    return (torch.matmul(x, weight) + bias).squeeze(-1)


def train_attack_mlps(features: torch.Tensor, is_edge: torch.Tensor, spec: AttackMLPSpec,
                      seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Train M attack MLPs, one per feature matrix (M, P, K), on the same labels (P,).

    One initialisation and one mini-batch order, both drawn from `seed`, serve every model, so
    models differ only by their inputs and dropout draws; Adam is element-wise, so the stack is M
    independent Adams. Dropout draws from the global RNG (F.dropout takes no generator), seeded
    inside `fork_rng` so the caller's RNG state is left untouched.
    """
    device = features.device
    generator = torch.Generator().manual_seed(seed)
    params = [(w.to(device).requires_grad_(), b.to(device).requires_grad_())
              for w, b in init_attack_mlps(spec, features.shape[-1], features.shape[0], generator)]
    optimiser = torch.optim.Adam([p for layer in params for p in layer], lr=spec.lr)
    target = is_edge.to(device=device, dtype=features.dtype)
    n = features.shape[1]
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        for _ in range(spec.epochs):
            permutation = torch.randperm(n, generator=generator).to(device)
            for start in range(0, n, spec.batch_size):
                idx = permutation[start:start + spec.batch_size]
                logits = attack_mlp_logits(params, features[:, idx], spec.dropout, training=True)
                # mean over the batch, sum over models: the models' gradients decouple
                loss = F.binary_cross_entropy_with_logits(logits, target[idx].expand_as(logits),
                                                          reduction="none").mean(-1).sum()
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
                optimiser.step()
    return [(w.detach(), b.detach()) for w, b in params]


@torch.no_grad()
def attack_mlp_scores(params: list[tuple[torch.Tensor, torch.Tensor]], features: torch.Tensor) -> torch.Tensor:
    """Edge probabilities (B, P) of trained attack MLPs on features (B, P, K)."""
    return torch.sigmoid(attack_mlp_logits(params, features, 0.0, training=False))


def _mlp_rows(attack: str, feature_set: str, scores: torch.Tensor, is_edge: torch.Tensor) -> list[dict]:
    is_edge = is_edge.numpy()
    return [metrics_row(attack, feature_set, None, release, s, s >= 0.5, is_edge)
            for release, s in enumerate(scores.cpu().numpy())]


# --- supervised: Attack-3, Attack-6 -----------------------------------------------------------

def _supervised(attack: str, feature_set: str, observation: Observation, spec: AttackMLPSpec,
                seed: int) -> list[dict]:
    x, pairs = observation.features(attack), observation.pairs
    params = train_attack_mlps(x[:, pairs.train], pairs.is_edge[pairs.train], spec, seed)
    return _mlp_rows(attack, feature_set, attack_mlp_scores(params, x[:, pairs.test]), pairs.is_edge[pairs.test])


def attack_3(observation: Observation, spec: AttackMLPSpec = AttackMLPSpec(), seed: int = 0) -> list[dict]:
    """Attack-3, K = (×, A*, ×): d(f), Ψ(f), Ψ(e(f)); trained on the attack-train pairs."""
    return _supervised("attack-3", "posteriors", observation, spec, seed)


def attack_6(observation: Observation, spec: AttackMLPSpec = AttackMLPSpec(), seed: int = 0) -> list[dict]:
    """Attack-6, K = (F, A*, ×): Attack-3's features and all of Table 5.2's g and F blocks."""
    if not observation.knows_attributes:
        raise ValueError("Attack-6 needs the attributes F and the reference posteriors g")
    return _supervised("attack-6", ALL_INFORMATION, observation, spec, seed)


def supervised_attacks(observation: Observation, spec: AttackMLPSpec = AttackMLPSpec(),
                       seed: int = 0) -> list[dict]:
    """Attack-3, and Attack-6 when the adversary knows F."""
    rows = attack_3(observation, spec, seed)
    return rows + attack_6(observation, spec, seed) if observation.knows_attributes else rows


# --- transferring: Attack-1, 4, 5, 7 ----------------------------------------------------------

def _transfer(attack: str, feature_set: str, target: Observation, shadow: Observation, spec: AttackMLPSpec,
              seed: int, partial_graph: bool) -> list[dict]:
    """Train on every shadow pair (plus, with A*, the target's attack-train pairs); test on the target."""
    if shadow.posteriors.ndim != 2:
        raise ValueError("the shadow target model is the adversary's own: one release, posteriors (N', C')")
    x_shadow, x_target, pairs = shadow.features(attack), target.features(attack), target.pairs
    if partial_graph:
        x_train = torch.cat([x_shadow.expand(x_target.shape[0], -1, -1), x_target[:, pairs.train]], 1)
        y_train = torch.cat([shadow.pairs.is_edge, pairs.is_edge[pairs.train]])
    else:  # one attack model, applied to every release of the target
        x_train, y_train = x_shadow, shadow.pairs.is_edge
    params = train_attack_mlps(x_train, y_train, spec, seed)
    return _mlp_rows(attack, feature_set, attack_mlp_scores(params, x_target[:, pairs.test]),
                     pairs.is_edge[pairs.test])


def transfer_attacks(target: Observation, shadow: Observation, spec: AttackMLPSpec = AttackMLPSpec(),
                     seed: int = 0) -> list[dict]:
    """Attack-1 (D') and Attack-4 (A*, D'); Attack-5 (F, D') and Attack-7 (F, A*, D') when both
    observations carry attributes and reference posteriors (the shadow reference model g')."""
    rows = (_transfer("attack-1", "posteriors", target, shadow, spec, seed, partial_graph=False)
            + _transfer("attack-4", "posteriors", target, shadow, spec, seed, partial_graph=True))
    if target.knows_attributes and shadow.knows_attributes:
        rows += (_transfer("attack-5", ALL_INFORMATION, target, shadow, spec, seed, partial_graph=False)
                 + _transfer("attack-7", ALL_INFORMATION, target, shadow, spec, seed, partial_graph=True))
    return rows
