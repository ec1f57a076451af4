"""The batched DP-SGD of the adaptive attacks is the victim's DP-SGD (Opacus), step for step."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from opacus import PrivacyEngine

from privssl.release.dpsgd import DPSGDSpec, HeadModule, sampling_plan
from privssl.release.dpsgd_batched import clipped_gradient_sum, train_dpsgd_heads
from privssl.training.heads import DTYPE, HeadSpec, flatten, init_heads


def _data(n=24, f=6, c=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, f, generator=g, dtype=DTYPE) * 2
    y = torch.randint(0, c, (n,), generator=g)
    return x, y, c


def _opacus_one_step(head_spec, x, y, c, clip_norm, lr, momentum):
    """One full-batch Opacus DP-SGD step with noise multiplier 0 from A_S's initialisation."""
    module = HeadModule.initial(head_spec, x.shape[1], c)
    optimizer = torch.optim.SGD(module.parameters(), lr=lr, momentum=momentum)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=len(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        private, dp_optimizer, dp_loader = PrivacyEngine(secure_mode=False).make_private(
            module=module, optimizer=optimizer, data_loader=loader, noise_multiplier=0.0,
            max_grad_norm=clip_norm, poisson_sampling=False)
        for xb, yb in dp_loader:
            dp_optimizer.zero_grad()
            F.cross_entropy(private(xb), yb).backward()
            dp_optimizer.step()
    return flatten(private.to_standard_module().head_params())[0]


@pytest.mark.parametrize("architecture", ["linear", "mlp"])
@pytest.mark.parametrize("clip_norm", [0.05, 100.0])  # every example clipped / none clipped
def test_one_step_equals_opacus(architecture, clip_norm):
    head_spec = HeadSpec(architecture=architecture, hidden=5, init_seed=3)
    x, y, c = _data()
    expected = _opacus_one_step(head_spec, x, y, c, clip_norm, lr=0.5, momentum=0.0)
    params = init_heads(head_spec, x.shape[1], c, 1)
    grads = clipped_gradient_sum(params, x[None], y[None], torch.ones(1, len(y), dtype=DTYPE), clip_norm)
    ours = flatten({k: params[k] - 0.5 * grads[k] / len(y) for k in params})[0]
    torch.testing.assert_close(ours, expected, rtol=1e-9, atol=1e-12)


def test_clipped_sum_equals_autograd_per_example():
    head_spec = HeadSpec(architecture="mlp", hidden=4, init_seed=1)
    x, y, c = _data(n=7)
    params = init_heads(head_spec, x.shape[1], c, 2)
    weights = torch.tensor([[1, 0, 1, 1, 0, 1, 1], [0, 1, 1, 0, 1, 0, 0]], dtype=DTYPE)
    ours = clipped_gradient_sum(params, x.expand(2, -1, -1), y.expand(2, -1), weights, clip_norm=0.3)
    for b in range(2):
        total = {k: torch.zeros_like(v[b]) for k, v in params.items()}
        for i in range(len(y)):
            single = {k: v[b:b + 1].clone().requires_grad_(True) for k, v in params.items()}
            hidden = torch.relu(x[i:i + 1] @ single["weight1"][0] + single["bias1"][0])
            loss = F.cross_entropy(hidden @ single["weight2"][0] + single["bias2"][0], y[i:i + 1])
            grads = torch.autograd.grad(loss, list(single.values()))
            norm = torch.sqrt(sum((g * g).sum() for g in grads))
            scale = weights[b, i] * torch.clamp(0.3 / (norm + 1e-6), max=1.0)
            for k, g in zip(single, grads):
                total[k] += scale * g[0]
        for k in params:
            torch.testing.assert_close(ours[k][b], total[k], rtol=1e-10, atol=1e-12)


def test_at_full_rate_and_no_noise_a_head_depends_on_its_set_only():
    """q = 1 and σ = 0 leave no randomness: heads with the same set, in any order, are equal."""
    head_spec = HeadSpec(architecture="mlp", hidden=4)
    x, y, c = _data(n=10)
    spec = DPSGDSpec(clip_norm=1.0, batch_size=10, epochs=3, lr=0.1, momentum=0.9)  # q = 1: every record, every step
    assert sampling_plan(10, spec) == (1.0, 3)
    sets = torch.stack([torch.arange(10), torch.arange(10), torch.arange(10).flip(0)])
    heads = flatten(train_dpsgd_heads(x, y, sets, c, head_spec, spec, torch.zeros(3), seed=0))
    torch.testing.assert_close(heads[0], heads[1])
    torch.testing.assert_close(heads[0], heads[2], rtol=1e-10, atol=1e-12)  # a set's order does not matter at q = 1


def test_noise_has_the_calibrated_scale():
    """The update of a coordinate is Σ_steps lr·(clipped gradient sum + N(0, σ²C²)) / expected
    batch; with σ = 3 the noise dominates (the clipped sum spreads a norm of at most C per example
    over ~100 coordinates), so across 400 heads its spread is √steps·lr·σC / batch within 10 %."""
    head_spec = HeadSpec(architecture="linear")
    x, y, c = _data(n=20)
    spec = DPSGDSpec(clip_norm=2.0, batch_size=10, epochs=1, lr=1.0, momentum=0.0)
    q, steps = sampling_plan(20, spec)
    sigma = 3.0
    start = flatten(init_heads(head_spec, x.shape[1], c, 1))[0]
    sets = torch.arange(20).expand(400, -1)
    heads = flatten(train_dpsgd_heads(x, y, sets, c, head_spec, spec, torch.full((400,), sigma), seed=1))
    noise_sd = (heads - start).std().item()
    expected = (steps ** 0.5) * sigma * spec.clip_norm / int(20 * q)  # steps of independent noise, signal ≤ C/batch
    assert abs(noise_sd - expected) / expected < 0.1


def test_bad_noise_multipliers_are_refused():
    head_spec = HeadSpec(architecture="linear")
    x, y, c = _data(n=6)
    with pytest.raises(ValueError, match="noise multipliers"):
        train_dpsgd_heads(x, y, torch.arange(6)[None], c, head_spec, DPSGDSpec(), torch.tensor([-1.0]), seed=0)


def test_the_attacks_train_each_eps_with_that_releases_own_settings():
    """attacks.adaptive.dpsgd_releases: ε e's shadow heads train with specs[e] (the release's tuned
    settings), grouped by equal settings; one ε alone is train_dpsgd_heads with its spec."""
    from privssl.attacks.adaptive import dpsgd_releases

    x, y, c = _data(n=30)
    head_spec = HeadSpec(architecture="linear")
    sets = torch.stack([torch.randperm(30, generator=torch.Generator().manual_seed(s))[:20] for s in range(3)])
    still = DPSGDSpec(clip_norm=1.0, batch_size=5, epochs=1, lr=1e-12, momentum=0.0)  # barely moves
    moves = DPSGDSpec(clip_norm=1.0, batch_size=5, epochs=3, lr=0.5, momentum=0.5)
    sigma = torch.tensor([0.0, 0.0, 0.0], dtype=DTYPE)
    released = dpsgd_releases(x, y, sets, c, head_spec, [still, moves, still], sigma, seed=4)
    start = flatten(init_heads(head_spec, x.shape[1], c, 3))
    assert released.shape == (3, 3, start.shape[1])
    assert torch.allclose(released[0], start, atol=1e-9) and torch.allclose(released[2], start, atol=1e-9)
    assert (released[1] - start).abs().max() > 1e-2
    alone = dpsgd_releases(x, y, sets, c, head_spec, [moves], sigma[:1], seed=4)[0]
    assert torch.equal(alone, flatten(train_dpsgd_heads(x, y, sets, c, head_spec, moves, sigma, seed=4)))
    with pytest.raises(ValueError, match="one DP-SGD spec per noise multiplier"):
        dpsgd_releases(x, y, sets, c, head_spec, [moves], sigma, seed=4)


def test_every_record_joins_a_step_at_the_accounted_rate():
    """The records' own Poisson rate, read from the heads (the white-box audit sees only the
    canary's coordinate): record i's feature is e_i, so with σ = 0, no clipping and a step too
    small to move the gradient, weight row i moves by −lr·(times i was sampled)·g_i / B. Across
    200 heads × 20 records the times sampled over T steps average q·T."""
    n, c, heads = 20, 2, 200
    x, y = torch.eye(n, dtype=DTYPE), torch.zeros(n, dtype=torch.long)
    head_spec = HeadSpec(architecture="linear", init_seed=5)
    spec = DPSGDSpec(clip_norm=1e6, batch_size=5, epochs=4, lr=1e-6, momentum=0.0)
    q, steps = sampling_plan(n, spec)
    initial = init_heads(head_spec, n, c, 1)
    start = initial["weight"][0]
    trained = train_dpsgd_heads(x, y, torch.arange(n).expand(heads, -1), c, head_spec, spec, torch.zeros(heads),
                                seed=2)["weight"]
    g = torch.softmax(start + initial["bias"][0], -1)[:, 0] - 1  # ∂CE/∂logit_0 of record i (label 0) at the start
    times = (trained[:, :, 0] - start[:, 0]) * int(n * q) / (-spec.lr * g)
    assert torch.allclose(times, times.round(), atol=1e-3)  # whole numbers of steps: the reading is exact
    rate = times.round().mean().item() / steps
    assert abs(rate - q) < 0.01, (rate, q)  # binomial sd of the mean: sqrt(q(1-q) / (200·20·T)) ≈ 0.002
