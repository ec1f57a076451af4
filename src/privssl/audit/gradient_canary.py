"""Tight audits of the DP-SGD head with a gradient canary, in two threat models.

The claim audited: (ε, δ)-DP of the DP-SGD training for the addition or removal of one record,
whose clipped gradient has norm at most C. The auditor inserts a crafted gradient, a Dirac
canary: norm ≥ C along one parameter coordinate u, as one more record of the training set d
(`dpsgd_batched.GradientCanary`), in R trainings and leaves it out of R others, each with its own
Poisson batches and noise, everything else the release's (its settings and σ at that ε).

u is the first-layer weight of a feature that is 0 in every record of d (a dead unit of the
encoder): the per-example gradient of every real record vanishes on u, so the coordinate moves
only by the canary and the noise. Without such a feature the quietest one is taken: the
final-model audits stay valid (their runs differ only by the canary), but the white-box bound is
not computed (0): the noise-free run's largest step would then hold the records' gradients too,
not the canary's alone, and could overstate its sensitivity.

- `white_box_all_updates` (Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski, Carlini, Terzis 2023):
  the auditor sees every update, so from the trace of u it recovers each step's noisy gradient sum
  (momentum and learning rate are public) in units of C: o_t = b_t · s + σ · ξ_t, b_t ~ Bernoulli(q)
  the canary's sampling (0 in the runs without it). The runs without the canary give the noise σ
  with a χ² upper bound σ_hi over their R · T observations; one training of the same code at
  noise 0 with the canary gives its effective sensitivity s exactly (the largest step it makes
  on u: 1 if the clipping works). The ε of T Poisson-subsampled Gaussian steps at noise
  σ_hi / s and rate q, by an optimistic PLD (dp_accounting's privacy buckets rounded down, a lower
  bound on that ε), is then a lower bound on the ε of the training as implemented, at the
  confidence of σ_hi (`WHITE_BOX_CONFIDENCE`, not the audit's: the bound is tight). It rests on the mechanism's family (a step is a subsampled Gaussian), and
  within it catches a noise or a clipping that differ from the accounted ones; it reaches the claim
  as the observations grow (`eps_ceiling` is the claim).
- `final_model` (Cebere, Bellet, Papernot 2024, the hidden-state model): only the released head is
  seen; the crafted canary was inserted at every step it was sampled. Score: how far u moved
  against the canary's direction, −(θ_T[u] − θ_0[u]). Two bounds from the same runs:
  `final_model_gdp`, as Nasr et al. read their audits: the score is Gaussian in both worlds (a sum
  over T steps), its standardised shift μ has a normal lower bound μ_lo, and a mechanism whose
  output separates the worlds by μ_lo is at least μ_lo-GDP, whose ε at δ is the bound (parametric:
  it rests on that Gaussianity); and `final_model_test`, one threshold chosen on half of the runs,
  Clopper–Pearson on the other half (`bounds.epsilon_lower_bound_split`; no assumption, but
  capped by the runs: its ceiling is that of the evaluation half's counts).

A lower bound above the claim is a bug in the training or in its accounting, never a finding:
`check_below_claim` fails loudly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from dp_accounting.pld import privacy_loss_distribution
from scipy import optimize, stats

from privssl.attacks.adaptive import heads_per_chunk
from privssl.audit.audit_names import CANARY_AUDITS
from privssl.audit.bounds import epsilon_lower_bound_split, hypothesis_test_ceiling
from privssl.io import atomic_write_csv
from privssl.release.dpsgd_batched import GradientCanary, train_dpsgd_heads
from privssl.release.dpsgd_spec import DPSGDSpec, sampling_plan

# The white-box bound is tight by design, so at 95 % it would exceed a correct claim in about one audit
# of twenty by sampling error alone, and stop the job for it; its σ bound is taken at this confidence
# instead (z ≈ 4.75): the bound stays within a few per cent of the claim at the runs × steps
# observations of the presets, and a bound above the claim is a bug, not chance.
WHITE_BOX_CONFIDENCE = 1 - 1e-6
CANARY_NORM = 10.0  # the crafted gradient's norm, in units of C: the clipping must bring it down to C


@dataclass(frozen=True)
class Coordinate:
    """The canary's coordinate u: a first-layer weight (parameter `name` at `index`) of feature
    `feature`, whose values over the training records sum to `feature_mass` in absolute value (0: a
    dead feature, every record's gradient on u is 0)."""

    name: str
    index: tuple[int, int]
    feature: int
    feature_mass: float

    @property
    def clean(self) -> bool:
        return self.feature_mass == 0.0


def quiet_coordinate(features: torch.Tensor, mlp: bool) -> Coordinate:
    """u on the feature with the least total |x_f| over the training records (first class or
    hidden unit): a linear layer's per-example weight gradient is x ⊗ g, so row f of it is x_f g."""
    mass = features.abs().sum(0).double()
    feature = int(mass.argmin())
    return Coordinate("weight1" if mlp else "weight", (feature, 0), feature, float(mass[feature]))


def observed_sums(trace: torch.Tensor, spec: DPSGDSpec, expected_batch: int) -> torch.Tensor:
    """(R, T) noisy gradient sums on u in units of C, from the traces (R, T + 1) of u: SGD with
    momentum β moves u by −lr · m_t, m_t = β m_{t−1} + g_t, g_t = (sum_t + noise_t) / expected batch."""
    moves = trace[:, 1:] - trace[:, :-1]
    m = -moves.double() / spec.lr
    g = m.clone()
    g[:, 1:] -= spec.momentum * m[:, :-1]
    return g * expected_batch / spec.clip_norm


@dataclass(frozen=True)
class WhiteBoxFit:
    """σ (the noise of one step, units of C) with its upper bound from n observations, and s (the
    canary's effective sensitivity, units of C) from the noise-free training."""

    sigma: float
    sigma_hi: float
    sensitivity: float
    n: int


def white_box_fit(obs_out: torch.Tensor, noise_free_in: torch.Tensor, confidence: float = 0.95) -> WhiteBoxFit:
    """σ_hi: the χ² upper bound (one-sided at `confidence`) on the standard deviation of the
    observations without the canary, about their mean; s: the largest step of the canary in a
    noise-free training (its observations are 0 or s)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    out = obs_out.reshape(-1).double().numpy()
    if len(out) < 2:
        raise ValueError(f"need at least 2 observations without the canary, got {len(out)}")
    var = float(out.var(ddof=1))
    sigma_hi = math.sqrt((len(out) - 1) * var / stats.chi2.ppf(1 - confidence, len(out) - 1))
    return WhiteBoxFit(math.sqrt(var), sigma_hi, float(noise_free_in.double().max()), len(out))


PLD_INTERVAL = 1e-4  # the optimistic PLD's loss grid: within 1 % below the pessimistic ε at the head's settings


def subsampled_gaussian_epsilon_lower(noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
    """A lower bound on the ε at δ of `steps` Poisson-subsampled Gaussian steps (add/remove): the
    PLD with its losses rounded down (privacy buckets, optimistic), never above the true ε."""
    pld = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=noise_multiplier, sensitivity=1, sampling_prob=sample_rate, pessimistic_estimate=False,
        value_discretization_interval=PLD_INTERVAL, use_connect_dots=False)
    return max(0.0, float(pld.self_compose(steps).get_epsilon_for_delta(delta)))


def white_box_epsilon(fit: WhiteBoxFit, sample_rate: float, steps: int, delta: float, clean: bool = True) -> float:
    """The lower bound at noise σ_hi / s; 0 where the canary never moved u (s ≤ 0) or where u is not
    clean (records' gradients reach it, so s is not the canary's alone)."""
    if fit.sensitivity <= 0 or not clean:
        return 0.0
    return subsampled_gaussian_epsilon_lower(fit.sigma_hi / fit.sensitivity, sample_rate, steps, delta)


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε at δ of μ-GDP (Dong, Roth, Su 2022): the root of Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) = δ; 0 where
    μ ≤ 0 or δ(0) ≤ δ."""
    if mu <= 0:
        return 0.0

    def excess(eps: float) -> float:
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta

    if excess(0.0) <= 0:
        return 0.0
    high = 1.0
    while excess(high) > 0:
        high *= 2
    return float(optimize.brentq(excess, 0.0, high, xtol=1e-10))


def final_model_gdp(moved_in: np.ndarray, moved_out: np.ndarray, delta: float, confidence: float = 0.95) -> dict:
    """μ̂ = (mean_in − mean_out) / pooled sd of the scores, μ_lo its one-sided normal bound
    (SE² = 1/R_in + 1/R_out + μ̂² / (2 (R_in + R_out))), and the ε of μ_lo-GDP at δ."""
    r_in, r_out = len(moved_in), len(moved_out)
    pooled = math.sqrt(((r_in - 1) * moved_in.var(ddof=1) + (r_out - 1) * moved_out.var(ddof=1)) / (r_in + r_out - 2))
    mu = float((moved_in.mean() - moved_out.mean()) / pooled)
    se = math.sqrt(1 / r_in + 1 / r_out + mu ** 2 / (2 * (r_in + r_out)))
    mu_lo = mu - stats.norm.ppf(confidence) * se
    return {"eps_lower_bound": gdp_epsilon(mu_lo, delta), "mu_hat": mu, "mu_lo": mu_lo, "n": r_in + r_out}


def final_model_audit(moved_in: np.ndarray, moved_out: np.ndarray, delta: float, confidence: float = 0.95,
                      seed: int = 0) -> dict:
    """The hypothesis-test bound on the final coordinate's movement, threshold chosen on a random
    half of the runs of each world, Clopper–Pearson on the other half; and that half's ceiling."""
    rng = np.random.default_rng(seed)
    scores = np.concatenate([moved_in, moved_out])
    member = np.concatenate([np.ones(len(moved_in), bool), np.zeros(len(moved_out), bool)])
    select = np.zeros(len(scores), bool)
    for side in (member, ~member):  # half of each world selects
        where = np.flatnonzero(side)
        select[rng.permutation(where)[: len(where) // 2]] = True
    bound = epsilon_lower_bound_split(scores[select], member[select], scores[~select], member[~select], delta,
                                      confidence)
    return {"eps_lower_bound": bound["eps_lower_bound"],
            "eps_ceiling": float(hypothesis_test_ceiling(bound["n_nonmembers"], bound["n_members"], delta,
                                                         confidence)),
            "n": bound["n_members"] + bound["n_nonmembers"]}


class ClaimViolated(RuntimeError):
    """An audit proved more ε than the release claims: the training or its accounting is wrong."""


def check_below_claim(rows: list[dict], tolerance: float = 1e-6) -> None:
    """Raise `ClaimViolated` naming every row whose lower bound exceeds its claimed ε."""
    over = [r for r in rows if r["eps_lower_bound"] > r["claimed_eps"] * (1 + tolerance)]
    if over:
        raise ClaimViolated("; ".join(f"{r['method']} at ε = {r['claimed_eps']:g}: the {r['audit']} audit proves "
                                      f"ε ≥ {r['eps_lower_bound']:.3f}" for r in over)
                            + " — a lower bound above the claim is a bug in the training or in its accounting")


def write_below_claim(rows: list[dict], path, log, script: str) -> None:
    """Write an audit's rows to `path`, or, where a bound exceeds its claim, log them and stop
    `script` naming each such row: nothing is written then."""
    try:
        check_below_claim(rows)
    except ClaimViolated as err:
        log.error("rows: %s", rows)
        raise SystemExit(f"{script}: error: {err}") from err
    atomic_write_csv(pd.DataFrame(rows), path)


def canary_trainings(features: torch.Tensor, labels: torch.Tensor, n_classes: int, head_spec, spec: DPSGDSpec,
                     noise_multiplier: float, runs: int, seed: int) -> tuple[Coordinate, torch.Tensor, torch.Tensor,
                                                                              torch.Tensor]:
    """(u, traces with the canary (runs, T + 1), traces without it, the trace of one noise-free
    training with it (1, T + 1)): DP-SGD trainings of the head on all of d at `noise_multiplier`
    (the last one at 0), by the batched trainer the attacks use, in chunks."""
    if runs < 2:
        raise ValueError(f"the canary audit needs at least 2 runs per world, got {runs}")
    mlp = head_spec.architecture == "mlp"
    coordinate = quiet_coordinate(features, mlp)
    n = len(labels)
    heads = 2 * runs + 1
    present = (torch.arange(heads) < runs) | (torch.arange(heads) == heads - 1)  # the first half, and the last
    sigma = torch.full((heads,), float(noise_multiplier))
    sigma[-1] = 0.0  # the noise-free training, which shows the canary's clipped step
    chunk = heads_per_chunk(n, max(features.shape[1], head_spec.hidden))
    traces = []
    for start in range(0, heads, chunk):
        part = slice(start, start + chunk)
        size = len(present[part])
        canary = GradientCanary(coordinate.name, coordinate.index, CANARY_NORM * spec.clip_norm, present[part])
        params = train_dpsgd_heads(features, labels, torch.arange(n).expand(size, n), n_classes, head_spec, spec,
                                   sigma[part], seed + start, canary)
        traces.append(params["canary_trace"])
    trace = torch.cat(traces)
    return coordinate, trace[:runs], trace[runs:2 * runs], trace[-1:]


def audit_dpsgd(features: torch.Tensor, labels: torch.Tensor, n_classes: int, head_spec, spec: DPSGDSpec,
                noise_multiplier: float, claimed_eps: float, delta: float, runs: int, confidence: float = 0.95,
                seed: int = 0) -> list[dict]:
    """Both audits of one DP-SGD release claimed (ε, δ)-DP and trained at `noise_multiplier` (the
    release's σ; a test plants another): one row per threat model with the bound, its ceiling
    (the claim, for the parametric white-box bound), n, and the white-box fit."""
    sample_rate, steps = sampling_plan(len(labels), spec)
    coordinate, trace_in, trace_out, noise_free = canary_trainings(features, labels, n_classes, head_spec, spec,
                                                                   noise_multiplier, runs, seed)
    expected_batch = int(len(labels) * sample_rate)
    fit = white_box_fit(observed_sums(trace_out, spec, expected_batch), observed_sums(noise_free, spec, expected_batch),
                        WHITE_BOX_CONFIDENCE)
    common = {"runs_per_world": runs, "steps": steps, "sample_rate": sample_rate, "coordinate_clean": coordinate.clean,
              "noise_multiplier": noise_multiplier, "confidence": confidence}
    white = {"audit": "white_box_all_updates",
             "eps_lower_bound": white_box_epsilon(fit, sample_rate, steps, delta, coordinate.clean),
             "eps_ceiling": claimed_eps, "n": fit.n, "confidence": WHITE_BOX_CONFIDENCE, "sigma_hat": fit.sigma,
             "sigma_hi": fit.sigma_hi, "sensitivity": fit.sensitivity}
    # final model: the canary pushes u down (its gradient is +C on u), so a member moved further down
    moved = lambda trace: (trace[:, 0] - trace[:, -1]).double().numpy()  # noqa: E731
    moved_in, moved_out = moved(trace_in), moved(trace_out)
    gdp = final_model_gdp(moved_in, moved_out, delta, confidence)
    final_gdp = {"audit": "final_model_gdp", "eps_lower_bound": gdp["eps_lower_bound"], "eps_ceiling": claimed_eps,
                 "n": gdp["n"], "mu_hat": gdp["mu_hat"], "mu_lo": gdp["mu_lo"]}
    final_test = {"audit": "final_model_test", **final_model_audit(moved_in, moved_out, delta, confidence, seed)}
    return [{"threat_model": CANARY_AUDITS[row["audit"]], **common, **row, "claimed_eps": claimed_eps, "delta": delta}
            for row in (white, final_gdp, final_test)]
