"""Per-example gradients (torch.func) against loops of single-example backward passes, the
contrastive split against whole-batch autograd, and clipping and noise against their definitions."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from privssl.training.encoders import ConvEncoder, projection_head
from privssl.training.per_example import (
    clip_and_sum,
    flat_norms,
    gaussian_noise_like,
    per_example_loss_grads,
    per_example_vjp,
)


def _encoder(seed=0):
    torch.manual_seed(seed)
    return ConvEncoder(in_channels=1, image_size=8, width=16).double()


def _images(n, seed=1):
    return torch.rand(n, 1, 8, 8, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _loop_vjp(module, x, c):
    """J_bᵀ c_b by one backward pass per example."""
    params = {k: p for k, p in module.named_parameters() if p.requires_grad}
    rows = [torch.autograd.grad((module(x[b][None]) * c[b]).sum(), list(params.values())) for b in range(len(x))]
    return {k: torch.stack([row[i] for row in rows]) for i, k in enumerate(params)}


def _assert_dicts_close(ours, expected, **tol):
    assert list(ours) == list(expected)
    for k in expected:
        torch.testing.assert_close(ours[k], expected[k], **tol)


@pytest.mark.parametrize("chunk_size", [None, 4])
def test_vjp_equals_loop_of_single_example_backward_passes(chunk_size):
    encoder, x = _encoder(), _images(6)
    c = torch.randn(6, encoder.out_dim, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    ours = per_example_vjp(encoder, x, c, chunk_size=chunk_size)
    assert all(ours[k].shape == (6, *p.shape) for k, p in encoder.named_parameters())
    _assert_dicts_close(ours, _loop_vjp(encoder, x, c), rtol=1e-10, atol=1e-12)


def test_vjp_leaves_out_frozen_parameters():
    encoder, x = _encoder(), _images(3)
    encoder.conv[0].requires_grad_(False)
    c = torch.randn(3, encoder.out_dim, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    ours = per_example_vjp(encoder, x, c)
    assert "conv.0.weight" not in ours and "conv.0.bias" not in ours
    _assert_dicts_close(ours, _loop_vjp(encoder, x, c), rtol=1e-10, atol=1e-12)


def test_loss_grads_equal_loop_of_single_example_cross_entropy():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)).double()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(9, 5, generator=g, dtype=torch.float64), torch.randint(0, 3, (9,), generator=g)
    ours = per_example_loss_grads(mlp, F.cross_entropy, x, y)
    rows = [torch.autograd.grad(F.cross_entropy(mlp(x[b:b + 1]), y[b:b + 1]), list(mlp.parameters()))
            for b in range(9)]
    expected = {k: torch.stack([row[i] for row in rows]) for i, (k, _) in enumerate(mlp.named_parameters())}
    _assert_dicts_close(ours, expected, rtol=1e-10, atol=1e-12)


def _nt_xent(z, tau=0.5):
    """SimCLR's loss over 2N views, view i's positive its partner i ± N, the other views negatives."""
    zn = F.normalize(z, dim=1)
    sim = (zn @ zn.T / tau).masked_fill(torch.eye(len(z), dtype=torch.bool), float("-inf"))
    n = len(z) // 2
    return F.cross_entropy(sim, torch.cat([torch.arange(n, 2 * n), torch.arange(n)]))


def test_vjp_pieces_sum_to_the_batch_gradient_of_a_contrastive_loss():
    torch.manual_seed(0)
    model = nn.Sequential(_encoder(), projection_head(16, 16).double())
    x = _images(8)  # 4 images × 2 views
    z = model(x)
    loss = _nt_xent(z)
    params = dict(model.named_parameters())
    *batch_grads, cotangent = torch.autograd.grad(loss, [*params.values(), z])
    pieces = per_example_vjp(model, x, cotangent)
    for k, expected in zip(params, batch_grads, strict=True):
        torch.testing.assert_close(pieces[k].sum(0), expected, rtol=1e-9, atol=1e-12)


def _random_grads(norms):
    """Per-example gradients over two parameters, example b scaled to total norm norms[b]."""
    g = torch.Generator().manual_seed(3)
    grads = {"w": torch.randn(len(norms), 4, 3, generator=g, dtype=torch.float64),
             "b": torch.randn(len(norms), 3, generator=g, dtype=torch.float64)}
    scale = torch.tensor(norms, dtype=torch.float64) / torch.cat([v.flatten(1) for v in grads.values()], 1).norm(dim=1)
    return {k: v * scale.view(-1, *[1] * (v.dim() - 1)) for k, v in grads.items()}


def test_clip_and_sum_bounds_each_norm_and_sums_the_clipped_pieces():
    clip = 1.5
    norms = [0.0, 0.3, 1.5, 2.0, 40.0, 1e-3]
    grads = _random_grads(norms)
    summed, returned = clip_and_sum(grads, clip)
    flat = torch.cat([v.flatten(1) for v in grads.values()], 1)
    torch.testing.assert_close(returned, flat.norm(dim=1))
    torch.testing.assert_close(flat_norms(grads), flat.norm(dim=1))
    pieces = [clip_and_sum({k: v[b:b + 1] for k, v in grads.items()}, clip)[0] for b in range(len(norms))]
    for b, piece in enumerate(pieces):
        piece_flat = torch.cat([v.flatten() for v in piece.values()])
        assert float(piece_flat.norm()) <= clip * (1 + 1e-9)
        if norms[b] < clip:  # already within C: unchanged (at exactly C rounding may scale by 1 - 1 ulp)
            torch.testing.assert_close(piece_flat, flat[b], rtol=0, atol=0)
        elif norms[b] > clip:  # clipped onto the sphere of radius C, same direction
            torch.testing.assert_close(piece_flat, flat[b] * clip / flat[b].norm(), rtol=1e-12, atol=1e-15)
    for k in grads:
        assert summed[k].shape == grads[k].shape[1:]
        torch.testing.assert_close(summed[k], sum(p[k] for p in pieces), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_clip_and_sum_rejects_a_bad_clip_norm(bad):
    with pytest.raises(ValueError, match=rf"clip_norm must be finite and > 0, got {bad!r}"):
        clip_and_sum(_random_grads([1.0, 2.0]), bad)


def test_gaussian_noise_is_reproducible_and_has_the_requested_std():
    summed = {"w": torch.full((100, 500), 3.0, dtype=torch.float32), "b": torch.zeros(500, dtype=torch.float64)}
    first = gaussian_noise_like(summed, 2.5, torch.Generator().manual_seed(7))
    again = gaussian_noise_like(summed, 2.5, torch.Generator().manual_seed(7))
    other = gaussian_noise_like(summed, 2.5, torch.Generator().manual_seed(8))
    _assert_dicts_close(first, again, rtol=0, atol=0)
    assert not torch.equal(first["w"], other["w"])
    assert first["w"].dtype == torch.float32 and first["b"].dtype == torch.float64
    noise = (first["w"] - summed["w"]).double().flatten()  # 5·10^4 draws; the sample std's sd is 0.3 %
    assert abs(float(noise.std()) / 2.5 - 1) < 0.02 and abs(float(noise.mean())) < 0.05


def test_gaussian_noise_std_zero_returns_an_equal_copy():
    summed = {"w": torch.randn(4, 3)}
    out = gaussian_noise_like(summed, 0.0, torch.Generator().manual_seed(0))
    assert torch.equal(out["w"], summed["w"]) and out["w"] is not summed["w"]
    with pytest.raises(ValueError, match="std must be finite and >= 0, got -1.0"):
        gaussian_noise_like(summed, -1.0, torch.Generator())


def _bn_net():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(144, 2)).double()
    net[1].running_mean.uniform_(-1, 1)
    net[1].running_var.uniform_(0.5, 2)
    return net


def test_batchnorm_in_training_mode_is_refused():
    net, x = _bn_net().train(), _images(3)
    with pytest.raises(ValueError, match=r"Sequential has BatchNorm2d layer '1' normalising by batch statistics"):
        per_example_vjp(net, x, torch.ones(3, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="BatchNorm2d layer '1'"):
        per_example_loss_grads(net, F.cross_entropy, x, torch.zeros(3, dtype=torch.long))
    no_running_stats = nn.Sequential(nn.BatchNorm1d(2, track_running_stats=False)).eval()
    with pytest.raises(ValueError, match="BatchNorm1d layer '0'"):
        per_example_vjp(no_running_stats, torch.ones(3, 2), torch.ones(3, 2))


def test_batchnorm_in_eval_mode_matches_the_loop():
    net, x = _bn_net().eval(), _images(5)
    c = torch.randn(5, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    _assert_dicts_close(per_example_vjp(net, x, c), _loop_vjp(net, x, c), rtol=1e-10, atol=1e-12)


def test_shape_mismatches_are_refused_naming_the_shapes():
    encoder, x = _encoder(), _images(4)
    with pytest.raises(ValueError, match=r"inputs \(4, 1, 8, 8\) and cotangents \(3, 16\)"):
        per_example_vjp(encoder, x, torch.ones(3, 16, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"cotangents \(4, 17\) .* per example \(17,\) against \(16,\)"):
        per_example_vjp(encoder, x, torch.ones(4, 17, dtype=torch.float64))
    # would broadcast against (16,) without the check
    with pytest.raises(ValueError, match=r"cotangents \(4, 1\) .* per example \(1,\) against \(16,\)"):
        per_example_vjp(encoder, x, torch.ones(4, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"inputs \(4, 1, 8, 8\) and targets \(5,\)"):
        per_example_loss_grads(encoder, F.cross_entropy, x, torch.zeros(5, dtype=torch.long))
