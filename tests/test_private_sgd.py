"""DP-SGD with fixed-size batches sampled without replacement (privssl.training.private_sgd): the spec's
validation, the sampler, and the trainer against plain minibatch SGD on the same batches, the
clipping bound on every update, and learning a separable problem."""

from __future__ import annotations

import copy
import math
import re
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from privssl.training import private_sgd
from privssl.training.private_sgd import PrivateSGDSpec, predict_proba, sample_batch, train_private_classifier


def make_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)).double()


def blobs(n_per_class: int = 40, classes: int = 3, seed: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    centres = 4 * torch.eye(classes, 5, dtype=torch.float64)
    y = torch.arange(classes).repeat_interleave(n_per_class)
    return centres[y] + 0.5 * torch.randn(len(y), 5, generator=g, dtype=torch.float64), y


def flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


# --------------------------------------------------------------------------- spec


@pytest.mark.parametrize("field, value", [("epochs", 0), ("batch_size", 0), ("epochs", 2.0), ("batch_size", True),
                                          ("clip_norm", 0), ("clip_norm", -1.0), ("clip_norm", float("nan")),
                                          ("clip_norm", float("inf")), ("lr", 0), ("lr", -0.1), ("momentum", 1),
                                          ("momentum", -0.1), ("weight_decay", -1), ("weight_decay", float("nan"))])
def test_spec_refuses_bad_values_naming_prefix_and_field(field, value):
    with pytest.raises(ValueError, match=rf"^dpcl\.head\.{field} = {re.escape(repr(value))} is not allowed"):
        PrivateSGDSpec(**{field: value}, prefix="dpcl.head")


def test_spec_from_config_refuses_unknown_keys_and_keeps_the_prefix():
    with pytest.raises(ValueError, match=r"unknown dpadapter\.fine_tune fields \['noise'\]"):
        PrivateSGDSpec.from_config({"epochs": 1, "noise": 2}, "dpadapter.fine_tune")
    with pytest.raises(ValueError, match=r"^dpadapter\.fine_tune\.lr = 0"):
        PrivateSGDSpec.from_config({"lr": 0}, "dpadapter.fine_tune")
    spec = PrivateSGDSpec.from_config({"epochs": 3, "batch_size": 7, "clip_norm": 0.5}, "dpcl.head")
    assert (spec.epochs, spec.batch_size, spec.clip_norm, spec.prefix) == (3, 7, 0.5, "dpcl.head")


@pytest.mark.parametrize("epochs, batch, n", [(1, 1, 1), (3, 7, 50), (2, 50, 50), (4, 10, 99)])
def test_steps_are_epochs_times_floor_n_over_batch(epochs, batch, n):
    assert PrivateSGDSpec(epochs=epochs, batch_size=batch).steps(n) == epochs * math.floor(n / batch)


def test_batch_larger_than_the_data_is_refused_naming_the_prefix():
    with pytest.raises(ValueError, match=r"dpcl\.head\.batch_size = 51 is not allowed"):
        PrivateSGDSpec(batch_size=51, prefix="dpcl.head").steps(50)


# --------------------------------------------------------------------------- sampler


def test_sample_batch_draws_distinct_indices_reproducibly():
    for n, b in ((10, 3), (7, 7), (100, 1)):
        draw = sample_batch(n, b, torch.Generator().manual_seed(4))
        assert len(draw) == b and len(set(draw.tolist())) == b and all(0 <= i < n for i in draw.tolist())
        assert torch.equal(draw, sample_batch(n, b, torch.Generator().manual_seed(4)))
    g = torch.Generator().manual_seed(4)
    draws = [tuple(sample_batch(10, 3, g).tolist()) for _ in range(5)]
    assert len(set(draws)) > 1  # successive draws are fresh subsets


def test_sample_batch_includes_every_index_with_frequency_b_over_n():
    n, b, draws = 10, 3, 3000
    g = torch.Generator().manual_seed(0)
    counts = Counter(i for _ in range(draws) for i in sample_batch(n, b, g).tolist())
    assert set(counts) == set(range(n))
    # each count is Binomial(3000, 0.3): sd ≈ 25, so ±100 is a 4-sd band
    assert all(abs(counts[i] - draws * b / n) < 100 for i in range(n))
    pairs = Counter(frozenset(p) for _ in range(2000) for p in [sample_batch(n, 2, g).tolist()])
    assert len(pairs) == n * (n - 1) // 2  # every pair occurs: a subset, not a fixed pattern


# --------------------------------------------------------------------------- trainer


@pytest.mark.parametrize("momentum, weight_decay", [(0.0, 0.0), (0.9, 1e-2)])
def test_no_noise_and_no_clipping_equals_plain_minibatch_sgd_on_the_same_batches(momentum, weight_decay):
    """σ = 0 draws no noise (gaussian_noise_like returns a copy), so the generator only draws the
    batches; with C far above every per-example norm the step is SGD on the mean cross-entropy."""
    x, y = blobs()
    model = make_model()
    reference = copy.deepcopy(model)
    spec = PrivateSGDSpec(epochs=3, batch_size=16, clip_norm=1e9, lr=0.1, momentum=momentum,
                          weight_decay=weight_decay)
    history = train_private_classifier(model, x, y, spec, 0.0, torch.Generator().manual_seed(3))

    g = torch.Generator().manual_seed(3)
    optimiser = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=momentum, weight_decay=weight_decay)
    losses = []
    for _ in range(3 * (len(y) // 16)):
        idx = torch.randperm(len(y), generator=g)[:16]
        optimiser.zero_grad()
        F.cross_entropy(reference(x[idx]), y[idx]).backward()
        optimiser.step()
        with torch.no_grad():
            losses.append(F.cross_entropy(reference(x[idx]), y[idx]).item())
    torch.testing.assert_close(flat(model), flat(reference), rtol=1e-10, atol=1e-10)
    assert not torch.allclose(flat(model), flat(make_model()))
    per_epoch = len(y) // 16
    assert [row["epoch"] for row in history] == [1, 2, 3]
    assert [row["loss"] for row in history] == pytest.approx(
        [sum(losses[e * per_epoch:(e + 1) * per_epoch]) / per_epoch for e in range(3)], rel=1e-10)
    assert all(row["clipped_fraction"] == 0 for row in history)


def test_every_update_has_norm_at_most_lr_times_clip_norm(monkeypatch):
    """Momentum 0, no weight decay, σ = 0: the update is lr · Σ clip(g_b) / |B|, of norm ≤ lr·C."""
    x, y = blobs()
    model = make_model()
    lr, clip_norm = 0.5, 1e-3
    updates = []
    original = private_sgd.apply_noisy_gradient

    def recording(model_, gradient, scale, optimiser):
        before = flat(model_)
        original(model_, gradient, scale, optimiser)
        updates.append(torch.linalg.norm(flat(model_) - before).item())

    monkeypatch.setattr(private_sgd, "apply_noisy_gradient", recording)
    history = train_private_classifier(model, x, y, PrivateSGDSpec(epochs=2, batch_size=10, clip_norm=clip_norm, lr=lr,
                                                                   momentum=0.0), 0.0,
                                       torch.Generator().manual_seed(1))
    assert len(updates) == 2 * (len(y) // 10)
    assert max(updates) <= lr * clip_norm * (1 + 1e-9)
    assert min(updates) > 0.1 * lr * clip_norm  # the clipped step is not degenerate
    assert all(row["clipped_fraction"] == 1.0 for row in history)
    # without clipping the same first step is far longer: the bound above comes from the clipping
    free = make_model()
    unclipped_spec = PrivateSGDSpec(epochs=1, batch_size=10, clip_norm=1e9, lr=lr, momentum=0.0)
    updates.clear()
    train_private_classifier(free, x[:10], y[:10], unclipped_spec, 0.0, torch.Generator().manual_seed(1))
    assert updates[0] > 10 * lr * clip_norm


def test_noise_has_std_sigma_times_2C_over_batch():
    """A zero-gradient model (all-zero weights of a bias-free linear layer on zero inputs): the
    update is −lr · N(0, (σ·2C)²) / |B| per coordinate."""
    sigma, clip_norm, lr, batch = 1.5, 0.3, 0.2, 10
    x, y = torch.zeros(batch, 50, dtype=torch.float64), torch.zeros(batch, dtype=torch.long)
    model = nn.Linear(50, 40, bias=False).double()
    nn.init.zeros_(model.weight)
    train_private_classifier(model, x, y,  # n = |B|: one step
                             PrivateSGDSpec(epochs=1, batch_size=batch, clip_norm=clip_norm, lr=lr, momentum=0.0),
                             sigma, torch.Generator().manual_seed(0))
    # cross-entropy at zero logits: the gradient w.r.t. W is (softmax − onehot) xᵀ = 0 since x = 0
    noise = -model.weight.detach().flatten() * batch / lr
    expected_std = sigma * private_sgd.REPLACE_ONE_FACTOR * clip_norm
    assert private_sgd.REPLACE_ONE_FACTOR == 2.0
    assert noise.std().item() == pytest.approx(expected_std, rel=0.05)  # 2000 draws: sd of the sd ≈ 1.6 %
    assert noise.mean().item() == pytest.approx(0.0, abs=4 * expected_std / math.sqrt(noise.numel()))


def test_learns_a_separable_problem_at_small_noise_and_predict_proba_is_a_float64_distribution():
    x, y = blobs(n_per_class=60)
    model = nn.Linear(5, 3).double()
    nn.init.zeros_(model.weight)
    nn.init.zeros_(model.bias)  # starts at chance: every prediction is class 0
    train_private_classifier(model, x, y, PrivateSGDSpec(epochs=5, batch_size=20, clip_norm=1.0, lr=0.5), 0.3,
                             torch.Generator().manual_seed(0))
    proba = predict_proba(model, x, batch_size=32)  # several chunks
    assert proba.dtype == torch.float64 and proba.shape == (len(y), 3)
    torch.testing.assert_close(proba.sum(1), torch.ones(len(y), dtype=torch.float64), rtol=0, atol=1e-12)
    assert (proba.argmax(1) == y).double().mean().item() > 0.9
    torch.testing.assert_close(proba, torch.softmax(model(x), 1).detach(), rtol=1e-12, atol=1e-14)


def test_transform_is_applied_to_each_batch():
    x, y = blobs()
    stored = (x * 10).round().to(torch.int64)  # the "stored" form, mapped back by the transform
    transform = lambda batch: batch.double() / 10  # noqa: E731
    model, reference = make_model(), make_model()
    spec = PrivateSGDSpec(epochs=1, batch_size=12, clip_norm=1e9, lr=0.1)
    train_private_classifier(model, stored, y, spec, 0.0, torch.Generator().manual_seed(2), transform=transform)
    train_private_classifier(reference, transform(stored), y, spec, 0.0, torch.Generator().manual_seed(2))
    torch.testing.assert_close(flat(model), flat(reference), rtol=0, atol=0)
    torch.testing.assert_close(predict_proba(model, stored, transform), predict_proba(reference, transform(stored)))


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_bad_noise_multiplier_is_refused(bad):
    x, y = blobs()
    with pytest.raises(ValueError, match=rf"noise multiplier = {re.escape(repr(bad))} is not allowed"):
        train_private_classifier(make_model(), x, y, PrivateSGDSpec(epochs=1, batch_size=10), bad, torch.Generator())
