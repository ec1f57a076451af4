"""DPAdapter's two-batch SAM step, its trainer and robust accuracy, checked against independent computations."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn
from torch.func import functional_call

from privssl.training import sam
from privssl.training.sam import SAMSpec, robust_accuracy, sam_step, train_sam

LOSS = nn.CrossEntropyLoss()


def make_model(seed: int = 0, batchnorm: bool = False, classes: int = 3) -> nn.Module:
    torch.manual_seed(seed)
    layers = [nn.Linear(5, 8)] + ([nn.BatchNorm1d(8)] if batchnorm else []) + [nn.Tanh(), nn.Linear(8, classes)]
    return nn.Sequential(*layers).double()


def make_data(n: int = 64, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 5, generator=g, dtype=torch.float64), torch.randint(0, 3, (n,), generator=g)


def blobs(n_per_class: int = 50, classes: int = 4, seed: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Well separated Gaussian blobs: a linear model separates them."""
    g = torch.Generator().manual_seed(seed)
    centres = 4 * torch.eye(classes, 5, dtype=torch.float64)
    y = torch.arange(classes).repeat_interleave(n_per_class)
    return centres[y] + 0.5 * torch.randn(len(y), 5, generator=g, dtype=torch.float64), y


def sgd(model: nn.Module, lr: float = 0.1, momentum: float = 0.0, weight_decay: float = 0.0) -> torch.optim.SGD:
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)


def batch(x, y, lo, hi):
    return x[lo:hi], y[lo:hi]


def test_rho_zero_equals_plain_sgd_including_batchnorm_statistics():
    x, y = make_data()
    model = make_model(batchnorm=True)
    plain = copy.deepcopy(model)
    opt, plain_opt = sgd(model, momentum=0.9, weight_decay=5e-4), sgd(plain, momentum=0.9, weight_decay=5e-4)
    for step in range(5):
        update = batch(x, y, 8 * step, 8 * step + 8)
        sam_step(model, LOSS, batch(x, y, 40, 64), update, 0.0, opt)
        plain_opt.zero_grad()
        LOSS(plain(update[0]), update[1]).backward()
        plain_opt.step()
    for a, b in zip(model.state_dict().values(), plain.state_dict().values()):
        assert torch.equal(a, b)


def test_ascent_step_increases_the_perturb_batch_loss():
    x, y = make_data()
    out = sam_step(make_model(), LOSS, batch(x, y, 0, 48), batch(x, y, 48, 64), 0.05, sgd(make_model()))
    assert out["perturbed_loss"] > out["perturb_loss"]


def test_perturbation_has_norm_rho_along_the_perturb_batch_gradient():
    x, y = make_data()
    model, rho = make_model(), 0.3
    w = [p.detach().clone() for p in model.parameters()]
    seen = []

    def recording_loss(out, target):  # the parameters at each loss evaluation: w, then w + e twice
        seen.append([p.detach().clone() for p in model.parameters()])
        return LOSS(out, target)

    perturb, update = batch(x, y, 0, 48), batch(x, y, 48, 64)
    out = sam_step(model, recording_loss, perturb, update, rho, sgd(model))
    assert len(seen) == 3 and all(torch.equal(a, b) for a, b in zip(seen[0], w))
    e = [a - b for a, b in zip(seen[1], w)]
    assert math.isclose(math.sqrt(sum(float((d ** 2).sum()) for d in e)), rho, rel_tol=1e-12)
    assert all(torch.equal(a, b) for a, b in zip(seen[1], seen[2]))  # B_u is evaluated at the same w + e
    # independently: e = rho g / ||g|| with g the B_p gradient at w, and the loss there
    ref = make_model()
    g = torch.autograd.grad(LOSS(ref(perturb[0]), perturb[1]), list(ref.parameters()))
    norm = torch.sqrt(sum((gi ** 2).sum() for gi in g))
    for d, gi in zip(e, g):
        torch.testing.assert_close(d, rho * gi / norm, rtol=0, atol=1e-12)
    names = [name for name, _ in ref.named_parameters()]
    at_w_e = functional_call(ref, {n: p + rho * gi / norm for n, p, gi in zip(names, ref.parameters(), g)},
                             (perturb[0],))
    assert math.isclose(out["perturbed_loss"], LOSS(at_w_e, perturb[1]).item(), rel_tol=1e-12)


