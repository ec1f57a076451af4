"""The white-box audit of DP-SGD (Nasr, Hayes, Steinke, Balle, Tramèr, Jagielski, Carlini, Terzis,
USENIX Security 2023): the auditor sees every update, inserts a gradient canary in the trainings of
one world and not in those of the other, and bounds ε by how well a statistic of the observed
updates tells the two worlds apart.

The observations. On the canary's coordinate u (a first-layer weight of a dead feature: no record's
gradient reaches it) the auditor inverts SGD with momentum from the trace of u and recovers each
step's noisy gradient sum in units of C (`observed_sums`): o_t = b_t · s + σ · ξ_t, with b_t the
canary's Poisson draw (0 in the world without it) and s its clipped norm. Under the claim s = 1,
b_t ~ Bernoulli(q), ξ_t independent N(0, 1), T steps; a bug in any of these moves the observations.

The statistics (higher = the canary was in), each a function of one training's observations:
- `likelihood_ratio`: Σ_t log(1 − q + q · exp((o_t − ½) / σ²)), the Neyman–Pearson statistic of the
  claimed mechanism (the most powerful test when the implementation is the claim);
- `sum`: Σ_t o_t, which does not lean on the claimed σ or q;
- `dispersion`: Σ_t (o_t − ō)², the canary's draws add variance within a training: it separates the
  worlds when the noise is not independent between steps (a noise drawn once and reused cancels in
  it, the canary's steps do not).

The bounds, both from the same 2R trainings:
- `white_box_gdp` (parametric, as Nasr et al. read their audits): the likelihood-ratio statistic is
  a sum over T steps, Gaussian in both worlds by the central limit theorem; its standardised shift
  μ has a one-sided normal lower bound μ_lo at GDP_CONFIDENCE, and a mechanism whose output
  separates the worlds by μ_lo is at least μ_lo-GDP, whose ε at δ is the bound. What it can show on
  a correct implementation follows from the claim (`claimed_shift`): the shift μ* of the statistic
  under the claimed mechanism, whose ε (the reach at unlimited trainings) is 0.73–0.995 of the
  claim at the workflow's settings — below it, because one μ summarises the whole trade-off curve
  and the claim lives in its tail — and at R trainings the ε of μ* − z · SE (`eps_reach`).
- `white_box_test` (no assumption): on half of the trainings of each world the statistic and its
  threshold are chosen (the largest Clopper–Pearson bound); on the other half that one test gives
  Clopper–Pearson bounds on both error rates, jointly at the audit's confidence, and the ε they
  force (`bounds.epsilon_lower_bound_split_among`).
  Capped by the trainings: its ceiling is that of the evaluation half's counts.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy import integrate, stats

from privssl.audit.bounds import each_rate, epsilon_lower_bound_split_among, hypothesis_test_ceiling
from privssl.audit.gdp import expected_gdp_bound, gdp_epsilon, gdp_fit, low_gdp_bound
from privssl.release.dpsgd_spec import DPSGDSpec

STATISTICS = ("likelihood_ratio", "sum", "dispersion")  # the first is the GDP fit's
# The GDP fits' one-sided confidence. A correct implementation's statistic has a shift whose ε is up
# to 0.995 of the claim (1 at q = 1), so at 95 % its bound would exceed a correct claim in up to one
# audit of twenty by sampling error alone, and stop the job for it; at 1 − 10⁻⁴ (z ≈ 3.72) that takes
# a 3.7-standard-error excursion (simulated: at most 1.25e-4 of 40,000 audits of 4–1000 trainings),
# while a planted bug still moves the bound far above the claim.
GDP_CONFIDENCE = 1 - 1e-4


def observed_sums(trace: torch.Tensor, spec: DPSGDSpec, expected_batch: int) -> torch.Tensor:
    """(R, T) noisy gradient sums on u in units of C, from the traces (R, T + 1) of u: SGD with
    momentum β moves u by −lr · m_t, m_t = β m_{t−1} + g_t, g_t = (sum_t + noise_t) / expected batch."""
    moves = trace[:, 1:] - trace[:, :-1]
    m = -moves.double() / spec.lr
    g = m.clone()
    g[:, 1:] -= spec.momentum * m[:, :-1]
    return g * expected_batch / spec.clip_norm


def step_log_likelihood_ratio(obs: np.ndarray, noise_multiplier: float, sample_rate: float) -> np.ndarray:
    """log of the density of one step's observation with the canary over the density without it,
    under the claim: log(1 − q + q · exp((o − ½) / σ²)) (the canary's clipped step is 1 in units of C)."""
    if not (noise_multiplier > 0 and 0 < sample_rate <= 1):
        raise ValueError(f"the likelihood ratio needs σ > 0 and q in (0, 1], got σ = {noise_multiplier}, "
                         f"q = {sample_rate}")
    shifted = (np.asarray(obs, dtype=np.float64) - 0.5) / noise_multiplier ** 2
    with np.errstate(divide="ignore"):  # q = 1: the first term is log 0
        return np.logaddexp(np.log1p(-sample_rate), math.log(sample_rate) + shifted)


def run_statistics(obs: np.ndarray, noise_multiplier: float, sample_rate: float) -> dict[str, np.ndarray]:
    """Each statistic of `STATISTICS` for every training: `obs` is (R, T) observations."""
    obs = np.asarray(obs, dtype=np.float64)
    return {"likelihood_ratio": step_log_likelihood_ratio(obs, noise_multiplier, sample_rate).sum(1),
            "sum": obs.sum(1),
            "dispersion": ((obs - obs.mean(1, keepdims=True)) ** 2).sum(1)}


def split_halves(runs_in: int, runs_out: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(member flags, selection flags) of the stacked in- and out-trainings: a random half of each
    world selects, the rest evaluates."""
    rng = np.random.default_rng(seed)
    member = np.concatenate([np.ones(runs_in, bool), np.zeros(runs_out, bool)])
    select = np.zeros(len(member), bool)
    for side in (member, ~member):
        where = np.flatnonzero(side)
        select[rng.permutation(where)[: len(where) // 2]] = True
    return member, select


def white_box_audit(obs_in: np.ndarray, obs_out: np.ndarray, noise_multiplier: float, sample_rate: float,
                    delta: float, confidence: float = 0.95, seed: int = 0) -> list[dict]:
    """Both white-box bounds from the observations (R, T) of the trainings with the canary and
    without it; σ and q are the claim's, which only shape the likelihood-ratio statistic."""
    if len(obs_in) < 4 or len(obs_out) < 4:
        raise ValueError(f"the white-box audit needs at least 4 trainings per world, got {len(obs_in)} and "
                         f"{len(obs_out)}")
    found_in = run_statistics(obs_in, noise_multiplier, sample_rate)
    found_out = run_statistics(obs_out, noise_multiplier, sample_rate)
    fit = gdp_fit(found_in["likelihood_ratio"], found_out["likelihood_ratio"], delta, GDP_CONFIDENCE)
    gdp_row = {"audit": "white_box_gdp", "statistic": "likelihood_ratio", "eps_lower_bound": fit["eps_lower_bound"],
               "n": fit["n"], "confidence": GDP_CONFIDENCE, "mu_hat": fit["mu_hat"], "mu_lo": fit["mu_lo"]}
    member, select = split_halves(len(obs_in), len(obs_out), seed)
    stacked = {name: np.concatenate([found_in[name], found_out[name]]) for name in STATISTICS}
    test = epsilon_lower_bound_split_among({k: v[select] for k, v in stacked.items()}, member[select],
                                           {k: v[~select] for k, v in stacked.items()}, member[~select], delta,
                                           each_rate(confidence))
    ceiling = float(hypothesis_test_ceiling(test["n_nonmembers"], test["n_members"], delta, each_rate(confidence)))
    test_row = {"audit": "white_box_test", "statistic": test["statistic"], "eps_lower_bound": test["eps_lower_bound"],
                "eps_ceiling": ceiling, "n": test["n_members"] + test["n_nonmembers"]}
    return [gdp_row, test_row]


CONSISTENCY_LEVEL = 1e-6  # the noise-scale check's two-sided level: a correct trainer fails it once in 10⁶ audits
STEP_TOLERANCE = 1e-5  # the clipped canary's step: C · 10C / (10C + 10⁻⁶) in units of C, and float rounding


def trainer_inconsistencies(obs_out: np.ndarray, noise_free: np.ndarray, noise_multiplier: float,
                            steps: int) -> list[str]:
    """What the observed updates say the trainer did differently from the release's settings,
    beside any ε bound (none rests on this): the observations without the canary must have the
    release's noise scale σ (χ² over their R·T values about 0, two-sided at CONSISTENCY_LEVEL: the
    bounds miss a noise 20 % too small at 1000 trainings, this does not), the noise-free training's
    steps must be 0 or the clipped canary's 1 (a clipping to another C, or a momentum or learning rate
    other than the accounted ones, moves them), and there must be T of them."""
    problems = []
    if obs_out.shape[1] != steps:
        problems.append(f"the trainings took {obs_out.shape[1]} steps, the claim accounts for {steps}")
    n = obs_out.size
    scale = float(np.sqrt(np.mean(obs_out ** 2)))
    low, high = (math.sqrt(stats.chi2.ppf(p, n) / n) * noise_multiplier
                 for p in (CONSISTENCY_LEVEL / 2, 1 - CONSISTENCY_LEVEL / 2))
    if not low <= scale <= high:
        problems.append(f"the noise of a step is σ̂ = {scale:.4g} (units of C, {n} observations), the release's "
                        f"σ = {noise_multiplier:.4g} allows [{low:.4g}, {high:.4g}]")
    off = noise_free[(np.abs(noise_free) > STEP_TOLERANCE) & (np.abs(noise_free - 1) > STEP_TOLERANCE)]
    if off.size:
        problems.append(f"a noise-free training moved the canary's coordinate by {off.flat[0]:.6g} C in a step "
                        f"(allowed: 0, or 1 when the canary, clipped to C, was sampled)")
    return problems


def _step_moments(noise_multiplier: float, sample_rate: float) -> tuple[float, float, float, float]:
    """(mean, variance) of one step's log likelihood ratio with the canary, then without it, under
    the claim, by quadrature over the Gaussian noise."""
    def moment(power: int, shift: float) -> float:
        f = lambda z: step_log_likelihood_ratio(shift + noise_multiplier * z, noise_multiplier,  # noqa: E731
                                                sample_rate) ** power * stats.norm.pdf(z)
        return integrate.quad(f, -40, 40, limit=400, points=[(0.5 - shift) / noise_multiplier])[0]

    out1, out2 = moment(1, 0.0), moment(2, 0.0)
    hit1, hit2 = moment(1, 1.0), moment(2, 1.0)
    in1 = (1 - sample_rate) * out1 + sample_rate * hit1
    in2 = (1 - sample_rate) * out2 + sample_rate * hit2
    return in1, in2 - in1 ** 2, out1, out2 - out1 ** 2


def claimed_shift(noise_multiplier: float, sample_rate: float, steps: int) -> float:
    """μ*: the standardised shift √T (m_in − m_out) / √((v_in + v_out) / 2) of the likelihood-ratio
    statistic under the claimed mechanism, the value `white_box_gdp`'s μ̂ estimates on a correct
    implementation."""
    m_in, v_in, m_out, v_out = _step_moments(noise_multiplier, sample_rate)
    return math.sqrt(steps) * (m_in - m_out) / math.sqrt((v_in + v_out) / 2)


def white_box_reach(noise_multiplier: float, sample_rate: float, steps: int, runs: int, delta: float) -> dict:
    """What `white_box_gdp` shows on a correct implementation: μ* (`mu_reach`), its ε at unlimited
    trainings (`eps_reach_unlimited`), at `runs` trainings per world (`eps_reach`), and the bound it
    stays above 95 % of the time there (`eps_reach_low`). A row below the ledger's margin whose reach
    is below it too says nothing of the release; one below `eps_reach_low` is more than bad luck."""
    mu = claimed_shift(noise_multiplier, sample_rate, steps)
    return {"mu_reach": mu, "eps_reach_unlimited": gdp_epsilon(mu, delta),
            "eps_reach": expected_gdp_bound(mu, runs, runs, delta, GDP_CONFIDENCE),
            "eps_reach_low": low_gdp_bound(mu, runs, runs, delta, GDP_CONFIDENCE)}
