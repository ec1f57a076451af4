"""Batched head training A_S: B masked heads at once equal B separate trainings."""

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from privssl.training import heads
from privssl.training.heads import (
    DTYPE,
    HeadSpec,
    flatten,
    init_heads,
    parameter_shapes,
    train_head,
    train_heads,
    train_heads_on_sets,
    unflatten,
)

N, IN_DIM, N_CLASSES = 40, 6, 3
SPECS = [HeadSpec(architecture=a, optimizer=o, hidden=8, epochs=15, lr=0.05, momentum=0.5, weight_decay=1e-3)
         for a in ("linear", "mlp") for o in ("adam", "sgd")]




def make_data(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, IN_DIM, generator=g, dtype=DTYPE), torch.randint(0, N_CLASSES, (N,), generator=g)


def make_masks():
    masks = torch.ones(5, N, dtype=DTYPE)
    for row, k in enumerate([0, 17, N - 1]):
        masks[row, k] = 0.0  # leave one out
    masks[3] = (torch.rand(N, generator=torch.Generator().manual_seed(1)) < 0.6).to(DTYPE)  # a random subset
    return masks  # row 4: the whole data set


def assert_heads_close(a, b, atol=1e-10):
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=atol)


def one_head(params, b):
    return {k: v[b:b + 1] for k, v in params.items()}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.architecture}-{s.optimizer}")
def test_batched_masks_equal_separate_full_batch_trainings(spec):
    features, labels = make_data()
    masks = make_masks()
    batched = train_heads(spec, features, labels, masks, N_CLASSES)
    for b, mask in enumerate(masks):
        alone = train_heads(spec, features, labels, mask[None], N_CLASSES)
        keep = mask.bool()
        deleted = train_head(spec, features[keep], labels[keep], N_CLASSES)
        assert_heads_close(one_head(batched, b), alone)
        assert_heads_close(one_head(batched, b), deleted)
    # the masks matter: leaving out different records gives different heads
    assert (flatten(batched)[0] - flatten(batched)[1]).abs().max() > 1e-6


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.architecture}-{s.optimizer}")
def test_batched_masks_equal_separate_minibatch_trainings(spec):
    spec = replace(spec, batch_size=7)
    features, labels = make_data()
    masks = make_masks()
    batched = train_heads(spec, features, labels, masks, N_CLASSES)
    for b, mask in enumerate(masks):
        assert_heads_close(one_head(batched, b), train_heads(spec, features, labels, mask[None], N_CLASSES))


def test_training_is_deterministic():
    features, labels = make_data()
    spec = HeadSpec(hidden=8, epochs=10, batch_size=9, lr=0.05)
    a = train_heads(spec, features, labels, make_masks(), N_CLASSES)
    b = train_heads(spec, features, labels, make_masks(), N_CLASSES)
    assert all(torch.equal(a[k], b[k]) for k in a)


def reference_training(spec, features, labels):
    """Plain PyTorch: nn.Linear layers from the same initialisation, mean cross-entropy, full batch."""
    init = {k: v[0] for k, v in init_heads(spec, IN_DIM, N_CLASSES, 1).items()}
    layers = [torch.nn.Linear(IN_DIM, spec.hidden, dtype=DTYPE), torch.nn.Linear(spec.hidden, N_CLASSES, dtype=DTYPE)]
    with torch.no_grad():
        for i, layer in enumerate(layers, 1):
            layer.weight.copy_(init[f"weight{i}"].T)
            layer.bias.copy_(init[f"bias{i}"])
    model = torch.nn.Sequential(layers[0], torch.nn.ReLU(), layers[1])
    optimiser = torch.optim.Adam(model.parameters(), lr=spec.lr)
    for _ in range(spec.epochs):
        loss = F.cross_entropy(model(features), labels)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return {"weight1": layers[0].weight.T, "bias1": layers[0].bias,
            "weight2": layers[1].weight.T, "bias2": layers[1].bias}


def test_released_head_is_all_ones_mask_and_plain_training():
    features, labels = make_data()
    spec = HeadSpec(hidden=8, epochs=20, lr=0.05)
    released = train_head(spec, features, labels, N_CLASSES)
    masked = train_heads(spec, features, labels, torch.ones(1, N), N_CLASSES)
    assert all(torch.equal(released[k], masked[k]) for k in released)
    reference = reference_training(spec, features, labels)
    assert_heads_close({k: v[0] for k, v in released.items()}, {k: v.detach() for k, v in reference.items()})


