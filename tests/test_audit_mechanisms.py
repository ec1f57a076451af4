"""The audits catch a broken mechanism and clear a correct one, on a convex head with a proven
sensitivity; and the canary design of the one-run audit is what its theorem needs."""

import math

import numpy as np
import pytest
import torch

from privssl.attacks.adaptive import perturb, train_clean_heads
from privssl.audit.bounds import epsilon_lower_bound_split, one_run_epsilon_lower_bound, one_run_guesses
from privssl.audit.canaries import canary_design
from privssl.release.certified import CertifiedSpec, certified_sensitivity
from privssl.release.protection import calibrate

SPEC = CertifiedSpec(clip_norm=1.0, l2=0.5, tolerance=1e-8)
EPS, DELTA = 1.0, 1e-5


def _canary_trials(trials=400, base=40, seed=0):
    """Jagielski et al.'s setting: a fixed data set of `base` records plus one slot holding the
    canary (a record along a direction no other record uses) or an ordinary filler record;
    the auditor's score is the released weight of that direction for the canary's class."""
    g = torch.Generator().manual_seed(seed)
    features = torch.zeros(base + 2, 4, dtype=torch.float64)
    features[:base + 1, :3] = torch.randn(base + 1, 3, generator=g, dtype=torch.float64) * 0.5
    labels = torch.randint(0, 2, (base + 2,), generator=g)
    features[base + 1, 3], labels[base + 1] = 1.0, 0  # the canary
    included = torch.arange(trials) % 2 == 0
    slot = torch.where(included, base + 1, base)
    sets = torch.cat([torch.arange(base).expand(trials, -1), slot[:, None]], 1)
    return features, labels, sets, included.numpy()


def _audited_bound(noise_factor: float) -> float:
    features, labels, sets, included = _canary_trials()
    clean = train_clean_heads("certified", features, labels, sets, 2, certified_spec=SPEC)
    sensitivity = certified_sensitivity(sets.shape[1], 2, SPEC)
    scale = calibrate("certified_gaussian", EPS, DELTA, sensitivity).noise_scale * noise_factor
    released = perturb(clean, "certified_gaussian", torch.tensor([scale]), seed=1)[0]
    # flat layout: weight (F, C) row-major then bias; weight[3, 0] - weight[3, 1]
    scores = (released[:, 3 * 2 + 0] - released[:, 3 * 2 + 1]).numpy()
    half = np.arange(len(scores)) % 4 < 2
    return epsilon_lower_bound_split(scores[half], included[half], scores[~half], included[~half], DELTA)[
        "eps_lower_bound"]


def test_the_audit_catches_noise_100x_too_small():
    assert _audited_bound(0.01) > EPS


def test_the_audit_clears_correct_noise_on_a_convex_head():
    bound = _audited_bound(1.0)
    assert bound <= EPS
    assert bound < 0.5  # the test has power to spare: it is not merely at the edge


def test_one_run_audit_catches_noise_100x_too_small():
    """One training with 200 canary slots (privssl.audit.canaries) on records that each have a feature
    of their own (one-hot rows), so every canary is a strong one and the test needs no shadows."""
    pool, canaries, size = 600, 200, 250
    labels = torch.randint(0, 3, (pool,), generator=torch.Generator().manual_seed(0))
    features = torch.eye(pool, dtype=torch.float64)
    design = canary_design(features, labels, 3, size, canaries, "mislabelled", seed=2)
    spec = CertifiedSpec(clip_norm=1.0, l2=0.01, tolerance=1e-8)
    clean = train_clean_heads("certified", design.features, design.labels, design.training_set[None], 3,
                              certified_spec=spec)
    sensitivity = certified_sensitivity(size, 3, spec)
    truth = design.included.numpy() * 2 - 1
    bounds = {}
    for factor in (0.01, 1.0):
        scale = calibrate("certified_gaussian", EPS, DELTA, sensitivity).noise_scale * factor
        flat = perturb(clean, "certified_gaussian", torch.tensor([scale]), seed=3)[0, 0]
        weight, bias = flat[:3 * pool].reshape(pool, 3), flat[3 * pool:]
        rows = design.canary_rows
        log_p = torch.log_softmax(design.features[rows] @ weight + bias, -1)
        scores = log_p.gather(1, design.labels[rows][:, None])[:, 0].numpy()  # white-box loss of the canary label
        guesses = one_run_guesses(scores, 20, 20)
        bounds[factor] = one_run_epsilon_lower_bound(int(((guesses * truth) > 0).sum()), 40, canaries, DELTA)
    assert bounds[0.01] > EPS
    assert bounds[1.0] <= EPS


def test_canary_design_is_a_substitution_of_one_slot_per_canary():
    features = torch.arange(40, dtype=torch.float64)[:, None].repeat(1, 2)
    labels = torch.arange(40) % 4
    design = canary_design(features, labels, 4, 20, 12, "mislabelled", seed=0)
    assert design.training_set.shape == (20,)
    assert len(set(design.training_set.tolist())) == 20
    canary_in = set(design.canary_rows[design.included].tolist())
    assert canary_in == set(design.training_set.tolist()) & set(design.canary_rows.tolist())
    source = design.features[design.canary_rows]  # canaries copy pool records ...
    assert all((features == row).all(1).any() for row in source)
    original = labels[(features[:, None, 0] == source[None, :, 0]).int().argmax(0)]
    assert (design.labels[design.canary_rows] != original).all()  # ... with a wrong label
    clean = canary_design(features, labels, 4, 20, 12, "in_distribution", seed=0)
    assert (clean.labels[clean.canary_rows] == original).all()
    inclusion = np.mean([canary_design(features, labels, 4, 20, 12, "in_distribution", seed=s).included.double()
                         .mean().item() for s in range(200)])
    assert math.isclose(inclusion, 0.5, abs_tol=0.03)
    with pytest.raises(ValueError, match="canaries"):
        canary_design(features, labels, 4, 20, 25, "mislabelled", seed=0)
    with pytest.raises(ValueError, match="canary kind"):
        canary_design(features, labels, 4, 20, 5, "poisoned", seed=0)
