"""Audits of the DP-SGD head with a gradient canary, in two threat models.

The claim audited: (ε, δ)-DP of the DP-SGD training for the addition or removal of one record,
whose clipped gradient has norm at most C. The auditor inserts a crafted gradient, a Dirac
canary: norm CANARY_NORM · C along one parameter coordinate u, as one more record of the training
set d (`dpsgd_batched.GradientCanary`: sampled and clipped like every record), in R trainings and
leaves it out of R others, each with its own Poisson batches and noise, everything else the
release's (its settings and σ at that ε). The trainer is `privssl.release.dpsgd_batched`, Opacus'
algorithm stacked (tests/test_dpsgd_batched.py checks its steps and their noise against Opacus);
every row names it (`trainer`).

u is the first-layer weight of a feature that is 0 in every record of d (a dead unit of the
encoder): the per-example gradient of every real record vanishes on u, so the coordinate moves
only by the canary and the noise. Without such a feature the quietest one is taken: the
final-model audits stay valid (their runs differ only by the canary), but the white-box audit is
not run (its rows read 0): its statistics read each step's move of u as the canary's and the
noise's alone.

- white box, every update (Nasr et al. 2023): `privssl.audit.white_box`, a statistic of the
  observed per-step updates in the runs with the canary against those without it, as a
  Gaussian-DP fit (`white_box_gdp`) and as a split Clopper–Pearson test (`white_box_test`).
- final model (Cebere, Bellet, Papernot 2024, the hidden-state model): only the released head is
  seen; the crafted canary was inserted at every step it was sampled. Score: how far u moved
  against the canary's direction, −(θ_T[u] − θ_0[u]). Two bounds from the same runs:
  `final_model_gdp` (the score is a sum over T steps, Gaussian in both worlds: `privssl.audit.gdp`)
  and `final_model_test` (one threshold on half of the runs, Clopper–Pearson on the other half).

Before any bound, a consistency check of the trainer, no audit (no bound or verdict rests on it):
σ̂, the root mean square of the observations without the canary, must be the release's σ within its
sampling error, the canary's steps in one noise-free training with it must be 0 or 1 (the clipping
to C, the accounted momentum and learning rate), and the trainings must take the accounted T steps;
otherwise `TrainerMismatch` stops the job. The white-box rows carry σ̂ and the largest step.
Neither audit sees how the records' gradients are clipped (the canary's coordinate is dead to
them): tests/test_dpsgd_batched.py checks that against Opacus.

A lower bound above the claim is a bug in the training or in its accounting, never a finding:
`check_below_claim` fails loudly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from privssl.attacks.adaptive import heads_per_chunk
from privssl.audit.audit_names import CANARY_AUDITS
from privssl.audit.bounds import each_rate, epsilon_lower_bound_split, hypothesis_test_ceiling
from privssl.audit.gdp import gdp_fit
from privssl.audit.white_box import (
    GDP_CONFIDENCE,
    observed_sums,
    split_halves,
    trainer_inconsistencies,
    white_box_audit,
    white_box_reach,
)
from privssl.io import atomic_write_csv
from privssl.release.dpsgd_batched import GradientCanary, train_dpsgd_heads
from privssl.release.dpsgd_spec import DPSGDSpec, sampling_plan

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


def final_model_audit(moved_in: np.ndarray, moved_out: np.ndarray, delta: float, confidence: float = 0.95,
                      seed: int = 0) -> dict:
    """The hypothesis-test bound on the final coordinate's movement, threshold chosen on a random
    half of the runs of each world, Clopper–Pearson on the other half, both rates jointly at
    `confidence`; and that half's ceiling."""
    scores = np.concatenate([moved_in, moved_out])
    member, select = split_halves(len(moved_in), len(moved_out), seed)
    bound = epsilon_lower_bound_split(scores[select], member[select], scores[~select], member[~select], delta,
                                      each_rate(confidence))
    return {"eps_lower_bound": bound["eps_lower_bound"],
            "eps_ceiling": float(hypothesis_test_ceiling(bound["n_nonmembers"], bound["n_members"], delta,
                                                         each_rate(confidence))),
            "n": bound["n_members"] + bound["n_nonmembers"]}


