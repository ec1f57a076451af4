"""DPCL (privssl.training.dpcl, privssl.accounting.dpcl_spec): the connection points' sensitivities (the paper's
Theorems 1-3) on random and adversarial batches, the per-view gradient bounds by brute force
(the naive 4|B|C holds, DPCL's heuristic 4C can be exceeded), the losses against independent
NumPy computations, the cotangents against autograd, one training step against plain SGD, and
the k-NN evaluation against scikit-learn."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.neighbors import KNeighborsClassifier
from torch import nn

from privssl.accounting import dpcl_spec
from privssl.training.dpcl import (
    STD_FLOOR,
    DPCLSpec,
    barlow_twins_loss,
    batch_statistics,
    cotangents,
    knn_accuracy,
    simclr_loss,
    train_dpcl,
)
from privssl.training.encoders import ConvEncoder, projection_head, split_for_training
from privssl.training.per_example import clip_and_sum, flat_norms, per_example_vjp
from privssl.training.simclr import Augmentation


def unit_rows(n: int, k: int, generator: torch.Generator) -> torch.Tensor:
    return F.normalize(torch.randn(n, k, generator=generator, dtype=torch.float64), dim=1)


def replace_example(z: torch.Tensor, i: int, rows: torch.Tensor) -> torch.Tensor:
    """Z' of a batch [views 1; views 2] whose example i (rows i and i + B) is replaced by `rows`."""
    b = len(z) // 2
    out = z.clone()
    out[i], out[i + b] = rows[0], rows[1]
    return out


# --------------------------------------------------------------------------- Theorem 1: S = ZZᵀ


@pytest.mark.parametrize("b, k", [(1, 2), (2, 2), (3, 5), (8, 3), (16, 16)])
def test_similarity_matrix_sensitivity_bound_holds_on_random_and_adversarial_replacements(b, k):
    bound = dpcl_spec.similarity_sensitivity(2 * b)
    assert bound == pytest.approx(4 * math.sqrt(2 * b - 1), rel=1e-15)
    worst = 0.0
    for seed in range(5):
        g = torch.Generator().manual_seed(seed)
        z = unit_rows(2 * b, k, g)
        for i in range(b):
            candidates = [unit_rows(2, k, g),  # a random example
                          -z[[i, i + b]],  # both views reversed
                          -z[[(i + 1) % b, (i + 1) % b + b]],  # the reverse of another example
                          z[[(i + 1) % b + b, (i + 1) % b]]]  # a copy of another example, views swapped
            for rows in candidates:
                z2 = replace_example(z, i, rows)
                worst = max(worst, torch.linalg.norm(z @ z.T - z2 @ z2.T).item())
    assert worst <= bound * (1 + 1e-12)


