"""The crafted worst case for the certified heads: a neighbouring pair (d, d') chosen to move the
certified head as far as the proof allows, released many times by the release's own code, and
the privacy audited from the two worlds' releases (final-model threat model: the auditor sees the
released parameters only, and chooses both data sets).

The certified head's Δ2 = 2L/(nλ) + 2g/λ (privssl.release.certified) bounds ‖W_d − W_d'‖_F for
every substitution of one of n records. A substitution z → z' moves the minimiser by about
H⁻¹(∇ℓ_z' − ∇ℓ_z)/n, H ⪰ λI, with ∇ℓ_z = x̃(p − e_y)ᵀ, x̃ = [x, 1]. The bound is reached only where
(i) the other records add no curvature along the move, (ii) each gradient has norm L: ‖x‖ = R and
the record confidently misclassified (‖p − e_y‖ → √2), and (iii) the two gradients are opposite.
(iii) fails on the constant coordinate: x̃ and x̃' share their 1, so opposite features x' = −x
cancel the bias part of the move and leave at most R/√(R² + 1) of the bound (0.71 at R = 1).

The designs (`pair_designs`) put the n − 1 shared records at x = 0 with one label k: they fix the
bias, whose curvature then lies off the features' block (i), and make every other point predicted
k with confidence (ii); the substituted record is x = R·e₁ and x' = −R·e₁, with a label other than
k, the same or another one (iii as far as the constant allows). `craft_pair` fits the certified head
on both sets of every design with the release's own solver and keeps the farthest pair: its
attained ‖W_d − W_d'‖ / Δ2 is reported beside the audit, so that what the audit cannot prove is
split into the bound's slack (no pair of these designs reaches Δ2) and the test's.

The releases of each world are the release's own calibration and noise
(`protection.protected_heads` from the certified sensitivity record), and the score of a release o
is the Neyman–Pearson statistic of the two worlds, log f(o − W_d') − log f(o − W_d) for the
method's noise density f: the most powerful test of d against d' at every level. Every release is
one independent run of the mechanism on the fixed pair, which is the unit its DP claim quantifies
over. From those scores:

- `crafted_pair_gdp` (Gaussian noise only): the scores are exactly Gaussian with shift μ = D/σ, so
  the GDP fit of privssl.audit.gradient_canary (μ's one-sided normal bound, its ε at δ) is exact in
  form; `eps_of_pair` is the ε at δ of the Gaussian mechanism on this pair, what an audit of
  unlimited releases would reach;
- `crafted_pair_test`: one threshold on half of each world's releases, Clopper–Pearson on the
  other half; assumption-free, capped by the releases (`eps_ceiling`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from privssl.audit.audit_names import CRAFTED_AUDITS
from privssl.audit.gdp import gdp_epsilon, gdp_fit
from privssl.audit.gradient_canary import final_model_audit
from privssl.release.certified import CertifiedSpec, certified_sensitivity, fit_certified_head
from privssl.release.mechanisms import Gaussian, NoiseFamily
from privssl.release.methods import release_method
from privssl.release.protection import protected_heads
from privssl.training.heads import DTYPE, flatten

CHUNK = 512  # releases per noise draw: (CHUNK, P) float64 arrays that stay small (memory traffic, not FLOPs, bounds it)


@dataclass(frozen=True)
class PairDesign:
    """n − 1 shared records at x = 0 labelled `shared_label`; the substituted record at +R·e₁ with
    `label`, at −R·e₁ with `other_label` in d'."""

    shared_label: int
    label: int
    other_label: int

    @property
    def name(self) -> str:
        return (f"{{0 ↦ {self.shared_label}}}^(n−1) + (R·e₁, {self.label}) vs "
                f"(−R·e₁, {self.other_label})")


def pair_designs(n_classes: int) -> list[PairDesign]:
    """The designs searched: the substituted record's label against the shared one, the same label
    on both sides or another one."""
    if n_classes < 2:
        raise ValueError(f"a crafted pair needs at least 2 classes, got {n_classes}")
    designs = [PairDesign(0, 1, 1)]
    if n_classes >= 3:
        designs.append(PairDesign(0, 1, 2))
    return designs


def design_sets(design: PairDesign, n: int, width: int, clip_norm: float) -> tuple[tuple[torch.Tensor, torch.Tensor],
                                                                                    tuple[torch.Tensor, torch.Tensor]]:
    """((features, labels) of d, of d'): n records each, equal but for the last."""
    if n < 2 or width < 1:
        raise ValueError(f"a crafted pair needs n ≥ 2 records of width ≥ 1, got n = {n}, width = {width}")
    features = torch.zeros(n, width, dtype=DTYPE)
    labels = torch.full((n,), design.shared_label, dtype=torch.long)
    first, second = features.clone(), features
    first[-1, 0], second[-1, 0] = clip_norm, -clip_norm
    first_labels, second_labels = labels.clone(), labels
    first_labels[-1], second_labels[-1] = design.label, design.other_label
    return (first, first_labels), (second, second_labels)