def test_flatten_unflatten_round_trip():
    spec = HeadSpec(hidden=5)
    shapes = parameter_shapes(spec, IN_DIM, N_CLASSES)
    params = {k: torch.randn(3, *s, dtype=DTYPE) for k, s in shapes.items()}
    flat = flatten(params)
    assert flat.shape == (3, IN_DIM * 5 + 5 + 5 * N_CLASSES + N_CLASSES)
    back = unflatten(flat, shapes)
    assert all(torch.equal(back[k], params[k]) for k in params)
    assert torch.equal(flat[1], torch.cat([params[k][1].flatten() for k in shapes]))


@pytest.mark.parametrize("size_change", [-1, 1])
def test_unflatten_rejects_wrong_size(size_change):
    shapes = parameter_shapes(HeadSpec(hidden=5), IN_DIM, N_CLASSES)
    size = sum(math.prod(s) for s in shapes.values())
    with pytest.raises(ValueError, match=f"have {size + size_change} parameters, the shapes need {size}"):
        unflatten(torch.zeros(2, size + size_change, dtype=DTYPE), shapes)


@pytest.mark.parametrize("architecture", ["linear", "mlp"])
def test_init_within_default_linear_bound(architecture):
    in_dim, hidden = 50, 30
    params = init_heads(HeadSpec(architecture=architecture, hidden=hidden), in_dim, N_CLASSES, n_heads=4)
    fan_in = {"weight": in_dim, "bias": in_dim, "weight1": in_dim, "bias1": in_dim, "weight2": hidden, "bias2": hidden}
    for name, value in params.items():
        bound = 1 / math.sqrt(fan_in[name])
        assert value.abs().max() <= bound
        assert torch.equal(value[0], value[3])  # every head starts from the same point
    for name in ("weight", "weight1", "weight2"):
        if name in params:  # uniform on ±bound: the extremes come close to the bound
            assert params[name].abs().max() > 0.9 / math.sqrt(fan_in[name])


def test_headspec_rejects_unknown_choices():
    with pytest.raises(ValueError, match="'cnn'"):
        HeadSpec(architecture="cnn")
    with pytest.raises(ValueError, match="'rmsprop'"):
        HeadSpec(optimizer="rmsprop")
    with pytest.raises(ValueError, match=r"head precision 'float16' unknown; allowed: \('float64', 'float32'\)"):
        HeadSpec(precision="float16")


@pytest.mark.parametrize("spec", SPECS[:2], ids=lambda s: f"{s.architecture}-{s.optimizer}")
def test_a_float32_head_is_trained_in_float32_from_the_float64_start(spec):
    """precision float32: every computation in float32 (the batched heads equal separate float32
    trainings to float32's rounding), from the float64 initialisation rounded, ending near the
    float64 head on this well-conditioned problem, and not equal to it."""
    features, labels = make_data()
    single = replace(spec, precision="float32")
    start = init_heads(single, IN_DIM, N_CLASSES, 2)
    for name, value in init_heads(spec, IN_DIM, N_CLASSES, 2).items():
        assert start[name].dtype == torch.float32
        assert torch.equal(start[name], value.to(torch.float32))
    sets = torch.randint(0, N, (3, 17), generator=torch.Generator().manual_seed(5))
    batched = train_heads_on_sets(single, features, labels, sets, N_CLASSES)
    for b, rows in enumerate(sets):
        alone = train_head(single, features[rows], labels[rows], N_CLASSES)
        assert all(v.dtype == torch.float32 for v in alone.values())
        assert_heads_close(one_head(batched, b), alone, atol=1e-5)
    ours = flatten(train_head(single, features, labels, N_CLASSES)).double()
    reference = flatten(train_head(spec, features, labels, N_CLASSES))
    gap = float((ours - reference).norm() / reference.norm())
    assert 1e-9 < gap < 1e-4