@pytest.mark.parametrize("b, k", [(1, 2), (2, 2), (4, 3)])
def test_similarity_matrix_sensitivity_bound_survives_gradient_ascent(b, k):
    """Adam on every row of Z and on the replacement, maximising ‖ZZᵀ − Z'Z'ᵀ‖_F: the bound holds
    and the ascent comes within 30 % of it (the exact supremum is 4√(|Z| − 2) for |Z| ≥ 4)."""
    torch.manual_seed(0)
    raw = torch.randn(2 * b, k, dtype=torch.float64, requires_grad=True)
    new = torch.randn(2, k, dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.Adam([raw, new], lr=0.05)
    best = 0.0
    for _ in range(300):
        z = F.normalize(raw, dim=1)
        z2 = torch.cat([F.normalize(new, dim=1)[:1], z[1:b], F.normalize(new, dim=1)[1:], z[b + 1:]])
        gap = torch.linalg.norm(z @ z.T - z2 @ z2.T)
        best = max(best, gap.item())
        optimiser.zero_grad()
        (-gap).backward()
        optimiser.step()
    bound = dpcl_spec.similarity_sensitivity(2 * b)
    assert 0.7 * bound <= best <= bound * (1 + 1e-12)


@pytest.mark.parametrize("b", [2, 5, 32])
def test_similarity_matrix_bound_is_nearly_attained_by_a_collinear_batch(b):
    """Every row e₁, the replaced example's two views −e₁: the 4(|Z| − 2) entries between them and
    the other rows change by 2 each, so ‖ΔS‖ = 4√(|Z| − 2), ≥ 80 % of 4√(|Z| − 1)."""
    z = torch.zeros(2 * b, 3, dtype=torch.float64)
    z[:, 0] = 1
    z2 = replace_example(z, 0, -z[[0, b]])
    gap = torch.linalg.norm(z @ z.T - z2 @ z2.T).item()
    assert gap == pytest.approx(4 * math.sqrt(2 * b - 2), rel=1e-14)
    assert 0.8 * dpcl_spec.similarity_sensitivity(2 * b) <= gap <= dpcl_spec.similarity_sensitivity(2 * b)


# --------------------------------------------------------------------------- Theorems 2-3: mean, SSE


@pytest.mark.parametrize("n, k", [(2, 1), (3, 4), (10, 8), (64, 16)])
def test_batch_statistics_equal_numpy_mean_and_sum_of_squared_deviations(n, k):
    z = unit_rows(n, k, torch.Generator().manual_seed(n))
    mean, sse = batch_statistics(z)
    ref = z.numpy()
    np.testing.assert_allclose(mean.numpy(), ref.mean(0), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(sse.numpy(), (n - 1) * ref.var(0, ddof=1), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(sse.numpy(), ((ref - ref.mean(0)) ** 2).sum(0), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("n, k", [(2, 2), (3, 1), (10, 4), (50, 8)])
def test_mean_and_sse_sensitivity_bounds_hold_when_one_row_is_replaced(n, k):
    assert dpcl_spec.mean_sensitivity(n) == pytest.approx(2 / n, rel=1e-15)
    worst_mean = worst_sse = 0.0
    for seed in range(10):
        g = torch.Generator().manual_seed(seed)
        z = unit_rows(n, k, g)
        for row in (unit_rows(1, k, g)[0], -z[0], -z[1 % n], z[1 % n]):
            z2 = z.clone()
            z2[0] = row
            (m1, s1), (m2, s2) = batch_statistics(z), batch_statistics(z2)
            worst_mean = max(worst_mean, torch.linalg.norm(m1 - m2).item())
            worst_sse = max(worst_sse, torch.linalg.norm(s1 - s2).item())
    assert worst_mean <= dpcl_spec.mean_sensitivity(n) * (1 + 1e-12)
    assert worst_sse <= dpcl_spec.SSE_SENSITIVITY


@pytest.mark.parametrize("n", [2, 5, 100])
def test_mean_bound_is_attained_and_sse_bound_two_thirds_attained_by_a_reversed_row(n):
    """All rows e₁, one replaced by −e₁: ‖Δμ‖ = 2/N exactly, ΔSSE = 4(1 − 1/N) in the first feature
    (Σz² is unchanged, Nμ² drops from N to (N − 2)²/N)."""
    z = torch.zeros(n, 3, dtype=torch.float64)
    z[:, 0] = 1
    z2 = z.clone()
    z2[0] = -z[0]
    (m1, s1), (m2, s2) = batch_statistics(z), batch_statistics(z2)
    assert torch.linalg.norm(m1 - m2).item() == pytest.approx(dpcl_spec.mean_sensitivity(n), rel=1e-14)
    assert torch.linalg.norm(s1 - s2).item() == pytest.approx(4 * (1 - 1 / n), rel=1e-12)
    if n >= 4:
        assert torch.linalg.norm(s1 - s2).item() >= 0.5 * dpcl_spec.SSE_SENSITIVITY


def test_sse_sensitivity_bound_survives_gradient_ascent():
    torch.manual_seed(0)
    n, k = 10, 3
    raw = torch.randn(n, k, dtype=torch.float64, requires_grad=True)
    new = torch.randn(k, dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.Adam([raw, new], lr=0.05)
    best_mean = best_sse = 0.0
    for _ in range(300):
        z = F.normalize(raw, dim=1)
        z2 = torch.cat([F.normalize(new, dim=0)[None], z[1:]])
        (m1, s1), (m2, s2) = batch_statistics(z), batch_statistics(z2)
        gap = torch.linalg.norm(s1 - s2)
        best_mean, best_sse = max(best_mean, torch.linalg.norm(m1 - m2).item()), max(best_sse, gap.item())
        optimiser.zero_grad()
        (-gap).backward()
        optimiser.step()
    assert best_mean <= dpcl_spec.mean_sensitivity(n) * (1 + 1e-12)
    assert 0.5 * dpcl_spec.SSE_SENSITIVITY <= best_sse <= dpcl_spec.SSE_SENSITIVITY


# --------------------------------------------------------------------------- gradient sensitivity, mechanisms


def test_gradient_sensitivity_naive_4BC_dpcl_4C_and_unknown_variant_refused():
    assert dpcl_spec.gradient_sensitivity("naive", 50, 0.02) == pytest.approx(4 * 50 * 0.02, rel=1e-15)
    assert dpcl_spec.gradient_sensitivity("dpcl", 50, 0.02) == pytest.approx(4 * 0.02, rel=1e-15)
    assert dpcl_spec.gradient_sensitivity("dpcl", 7, 3.0) == dpcl_spec.gradient_sensitivity("dpcl", 500, 3.0)
    with pytest.raises(ValueError, match=r"'plain'.*allowed: naive, dpcl"):
        dpcl_spec.gradient_sensitivity("plain", 50, 1.0)


def test_mechanisms_per_objective_and_variant():
    assert dpcl_spec.mechanisms("simclr", "naive") == ("gradient",)
    assert dpcl_spec.mechanisms("barlow_twins", "naive") == ("gradient",)
    assert dpcl_spec.mechanisms("simclr", "dpcl") == ("gradient", "similarity")
    assert dpcl_spec.mechanisms("barlow_twins", "dpcl") == ("gradient", "mean_a", "mean_b", "sse_a", "sse_b")
    with pytest.raises(ValueError, match=r"'byol'.*allowed: simclr, barlow_twins"):
        dpcl_spec.mechanisms("byol", "dpcl")
    with pytest.raises(ValueError, match=r"'plain'.*allowed: naive, dpcl"):
        dpcl_spec.mechanisms("simclr", "plain")


def test_dpcl_spec_refuses_a_batch_of_one_and_unknown_settings():
    with pytest.raises(ValueError, match=r"dpcl\.encoder\.batch_size = 1"):
        DPCLSpec(batch_size=1)
    with pytest.raises(ValueError, match="'byol'"):
        DPCLSpec(objective="byol")
    with pytest.raises(ValueError, match="'plain'"):
        DPCLSpec(variant="plain")
    assert DPCLSpec(batch_size=4).steps_per_epoch(10) == 2
    with pytest.raises(ValueError, match=r"dpcl\.encoder\.batch_size = 11"):
        DPCLSpec(batch_size=11).steps_per_epoch(10)


# --------------------------------------------------------------------------- per-view pieces by brute force


def clipped_sum_difference(model, views, views2, spec, clip_norm, sigma=0.0):
    """‖Σ clip(g_i) − Σ clip(g'_i)‖ of the per-view pieces of two batches, and all unclipped norms;
    at σ > 0 (dpcl) both batches see the same noise draw of the released connection point."""
    sums, norms = [], []
    for v in (views, views2):
        _, cot = cotangents(spec, model(v), sigma, torch.Generator().manual_seed(7))
        pieces = per_example_vjp(model, v, cot)
        summed, n = clip_and_sum(pieces, clip_norm)
        # the clipped sum is Σ_i min(1, C/‖g_i‖) g_i, each term of norm ≤ C
        factors = (clip_norm / n).clamp(max=1.0)
        for name, g in pieces.items():
            terms = factors.view(-1, *[1] * (g.dim() - 1)) * g
            torch.testing.assert_close(summed[name], terms.sum(0), rtol=1e-10, atol=1e-12 * terms.abs().max().item())
        assert torch.all(factors * n <= clip_norm * (1 + 1e-12))
        sums.append(summed)
        norms.append(n)
    diff = torch.sqrt(sum(((sums[0][k] - sums[1][k]) ** 2).sum() for k in sums[0])).item()
    return diff, torch.cat(norms)


def two_view_batches(b, shape, seed, replacement):
    """Views of a batch of b examples and of the batch with example 0 replaced (rows 0 and b)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(b, *shape, generator=g, dtype=torch.float64) if replacement == "image" else \
        torch.randn(b, *shape, generator=g, dtype=torch.float64)
    noise = lambda: 0.1 * torch.randn(b, *shape, generator=g, dtype=torch.float64)  # noqa: E731
    v1, v2 = x + noise(), x + noise()
    new = torch.rand(shape, generator=g, dtype=torch.float64) if replacement == "image" else \
        torch.randn(shape, generator=g, dtype=torch.float64)
    w1, w2 = v1.clone(), v2.clone()
    w1[0], w2[0] = new, new + 0.1 * torch.randn(shape, generator=g, dtype=torch.float64)
    return torch.cat([v1, v2]), torch.cat([w1, w2])


def conv_model(seed=0):
    torch.manual_seed(seed)
    encoder = ConvEncoder(1, 8, 16).double()
    trunk, top = split_for_training(encoder, "top")
    return trunk, nn.Sequential(top, projection_head(16, 8)).double()


@pytest.mark.parametrize("objective", ["simclr", "barlow_twins"])
@pytest.mark.parametrize("b", [2, 4])
def test_naive_bound_4BC_holds_for_clipped_per_view_pieces_when_one_image_is_replaced(objective, b):
    trunk, model = conv_model()
    spec = DPCLSpec(objective=objective, variant="naive", batch_size=b)
    for seed in range(3):
        views, views2 = two_view_batches(b, (1, 8, 8), seed, "image")
        views, views2 = trunk(views).detach(), trunk(views2).detach()
        norms = clipped_sum_difference(model, views, views2, spec, 1.0)[1]
        for clip_norm in (norms.min().item() / 10, norms.median().item(), 10 * norms.max().item()):
            diff, _ = clipped_sum_difference(model, views, views2, spec, clip_norm)
            assert diff <= dpcl_spec.gradient_sensitivity("naive", b, clip_norm) * (1 + 1e-9)
            assert diff > 0  # the replacement changes the sum: the bound is checked on a real change


@pytest.mark.parametrize("objective, b, variant, sigma", [("simclr", 8, "naive", 0.0),
                                                     ("barlow_twins", 2, "naive", 0.0),
                                                     ("simclr", 8, "dpcl", 1.0),
                                                     ("barlow_twins", 4, "dpcl", 1.0)])
def test_dpcl_heuristic_4C_is_exceeded_by_the_pieces_of_a_tiny_linear_model(objective, b, variant, sigma):
    """With every piece clipped (C below every norm), the unchanged examples' pieces turn when one
    example is replaced: ‖Σ clip(g) − Σ clip(g')‖ exceeds 4C for some of a few seeds (but never
    4|B|C) — with the clean loss, and in the dpcl variant even when both batches see the same
    noise draw of the released similarity matrix (statistics). What DPCL's Δ_g = 4C leaves out is
    this change of the other pieces: a heuristic, not a bound."""
    spec = DPCLSpec(objective=objective, variant=variant, batch_size=b)
    ratios = []
    for seed in range(10):
        torch.manual_seed(seed)
        model = nn.Linear(4, 2).double()
        views, views2 = two_view_batches(b, (4,), seed, "vector")
        norms = clipped_sum_difference(model, views, views2, spec, 1.0, sigma)[1]
        clip_norm = 1e-3 * norms.min().item()
        diff, _ = clipped_sum_difference(model, views, views2, spec, clip_norm, sigma)
        assert diff <= dpcl_spec.gradient_sensitivity("naive", b, clip_norm) * (1 + 1e-9)
        ratios.append(diff / dpcl_spec.gradient_sensitivity("dpcl", b, clip_norm))
    assert max(ratios) > 1.2


# --------------------------------------------------------------------------- losses


def nt_xent_reference(z: np.ndarray, temperature: float, noise: np.ndarray | None = None) -> float:
    """Eq. (3)-(4) by a loop: mean over i of −log(exp(s_ij/τ) / Σ_{k≠i} exp(s_ik/τ)), j = partner."""
    zn = z / np.linalg.norm(z, axis=1, keepdims=True)
    s = zn @ zn.T + (0 if noise is None else noise)
    n2, n = len(z), len(z) // 2
    losses = []
    for i in range(n2):
        j = (i + n) % n2
        denominator = sum(math.exp(s[i, k] / temperature) for k in range(n2) if k != i)
        losses.append(-math.log(math.exp(s[i, j] / temperature) / denominator))
    return float(np.mean(losses))


def barlow_reference(za: np.ndarray, zb: np.ndarray, lambd: float, stats=None) -> float:
    """Eq. (5)-(6): unit rows, features standardised by the batch mean and SSE/(N − 1) (or the
    given released statistics), C = ẑ_Aᵀẑ_B / N, Σ(1 − C_ii)² + λ Σ_{i≠j} C_ij²."""
    za = za / np.linalg.norm(za, axis=1, keepdims=True)
    zb = zb / np.linalg.norm(zb, axis=1, keepdims=True)
    n = len(za)
    if stats is None:
        stats = [(z.mean(0), ((z - z.mean(0)) ** 2).sum(0)) for z in (za, zb)]
    normed = [(z - mean) / np.sqrt(np.maximum(sse, 0) / (n - 1) + STD_FLOOR ** 2)
              for z, (mean, sse) in zip((za, zb), stats)]
    c = normed[0].T @ normed[1] / n
    k = c.shape[0]
    on = sum((1 - c[i, i]) ** 2 for i in range(k))
    off = sum(c[i, j] ** 2 for i in range(k) for j in range(k) if i != j)
    return on + lambd * off


@pytest.mark.parametrize("b, k, temperature", [(2, 3, 0.5), (5, 8, 0.1), (8, 4, 1.0)])
def test_simclr_loss_equals_a_loop_over_nt_xent_terms_with_and_without_noise(b, k, temperature):
    g = torch.Generator().manual_seed(b)
    z = 3 * torch.randn(2 * b, k, generator=g, dtype=torch.float64)  # not unit: the loss normalises
    noise = 0.3 * torch.randn(2 * b, 2 * b, generator=g, dtype=torch.float64)
    assert simclr_loss(z, temperature).item() == pytest.approx(nt_xent_reference(z.numpy(), temperature), rel=1e-12)
    assert simclr_loss(z, temperature, noise).item() == pytest.approx(
        nt_xent_reference(z.numpy(), temperature, noise.numpy()), rel=1e-12)
    assert simclr_loss(z, temperature, noise).item() != pytest.approx(simclr_loss(z, temperature).item(), rel=1e-6)


@pytest.mark.parametrize("n, k, lambd", [(4, 3, 0.005), (10, 6, 0.5), (32, 8, 1.0)])
def test_barlow_twins_loss_equals_numpy_eq5_6(n, k, lambd):
    g = torch.Generator().manual_seed(n)
    za = 2 * torch.randn(n, k, generator=g, dtype=torch.float64)
    zb = za + torch.randn(n, k, generator=g, dtype=torch.float64)
    assert barlow_twins_loss(za, zb, lambd).item() == pytest.approx(
        barlow_reference(za.numpy(), zb.numpy(), lambd), rel=1e-11)
    # released statistics are used instead of the batch's own (a truncated SSE hits STD_FLOOR)
    stats = [(torch.randn(k, generator=g, dtype=torch.float64) * 0.1, torch.rand(k, generator=g, dtype=torch.float64))
             for _ in range(2)]
    stats[1][1][0] = -1.0
    assert barlow_twins_loss(za, zb, lambd, tuple(stats)).item() == pytest.approx(
        barlow_reference(za.numpy(), zb.numpy(), lambd, [(m.numpy(), s.numpy()) for m, s in stats]), rel=1e-11)


# --------------------------------------------------------------------------- cotangents


def projections(b=4, k=5, seed=0):
    return torch.randn(2 * b, k, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("objective", ["simclr", "barlow_twins"])
def test_naive_cotangents_are_the_autograd_gradient_of_the_batch_loss(objective):
    spec = DPCLSpec(objective=objective, variant="naive", batch_size=4, temperature=0.3, barlow_lambda=0.1)
    z = projections().requires_grad_(True)
    loss = simclr_loss(z, 0.3) if objective == "simclr" else barlow_twins_loss(z[:4], z[4:], 0.1)
    (expected,) = torch.autograd.grad(loss, z)
    value, grad = cotangents(spec, z, 0.0, torch.Generator().manual_seed(0))
    assert value == pytest.approx(loss.item(), rel=1e-14)
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-14)


def test_dpcl_simclr_cotangents_at_noise_zero_equal_the_naive_ones():
    z = projections()
    naive = cotangents(DPCLSpec(variant="naive", batch_size=4), z, 0.0, torch.Generator().manual_seed(0))
    private = cotangents(DPCLSpec(variant="dpcl", batch_size=4), z, 0.0, torch.Generator().manual_seed(0))
    assert private[0] == pytest.approx(naive[0], rel=1e-14)
    torch.testing.assert_close(private[1], naive[1], rtol=1e-12, atol=1e-14)


def test_dpcl_barlow_cotangents_at_noise_zero_hold_the_released_statistics_constant():
    """Same loss as the naive variant; the gradient treats the (here noiseless) released mean and
    SSE as constants, so it is the gradient with the batch statistics detached — not the naive
    gradient, which also differentiates the normalisation."""
    z = projections().requires_grad_(True)
    naive = cotangents(DPCLSpec(objective="barlow_twins", variant="naive", batch_size=4), z, 0.0, torch.Generator())
    value, grad = cotangents(DPCLSpec(objective="barlow_twins", variant="dpcl", batch_size=4), z, 0.0,
                             torch.Generator().manual_seed(0))
    assert value == pytest.approx(naive[0], rel=1e-12)
    stats = tuple(tuple(s.detach() for s in batch_statistics(F.normalize(v.detach(), dim=1))) for v in (z[:4], z[4:]))
    (expected,) = torch.autograd.grad(barlow_twins_loss(z[:4], z[4:], 0.005, stats), z)
    torch.testing.assert_close(grad, expected, rtol=1e-10, atol=1e-12)
    assert not torch.allclose(grad, naive[1], rtol=1e-3)


@pytest.mark.parametrize("objective", ["simclr", "barlow_twins"])
def test_noisy_cotangents_are_seeded_report_the_clean_loss_and_use_noise_of_sigma_times_sensitivity(objective):
    b, k, sigma = 4, 5, 0.7
    spec = DPCLSpec(objective=objective, variant="dpcl", batch_size=b)
    z = projections(b, k).requires_grad_(True)
    first = cotangents(spec, z, sigma, torch.Generator().manual_seed(3))
    again = cotangents(spec, z, sigma, torch.Generator().manual_seed(3))
    other = cotangents(spec, z, sigma, torch.Generator().manual_seed(4))
    assert first[0] == again[0] and torch.equal(first[1], again[1])
    assert not torch.allclose(first[1], other[1])
    clean = simclr_loss(z, spec.temperature) if objective == "simclr" else barlow_twins_loss(z[:b], z[b:], 0.005)
    assert first[0] == pytest.approx(clean.item(), rel=1e-14) and other[0] == first[0]
    # the released connection point, drawn as dpcl documents it: N(0, (σΔ)²) per entry from the generator
    g = torch.Generator().manual_seed(3)
    if objective == "simclr":
        noise = torch.randn(2 * b, 2 * b, generator=g, dtype=torch.float64) * sigma * 4 * math.sqrt(2 * b - 1)
        loss = simclr_loss(z, spec.temperature, noise)
    else:
        stats = []
        for v in (z[:b], z[b:]):
            mean, sse = batch_statistics(F.normalize(v.detach(), dim=1))
            mean = mean + torch.randn(k, generator=g, dtype=torch.float64) * sigma * 2 / b
            sse = (sse + torch.randn(k, generator=g, dtype=torch.float64) * sigma * 6).clamp(min=0)
            stats.append((mean, sse))
        loss = barlow_twins_loss(z[:b], z[b:], 0.005, tuple(stats))
    (expected,) = torch.autograd.grad(loss, z)
    torch.testing.assert_close(first[1], expected, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- train_dpcl


class ToDouble(nn.Module):
    def forward(self, x):
        return x.double()


def training_setup(seed=0):
    """A float64 ConvEncoder(1, 8, 16) split at its dense layer, a projection head, uint8 images."""
    torch.manual_seed(seed)
    encoder = ConvEncoder(1, 8, 16).double()
    conv, top = split_for_training(encoder, "top")
    trunk = nn.Sequential(ToDouble(), conv)  # train_dpcl feeds float32 images in [0, 1]
    model = nn.Sequential(top, projection_head(16, 8)).double()
    images = torch.randint(0, 256, (12, 1, 8, 8), generator=torch.Generator().manual_seed(seed + 1),
                           dtype=torch.uint8)
    return trunk, model, images


def batch_loss(spec, z, b):
    return simclr_loss(z, spec.temperature) if spec.objective == "simclr" else \
        barlow_twins_loss(z[:b], z[b:], spec.barlow_lambda)


@pytest.mark.parametrize("objective", ["simclr", "barlow_twins"])
def test_naive_training_without_noise_or_clipping_is_plain_sgd_on_the_batch_loss(objective):
    """σ = 0 and C far above every per-view norm: every step is an SGD (momentum, weight decay)
    step on the batch loss, the batches and augmentations drawn from the same generator."""
    trunk, model, images = training_setup()
    reference = copy.deepcopy(model)
    lr = 0.1 if objective == "simclr" else 1e-4  # Barlow Twins' per-view norms are ~1e3 here
    spec = DPCLSpec(objective=objective, variant="naive", epochs=2, batch_size=4, clip_norm=1e9, lr=lr,
                    momentum=0.9, weight_decay=1e-3)
    augmentation = Augmentation()
    history = train_dpcl(trunk, model, images, spec, 0.0, augmentation, torch.Generator().manual_seed(5))

    g = torch.Generator().manual_seed(5)
    optimiser = torch.optim.SGD(reference.parameters(), lr=lr, momentum=0.9, weight_decay=1e-3)
    losses = []
    for _ in range(2 * (12 // 4)):
        idx = torch.randperm(12, generator=g)[:4]
        x = images[idx].float() / 255
        views = trunk(torch.cat([augmentation(x, g), augmentation(x, g)]))
        loss = batch_loss(spec, reference(views), 4)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    for a, b in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)
    assert [row["epoch"] for row in history] == [1, 2]
    # rel 1e-9: Barlow Twins' loss sums terms of order 1e3, in another order on the two paths
    assert [row["loss"] for row in history] == pytest.approx([np.mean(losses[:3]), np.mean(losses[3:])], rel=1e-9)
    assert all(row["clipped_fraction"] == 0 for row in history)


@pytest.mark.parametrize("objective", ["simclr", "barlow_twins"])
def test_dpcl_step_without_noise_or_clipping_is_sgd_on_the_released_connection_point(objective):
    """One step (n = |B|): the dpcl variant at σ = 0 steps along the batch gradient of its loss
    (Barlow Twins: with the released statistics as constants)."""
    trunk, model, images = training_setup()
    images = images[:4]
    reference = copy.deepcopy(model)
    spec = DPCLSpec(objective=objective, variant="dpcl", epochs=1, batch_size=4, clip_norm=1e6, lr=0.2,
                    momentum=0.0, weight_decay=0.0)
    augmentation = Augmentation()
    train_dpcl(trunk, model, images, spec, 0.0, augmentation, torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)
    x = images[torch.randperm(4, generator=g)].float() / 255
    views = trunk(torch.cat([augmentation(x, g), augmentation(x, g)]))
    z = reference(views)
    if objective == "simclr":
        loss = simclr_loss(z, spec.temperature)
    else:
        stats = tuple(batch_statistics(F.normalize(v.detach(), dim=1)) for v in (z[:4], z[4:]))
        loss = barlow_twins_loss(z[:4], z[4:], spec.barlow_lambda, stats)
    grads = torch.autograd.grad(loss, list(reference.parameters()))
    for a, b, grad in zip(model.parameters(), reference.parameters(), grads):
        torch.testing.assert_close(a, b - 0.2 * grad, rtol=1e-10, atol=1e-12)
        assert grad.abs().max() > 0


@pytest.mark.parametrize("objective", ["simclr", "barlow_twins"])
@pytest.mark.parametrize("variant", ["naive", "dpcl"])
def test_train_dpcl_history_and_frozen_trunk(objective, variant):
    trunk, model, images = training_setup()
    trunk_before = [p.detach().clone() for p in trunk.parameters()]
    model_before = [p.detach().clone() for p in model.parameters()]
    spec = DPCLSpec(objective=objective, variant=variant, epochs=3, batch_size=4, clip_norm=0.01)
    seen = []
    history = train_dpcl(trunk, model, images, spec, 1.0, Augmentation(), torch.Generator().manual_seed(0),
                         on_epoch=lambda epoch: seen.append(epoch) or {"knn": 0.1 * epoch})
    assert seen == [1, 2, 3]
    assert [row["epoch"] for row in history] == [1, 2, 3]
    assert [row["knn"] for row in history] == pytest.approx([0.1, 0.2, 0.3])
    for row in history:
        assert math.isfinite(row["loss"]) and 0 <= row["clipped_fraction"] <= 1
    assert len(trunk_before) == 2 * 4 and all(torch.equal(a, b) for a, b in zip(trunk_before, trunk.parameters()))
    assert all(not torch.equal(a, b) for a, b in zip(model_before, model.parameters()))


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_train_dpcl_refuses_a_bad_noise_multiplier(bad):
    trunk, model, images = training_setup()
    with pytest.raises(ValueError, match=f"noise multiplier = {bad!r}"):
        train_dpcl(trunk, model, images, DPCLSpec(batch_size=4), bad, Augmentation(), torch.Generator())


def test_per_view_pieces_of_a_training_batch_sum_to_the_autograd_batch_gradient():
    trunk, model, images = training_setup()
    g = torch.Generator().manual_seed(0)
    x = images[:4].float() / 255
    views = trunk(torch.cat([Augmentation()(x, g), Augmentation()(x, g)])).detach()
    for objective in ("simclr", "barlow_twins"):
        spec = DPCLSpec(objective=objective, variant="naive", batch_size=4)
        _, cot = cotangents(spec, model(views), 0.0, g)
        summed, norms = clip_and_sum(per_example_vjp(model, views, cot), 1e9)
        assert torch.equal(norms, flat_norms(per_example_vjp(model, views, cot)))
        names = [n for n, _ in model.named_parameters()]
        grads = torch.autograd.grad(batch_loss(spec, model(views), 4), list(model.parameters()))
        for name, grad in zip(names, grads):
            torch.testing.assert_close(summed[name], grad, rtol=1e-10, atol=1e-13)


# --------------------------------------------------------------------------- k-NN


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_knn_accuracy_equals_sklearn_cosine_knn(k):
    rng = np.random.default_rng(k)
    train, test = rng.normal(size=(60, 6)), rng.normal(size=(40, 6))
    train_labels, test_labels = rng.integers(0, 4, 60), rng.integers(0, 4, 40)
    train[train_labels == 1] += 1.5  # a learnable class, so that the accuracy is not only chance
    test[test_labels == 1] += 1.5
    ours = knn_accuracy(torch.from_numpy(train).float(), torch.from_numpy(train_labels), torch.from_numpy(test).float(),
                        torch.from_numpy(test_labels), k)
    reference = KNeighborsClassifier(n_neighbors=k, metric="cosine").fit(train, train_labels).score(test, test_labels)
    assert ours == pytest.approx(reference, abs=1e-12)


def test_knn_accuracy_refuses_k_out_of_range():
    x, y = torch.randn(5, 3), torch.arange(5) % 2
    for k in (0, 6):
        with pytest.raises(ValueError, match=f"k = {k} is not allowed.*1 <= k <= 5"):
            knn_accuracy(x, y, x, y, k)
    assert knn_accuracy(x, y, x, y, 1) == 1.0  # each point is its own nearest neighbour