class ClaimViolated(RuntimeError):
    """An audit proved more ε than the release claims: the training or its accounting is wrong."""


class TrainerMismatch(ClaimViolated):
    """The observed updates show a trainer other than the one the claim accounts for (its noise
    scale, clipping, optimiser or steps), whatever ε it reaches."""


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


TRAINER = "privssl.release.dpsgd_batched"  # the `trainer` column: the code the canary ran through


def audit_dpsgd(features: torch.Tensor, labels: torch.Tensor, n_classes: int, head_spec, spec: DPSGDSpec,
                noise_multiplier: float, claimed_eps: float, delta: float, runs: int, confidence: float = 0.95,
                seed: int = 0, check_trainer: bool = True) -> list[dict]:
    """The audits of one DP-SGD release claimed (ε, δ)-DP and trained at `noise_multiplier` (the
    release's σ; a test plants another): one row per audit with the bound, its ceiling (the claim,
    for the parametric bounds) and n; the white-box rows with their reach and the noise check.
    First the observed updates are checked against the release's settings (`white_box.
    trainer_inconsistencies`): a mismatch raises `TrainerMismatch` (`check_trainer=False`, for the
    tests that show what the bounds alone catch, skips it)."""
    sample_rate, steps = sampling_plan(len(labels), spec)
    coordinate, trace_in, trace_out, noise_free = canary_trainings(features, labels, n_classes, head_spec, spec,
                                                                   noise_multiplier, runs, seed)
    expected_batch = int(len(labels) * sample_rate)
    obs_in, obs_out = (observed_sums(t, spec, expected_batch).numpy() for t in (trace_in, trace_out))
    common = {"runs_per_world": runs, "steps": steps, "sample_rate": sample_rate, "coordinate_clean": coordinate.clean,
              "noise_multiplier": noise_multiplier, "confidence": confidence, "trainer": TRAINER}
    noise_free_obs = observed_sums(noise_free, spec, expected_batch).numpy()
    # on a coordinate the records' gradients reach, its moves are not the canary's and the noise's alone
    check = check_trainer and coordinate.clean
    problems = trainer_inconsistencies(obs_out, noise_free_obs, noise_multiplier, steps) if check else []
    if problems:
        raise TrainerMismatch(f"dpsgd at ε = {claimed_eps:g}: " + "; ".join(problems)
                              + " — the trainer is not the one the claim accounts for")
    white = white_box_audit(obs_in, obs_out, noise_multiplier, sample_rate, delta, confidence, seed)
    noise_check = {"steps_observed": obs_out.shape[1], "sigma_hat": float(np.sqrt(np.mean(obs_out ** 2))),
                   "canary_step": float(noise_free_obs.max())}
    for row in white:
        row.update(noise_check)
        row.setdefault("eps_ceiling", claimed_eps)
        if row["audit"] == "white_box_gdp":
            row.update(white_box_reach(noise_multiplier, sample_rate, steps, runs, delta))
        if not coordinate.clean:  # records' gradients reach u: its moves are not the canary's and the noise's alone
            row["eps_lower_bound"] = 0.0
    # final model: the canary pushes u down (its gradient is +C on u), so a member moved further down
    moved = lambda trace: (trace[:, 0] - trace[:, -1]).double().numpy()  # noqa: E731
    moved_in, moved_out = moved(trace_in), moved(trace_out)
    gdp = gdp_fit(moved_in, moved_out, delta, GDP_CONFIDENCE)
    final_gdp = {"audit": "final_model_gdp", "eps_lower_bound": gdp["eps_lower_bound"], "eps_ceiling": claimed_eps,
                 "n": gdp["n"], "confidence": GDP_CONFIDENCE, "mu_hat": gdp["mu_hat"], "mu_lo": gdp["mu_lo"]}
    final_test = {"audit": "final_model_test", **final_model_audit(moved_in, moved_out, delta, confidence, seed)}
    return [{"threat_model": CANARY_AUDITS[row["audit"]], **common, **row, "claimed_eps": claimed_eps, "delta": delta}
            for row in (*white, final_gdp, final_test)]