@pytest.mark.parametrize("batch_size", [None, 7])
@pytest.mark.parametrize("spec", [SPECS[0], SPECS[2]], ids=lambda s: f"{s.architecture}-{s.optimizer}")
def test_heads_on_sets_equal_separate_trainings_on_each_set(spec, batch_size):
    spec = replace(spec, batch_size=batch_size)
    features, labels = make_data()
    g = torch.Generator().manual_seed(5)
    sets = torch.randint(0, N, (4, 17), generator=g)  # repeats allowed: i.i.d. draws from the rows
    batched = train_heads_on_sets(spec, features, labels, sets, N_CLASSES)
    for b, rows in enumerate(sets):
        alone = train_head(spec, features[rows], labels[rows], N_CLASSES)
        assert_heads_close(one_head(batched, b), alone)
    assert (flatten(batched)[0] - flatten(batched)[1]).abs().max() > 1e-6


@pytest.mark.parametrize("field, value", [("epochs", 0), ("epochs", 2.5), ("hidden", True), ("lr", float("nan")),
                                          ("lr", 0.0), ("momentum", 1.0), ("weight_decay", -1e-3),
                                          ("batch_size", 0), ("init_seed", -1)])
def test_a_head_spec_from_a_file_is_refused_naming_its_bad_field(field, value):
    with pytest.raises(ValueError, match=rf"head\.{field} = .* is not allowed; allowed: "):
        HeadSpec(**{field: value})


@pytest.mark.parametrize("ratio", [0, 100], ids=["gathered-rows", "pool-logits"])
@pytest.mark.parametrize("batch_size", [None, 7])
@pytest.mark.parametrize("spec", SPECS[:2], ids=lambda s: f"{s.architecture}-{s.optimizer}")
def test_both_ways_to_a_batchs_logits_train_the_heads_each_set_alone_gives(spec, batch_size, ratio, monkeypatch):
    """A linear head's logits from the pool's (one GEMM, then each head's rows picked) or from its
    gathered rows: the same A_S either way, equal to separate trainings up to rounding. (An MLP
    always gathers its rows: test_heads_on_sets_equal_separate_trainings_on_each_set, mlp-adam.)"""
    monkeypatch.setattr(heads, "POOL_LOGITS_RATIO", ratio)
    spec = replace(spec, batch_size=batch_size)
    assert heads.logits_from_pool(spec, N, 17 if batch_size is None else batch_size) == (ratio == 100)
    features, labels = make_data()
    sets = torch.randint(0, N, (4, 17), generator=torch.Generator().manual_seed(6))
    batched = train_heads_on_sets(spec, features, labels, sets, N_CLASSES)
    for b, rows in enumerate(sets):
        assert_heads_close(one_head(batched, b), train_head(spec, features[rows], labels[rows], N_CLASSES))


def test_a_linear_head_takes_its_logits_from_the_pool_only_up_to_the_ratio():
    linear, mlp = HeadSpec(architecture="linear"), HeadSpec(architecture="mlp")
    assert heads.logits_from_pool(linear, 4 * 150, 150) and not heads.logits_from_pool(linear, 4 * 150 + 1, 150)
    assert not heads.logits_from_pool(mlp, 10, 150)


def test_the_class_product_and_its_gradients_are_the_plain_batched_products():
    """`class_product` computes x @ w and both gradients through transposed GEMMs (speed only):
    each must be the plain product's, against torch.bmm's autograd and finite differences."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(3, 5, 4, generator=g, dtype=DTYPE, requires_grad=True)
    w = torch.randn(3, 4, 2, generator=g, dtype=DTYPE, requires_grad=True)
    upstream = torch.randn(3, 5, 2, generator=g, dtype=DTYPE)
    ours = heads.class_product(x, w)
    plain = torch.bmm(x, w)
    torch.testing.assert_close(ours, plain, rtol=0, atol=1e-12)
    ours_grads = torch.autograd.grad((ours * upstream).sum(), (x, w))
    plain_grads = torch.autograd.grad((plain * upstream).sum(), (x, w))
    for a, b in zip(ours_grads, plain_grads):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    assert torch.autograd.gradcheck(heads.class_product, (x, w))
    # features without a gradient (a linear head's rows): only the weights' is computed
    assert torch.autograd.grad(heads.class_product(x.detach(), w).sum(), w)[0].shape == w.shape