def test_step_equals_hand_computation():
    x, y = make_data()
    model, rho, lr = make_model(), 0.2, 0.1
    perturb, update = batch(x, y, 0, 48), batch(x, y, 48, 64)
    sam_step(model, LOSS, perturb, update, rho, sgd(model, lr=lr))

    ref = make_model()
    names, w = zip(*[(n, p.detach()) for n, p in ref.named_parameters()])
    w_req = [p.clone().requires_grad_() for p in w]
    g_p = torch.autograd.grad(LOSS(functional_call(ref, dict(zip(names, w_req)), (perturb[0],)), perturb[1]), w_req)
    norm = torch.sqrt(sum((g ** 2).sum() for g in g_p))
    w_e = [(p + rho * g / norm).requires_grad_() for p, g in zip(w, g_p)]
    g_u = torch.autograd.grad(LOSS(functional_call(ref, dict(zip(names, w_e)), (update[0],)), update[1]), w_e)
    for p, p0, g in zip(model.parameters(), w, g_u):
        torch.testing.assert_close(p.detach(), p0 - lr * g, rtol=0, atol=1e-12)


def test_at_rho_zero_the_perturb_batch_is_never_evaluated():
    x, y = make_data()
    model = make_model()
    batches = []

    def recording_loss(out, target):
        batches.append(len(target))
        return LOSS(out, target)

    out = sam_step(model, recording_loss, batch(x, y, 0, 48), batch(x, y, 48, 64), 0.0, sgd(model))
    assert batches == [16]  # B_u only
    assert math.isnan(out["perturb_loss"]) and math.isnan(out["perturbed_loss"])


def test_a_step_without_measuring_takes_the_same_step_and_skips_only_the_loss_at_w_plus_e():
    x, y = make_data()
    perturb, update = batch(x, y, 0, 48), batch(x, y, 48, 64)
    measured, skipped = make_model(), make_model()
    evaluations = []

    def recording_loss(out, target):
        evaluations.append(len(target))
        return LOSS(out, target)

    full = sam_step(measured, LOSS, perturb, update, 0.2, sgd(measured))
    out = sam_step(skipped, recording_loss, perturb, update, 0.2, sgd(skipped), measure=False)
    assert evaluations == [48, 16]  # B_p at w (its gradient), B_u at w + e: no B_p at w + e
    assert math.isnan(out["perturbed_loss"]) and out["perturb_loss"] == full["perturb_loss"]
    assert out["update_loss"] == full["update_loss"]
    assert all(torch.equal(a, b) for a, b in zip(measured.parameters(), skipped.parameters()))


def test_train_sam_measures_the_perturbed_loss_every_tenth_step_of_each_epoch(monkeypatch):
    x, y = make_data(n=40)
    flags, losses = [], iter(range(1000))

    def spy(model, loss_fn, perturb, update, rho, optimizer, measure):
        flags.append(measure)
        return {"perturb_loss": 0.0, "perturbed_loss": float(next(losses)) if measure else math.nan,
                "update_loss": 1.0}

    monkeypatch.setattr(sam, "sam_step", spy)
    spec = SAMSpec(rho=0.1, perturb_batch=8, update_batch=2, epochs=2, warmup_epochs=0)
    history = train_sam(make_model(), LOSS, x, y, spec, torch.Generator().manual_seed(0))
    every = sam.PERTURBED_LOSS_EVERY
    assert flags == [step % every == 0 for step in range(20)] * 2  # 20 steps an epoch, counted from each epoch's first
    k = math.ceil(20 / every)  # measured steps an epoch: the losses 0 .. k - 1, then k .. 2k - 1
    assert [row["perturbed_loss"] for row in history] == [sum(range(k)) / k, sum(range(k, 2 * k)) / k]