@dataclass(frozen=True)
class CraftedPair:
    design: str
    first: torch.Tensor  # the certified head fitted on d, flat (P,)
    second: torch.Tensor  # on d'
    distance: float  # ‖W_d − W_d'‖_F
    sensitivity: float  # the proven Δ2 at n

    @property
    def fraction(self) -> float:
        return self.distance / self.sensitivity


def craft_pair(n: int, width: int, n_classes: int, spec: CertifiedSpec) -> CraftedPair:
    """The farthest pair of `pair_designs`, each fitted by the release's solver (`fit_certified_head`)."""
    sensitivity = certified_sensitivity(n, n_classes, spec)["delta2"]
    best = None
    for design in pair_designs(n_classes):
        heads = [flatten(fit_certified_head(x, y, n_classes, spec).params)[0]
                 for x, y in design_sets(design, n, width, spec.clip_norm)]
        distance = float((heads[0] - heads[1]).norm())
        if best is None or distance > best.distance:
            best = CraftedPair(design.name, heads[0], heads[1], distance, sensitivity)
    return best


def likelihood_ratio(releases: torch.Tensor, pair: CraftedPair, noise: NoiseFamily, scale: float) -> torch.Tensor:
    """log f(o − W_d') − log f(o − W_d) per release o, f the release's noise density at `scale`:
    high where d' is the likelier world."""
    return noise.log_density(releases - pair.second, scale) - noise.log_density(releases - pair.first, scale)


def world_scores(pair: CraftedPair, head: torch.Tensor, method: str, eps: float, delta: float, record: dict,
                 draws: int, seed: int) -> tuple[np.ndarray, float]:
    """The scores of `draws` releases of `head` (one world's certified head) by the release's own
    calibration and noise at ε, and the noise scale it used."""
    noise = release_method(method).noise
    # one array written in place: small per-chunk arrays kept alive between the chunks' large
    # temporaries fragment the heap (glibc then keeps every freed chunk: 1.6 GB at 10⁵ releases)
    scores, scale = np.empty(draws), None
    for start in range(0, draws, CHUNK):
        size = min(CHUNK, draws - start)
        releases, (calibration,) = protected_heads(head, method, [eps], size, delta, record, seed + start)
        scale = calibration.noise_scale
        scores[start:start + size] = likelihood_ratio(releases[0], pair, noise, scale).numpy()
    return scores, scale


def audit_certified(pair: CraftedPair, method: str, eps: float, delta: float, record: dict, draws: int,
                    confidence: float = 0.95, seed: int = 0) -> list[dict]:
    """The crafted-pair audits of one certified release claimed at (ε, δ) (δ unused by a pure
    method): `draws` releases of each world's head, disjoint seeds per world. `record`: the
    certified sensitivity record the release was calibrated from (a test plants a wrong one)."""
    method_entry = release_method(method)
    if method_entry.head != "certified":
        raise ValueError(f"the crafted-pair audit is for the certified heads, not {method!r}")
    if draws < 2:
        raise ValueError(f"the crafted-pair audit needs at least 2 releases per world, got {draws}")
    claimed_delta = delta if method_entry.uses_delta else 0.0
    scores_second, scale = world_scores(pair, pair.second, method, eps, delta, record, draws, seed)
    scores_first, _ = world_scores(pair, pair.first, method, eps, delta, record, draws, seed + draws)
    common = {"method": method, "runs_per_world": draws, "noise_scale": scale, "pair_distance": pair.distance,
              "sensitivity": pair.sensitivity, "pair_fraction": pair.fraction, "pair_design": pair.design,
              "confidence": confidence, "claimed_eps": eps, "delta": claimed_delta}
    rows = []
    if isinstance(method_entry.noise, Gaussian):  # the GDP fit holds for Gaussian noise only
        gdp = gdp_fit(scores_second, scores_first, claimed_delta, confidence)
        rows.append({"audit": "crafted_pair_gdp", "eps_lower_bound": gdp["eps_lower_bound"], "eps_ceiling": eps,
                     "n": gdp["n"], "mu_hat": gdp["mu_hat"], "mu_lo": gdp["mu_lo"],
                     "eps_of_pair": gdp_epsilon(pair.distance / scale, claimed_delta)})
    test = final_model_audit(scores_second, scores_first, claimed_delta, confidence, seed)
    rows.append({"audit": "crafted_pair_test", **test})
    return [{"threat_model": CRAFTED_AUDITS[row["audit"]], **common, **row} for row in rows]