def test_perturbation_is_reverted_exactly():
    x, y = make_data()
    model = make_model(batchnorm=True)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt = sgd(model, lr=0.0, momentum=0.9, weight_decay=5e-4)
    for _ in range(3):
        sam_step(model, LOSS, batch(x, y, 0, 48), batch(x, y, 48, 64), 1.0, opt)
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), before[name])


@pytest.mark.parametrize("two_batch", [True, False])
def test_train_sam_draws_perturb_batch_separately_or_uses_the_update_batch(monkeypatch, two_batch):
    x = torch.arange(40, dtype=torch.float64).unsqueeze(1).repeat(1, 5)  # row i is identified by x[i, 0] = i
    y = torch.arange(40) % 3
    calls = []

    def spy(model, loss_fn, perturb, update, rho, optimizer, measure):
        calls.append((perturb[0][:, 0].long(), update[0][:, 0].long()))
        return {"perturb_loss": 1.0, "perturbed_loss": 1.0, "update_loss": 1.0}

    monkeypatch.setattr(sam, "sam_step", spy)
    spec = SAMSpec(perturb_batch=24, update_batch=16, two_batch=two_batch, epochs=2, warmup_epochs=1)
    train_sam(make_model(), LOSS, x, y, spec, torch.Generator().manual_seed(0))
    assert len(calls) == spec.epochs * math.ceil(40 / 16)  # the warm-up takes no SAM steps
    for epoch in range(spec.epochs):  # each SAM epoch's update batches are a permutation of the records
        rows = torch.cat([u for _, u in calls[3 * epoch:3 * epoch + 3]])
        assert sorted(rows.tolist()) == list(range(40))
    for perturb, update in calls:
        if two_batch:
            assert len(perturb) == 24 and len(set(perturb.tolist())) == 24  # drawn without replacement
        else:
            assert torch.equal(perturb, update)
    if two_batch:
        assert len({tuple(sorted(p.tolist())) for p, _ in calls}) == len(calls)  # an independent draw per step


def test_vanilla_sam_step_is_sam_step_on_the_update_batch():
    x, y = make_data(n=40)
    spec = SAMSpec(rho=0.1, update_batch=16, two_batch=False, epochs=2, warmup_epochs=1, lr=0.1)
    trained = make_model()
    train_sam(trained, LOSS, x, y, spec, torch.Generator().manual_seed(3))
    # replay: the same permutations, plain SGD in the warm-up, then sam_step with B_p = B_u
    ref, g = make_model(), torch.Generator().manual_seed(3)
    opt = sgd(ref, lr=0.1, momentum=0.9, weight_decay=5e-4)
    for epoch in range(3):
        order = torch.randperm(40, generator=g)
        for start in range(0, 40, 16):
            b = (x[order[start:start + 16]], y[order[start:start + 16]])
            if epoch == 0:
                opt.zero_grad()
                LOSS(ref(b[0]), b[1]).backward()
                opt.step()
            else:
                torch.randperm(40, generator=g)  # B_p is drawn in both modes, unused by vanilla SAM
                sam_step(ref, LOSS, b, b, 0.1, opt)
    for a, b in zip(trained.parameters(), ref.parameters()):
        assert torch.equal(a, b)


def test_train_sam_decreases_loss_with_warmup_then_sam_phases_and_is_reproducible():
    x, y = blobs()
    spec = SAMSpec(rho=0.05, perturb_batch=100, update_batch=20, epochs=4, warmup_epochs=2, lr=0.05)
    runs = []
    for _ in range(2):
        model = make_model(classes=4)
        history = train_sam(model, LOSS, x, y, spec, torch.Generator().manual_seed(7))
        runs.append((model, history))
    (model, history), (twin, twin_history) = runs
    assert [row["phase"] for row in history] == ["warmup"] * 2 + ["sam"] * 4
    assert [row["epoch"] for row in history] == list(range(1, 7))
    assert all(math.isnan(row["perturbed_loss"]) for row in history[:2])
    assert all(math.isfinite(row["perturbed_loss"]) for row in history[2:])
    assert history[-1]["loss"] < 0.5 * history[0]["loss"]
    assert not model.training
    assert history == twin_history
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), twin.parameters()))


def trained_classifier():
    x, y = blobs()
    model = make_model(classes=4)
    train_sam(model, LOSS, x, y, SAMSpec(rho=0.05, perturb_batch=100, update_batch=20, epochs=5, warmup_epochs=2),
              torch.Generator().manual_seed(0))
    return model, x, y


def test_robust_accuracy_without_noise_is_plain_accuracy_and_restores_parameters():
    model, x, y = trained_classifier()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    plain = (model(x).argmax(dim=1) == y).double().mean().item()
    mean, per_draw = robust_accuracy(model, x, y, 0.0, 3, torch.Generator().manual_seed(0))
    assert plain > 0.9 and mean == plain and per_draw == [plain] * 3
    robust_accuracy(model, x, y, 1.0, 5, torch.Generator().manual_seed(0))
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])


def test_robust_accuracy_under_huge_noise_is_chance_and_same_seed_gives_same_result():
    model, x, y = trained_classifier()
    assert robust_accuracy(model, x, y, 0.0, 1, torch.Generator())[0] > 0.9
    mean, per_draw = robust_accuracy(model, x, y, 1e3, 400, torch.Generator().manual_seed(5))
    # the noise swamps the weights, so the classes are exchangeable: chance is 1/4 on four balanced
    # classes; the draws are correlated (spread of the mean about 0.012 here), hence the margin
    assert len(per_draw) == 400 and abs(mean - 1 / 4) < 0.06
    seeded = robust_accuracy(model, x, y, 1.0, 10, torch.Generator().manual_seed(5))
    assert robust_accuracy(model, x, y, 1.0, 10, torch.Generator().manual_seed(5)) == seeded
    assert robust_accuracy(model, x, y, 1.0, 10, torch.Generator().manual_seed(6))[1] != seeded[1]


@pytest.mark.parametrize("field, value, allowed", [
    ("rho", -1.0, "a finite number >= 0"),
    ("rho", math.nan, "a finite number >= 0"),
    ("perturb_batch", 0, "an integer >= 1"),
    ("update_batch", 0, "an integer >= 1"),
    ("update_batch", 1.5, "an integer >= 1"),
    ("epochs", 0, "an integer >= 1"),
    ("warmup_epochs", -1, "an integer >= 0"),
    ("two_batch", "yes", "true or false"),
    ("lr", 0.0, "a finite number > 0"),
    ("momentum", 1.0, "a number in [0, 1)"),
    ("weight_decay", -1e-4, "a finite number >= 0"),
])
def test_spec_refuses_bad_values_naming_field_and_allowed(field, value, allowed):
    with pytest.raises(ValueError) as err:
        SAMSpec(**{field: value})
    assert str(err.value) == f"sam.{field} = {value!r} is not allowed; allowed: {allowed}"
    with pytest.raises(ValueError, match=rf"^pretrain\.sam\.{field} = "):
        SAMSpec.from_config({field: value}, prefix="pretrain.sam")


def test_from_config_reads_fields_and_refuses_unknown_keys():
    assert SAMSpec.from_config({"rho": 1.0, "two_batch": False}) == SAMSpec(rho=1.0, two_batch=False)
    with pytest.raises(ValueError, match=r"unknown sam fields \['radius'\]; allowed: \['rho', 'perturb_batch'"):
        SAMSpec.from_config({"radius": 1.0})
    with pytest.raises(ValueError, match="prefix"):  # the prefix names the key; it is no hyper-parameter
        SAMSpec.from_config({"prefix": "x"})


def test_check_data_size_refuses_batches_larger_than_the_data():
    SAMSpec(perturb_batch=100, update_batch=20).check_data_size(100)
    with pytest.raises(ValueError, match=r"^pre\.perturb_batch = 256 is not allowed; allowed: an integer <= 100"):
        SAMSpec().check_data_size(100, prefix="pre")
    with pytest.raises(ValueError, match=r"^sam\.update_batch = 64 is not allowed; allowed: an integer <= 50"):
        SAMSpec(perturb_batch=10).check_data_size(50)
    SAMSpec(two_batch=False).check_data_size(100)  # vanilla SAM never draws perturb_batch records
