"""Thesis Ch. 3 targets (privssl.training.semi_supervised, .augment, .wide_resnet): the weak and
strong augmentations, the cosine schedule, FixMatch's, FlexMatch's and UDA's unlabelled losses and
FlexMatch's class thresholds by hand, the index cycle, the EMA, training with checkpoints and
resumption, and FixMatch by DP-SGD against plain SGD on the same objective."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import stats
from torch import nn

from privssl.io import InputError
from privssl.training.augment import AugmentSpec, standard_layout, strong, strong_keyed, weak, weak_keyed
from privssl.training.per_example import per_example_loss_grads
from privssl.training.semi_supervised import (
    TrainingSet,
    TrainSpec,
    _Cycle,
    _forward_views,
    cosine_lr,
    flexmatch_thresholds,
    needs_joint_forward,
    posteriors,
    train,
    unlabelled_losses,
    update_ema,
)
from privssl.training.semi_supervised_private import PrivateSpec, sampling_rate, train_private
from privssl.training.wide_resnet import SmallCNN, build_network

CPU = torch.device("cpu")
THRESHOLDS = {"fixmatch": 0.95, "flexmatch": 0.95, "uda": 0.8}


def quiet(_message: str) -> None:
    pass


# ------------------------------------------------------------------------------ augmentation


def reflect_crops(image: np.ndarray, p: int) -> dict[tuple[int, int], np.ndarray]:
    """Every crop of the image's size from the image reflect-padded by p (numpy's own padding)."""
    _, height, width = image.shape
    padded = np.pad(image, ((0, 0), (p, p), (p, p)), mode="reflect")
    return {(dy, dx): padded[:, dy:dy + height, dx:dx + width] for dy in range(2 * p + 1) for dx in range(2 * p + 1)}


def crop_matches(images: torch.Tensor, out: torch.Tensor, p: int) -> list[tuple[list, list]]:
    """Per image: the offsets whose crop equals the output, and those whose mirrored crop does."""
    found = []
    for image, view in zip(images.numpy(), out.numpy()):
        crops = reflect_crops(image, p)
        found.append(([o for o, c in crops.items() if np.array_equal(c, view)],
                      [o for o, c in crops.items() if np.array_equal(c[..., ::-1], view)]))
    return found


def test_weak_is_a_crop_of_the_reflect_padded_image_at_an_offset_in_0_to_2p():
    p = 2
    images = torch.rand(60, 2, 6, 5, generator=torch.Generator().manual_seed(0))  # not square: rows ≠ columns
    out = weak(images, AugmentSpec(p, False, 0, 0), torch.Generator().manual_seed(1))
    assert out.shape == images.shape
    found = crop_matches(images, out, p)
    assert all(plain for plain, _ in found)  # never only a mirrored crop: flips are off
    offsets = {o for plain, _ in found for o in plain}
    assert {dy for dy, _ in offsets} == set(range(2 * p + 1))  # both ends of [0, 2p] are drawn
    assert {dx for _, dx in offsets} == set(range(2 * p + 1))


def test_weak_without_padding_or_flips_is_the_identity():
    images = torch.rand(5, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(weak(images, AugmentSpec(0, False, 0, 0), torch.Generator().manual_seed(0)), images)


def test_weak_with_flips_mirrors_some_crops_and_not_others():
    p = 1
    images = torch.rand(40, 1, 5, 6, generator=torch.Generator().manual_seed(2))
    out = weak(images, AugmentSpec(p, True, 0, 0), torch.Generator().manual_seed(3))
    found = crop_matches(images, out, p)
    assert all(plain or mirrored for plain, mirrored in found)
    assert any(plain and not mirrored for plain, mirrored in found)
    assert any(mirrored and not plain for plain, mirrored in found)


def test_weak_follows_its_generator_seed():
    images = torch.rand(20, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    spec = AugmentSpec(2, True, 0, 0)
    first, again, other = (weak(images, spec, torch.Generator().manual_seed(s)) for s in (5, 5, 6))
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


@pytest.mark.parametrize("images_per_draw", [1, 8])
def test_strong_views_are_per_image_uint8_images_and_follow_the_seed(images_per_draw):
    images = torch.rand(12, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    spec = AugmentSpec(1, False, 2, 10, images_per_draw)
    first, again, other = (strong(images, spec, torch.Generator().manual_seed(s)) for s in (7, 7, 8))
    assert first.shape == images.shape and first.dtype == torch.float32
    assert float(first.min()) >= 0 and float(first.max()) <= 1
    levels = first * 255
    assert torch.allclose(levels, levels.round(), atol=1e-4)  # multiples of 1/255
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


def test_strong_leaves_the_global_generator_as_it_was_and_does_not_read_it():
    images = torch.rand(6, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    spec = AugmentSpec(1, False, 2, 10)
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    first = strong(images, spec, torch.Generator().manual_seed(4))
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.manual_seed(456)  # another global state: the same views
    assert torch.equal(strong(images, spec, torch.Generator().manual_seed(4)), first)


def test_strong_without_randaugment_operations_is_the_weak_view():
    images = torch.rand(6, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    spec = AugmentSpec(1, True, 0, 10)
    assert torch.equal(strong(images, spec, torch.Generator().manual_seed(3)),
                       weak(images, spec, torch.Generator().manual_seed(3)))


@pytest.mark.parametrize("channels", [1, 3])
def test_every_view_has_the_standard_layout(channels):
    """Every view the trainings and attacks feed a network has the strides of a fresh (N, C, H, W)
    tensor: with a single channel, channels_last strides pass `.contiguous()`, the convolutions
    keep them, and the CPU's GroupNorm runs ~20x slower in them."""
    images = torch.rand(9, channels, 8, 8, generator=torch.Generator().manual_seed(0))
    spec, ids = AugmentSpec(2, True, 2, 10, 4), torch.arange(9)
    views = {"weak": weak(images, spec, torch.Generator().manual_seed(1)),
             "strong": strong(images, spec, torch.Generator().manual_seed(1)),
             "weak_keyed": weak_keyed(images, ids, spec, 5, 1),
             "strong_keyed": strong_keyed(images, ids, spec, 5, 1, 9.0)}
    for name, view in views.items():
        assert view.stride() == torch.empty(view.shape).stride(), name


def test_standard_layout_copies_only_a_batch_with_other_strides():
    fresh = torch.rand(4, 1, 5, 5)
    assert standard_layout(fresh) is fresh
    permuted = torch.rand(4, 5, 5, 1).permute(0, 3, 1, 2)
    assert permuted.is_contiguous()  # the trap: a size-1 channel's stride is not checked
    copied = standard_layout(permuted)
    assert copied.stride() == fresh.stride() and torch.equal(copied, permuted)


@pytest.mark.parametrize("field, value", [("padding", -1), ("ops", True), ("magnitude", 31), ("images_per_draw", 0)])
def test_augment_spec_refuses_bad_values_naming_them(field, value):
    fields = {"padding": 1, "horizontal_flip": False, "ops": 2, "magnitude": 10, "images_per_draw": 1} | {field: value}
    with pytest.raises(ValueError, match=f"augmentation {field} = {value!r}"):
        AugmentSpec(**fields)


# ------------------------------------------------------------------------------ losses and schedule


@pytest.mark.parametrize("step, factor", [(0, 1.0), (50, math.sqrt(0.5)), (100, 0.0)])
def test_cosine_lr_is_eta_cos_pi_k_over_2n(step, factor):
    assert math.isclose(cosine_lr(0.03, step, 100), 0.03 * factor, rel_tol=1e-12, abs_tol=1e-15)


def spec(**changes) -> TrainSpec:
    fields = dict(steps=30, checkpoint_every=10, batch_size=4, unlabelled_ratio=2, lr=0.03, momentum=0.9,
                  weight_decay=5e-4, ema=0.9, thresholds=dict(THRESHOLDS))
    return TrainSpec(**(fields | changes))


def logits_pair(seed: int = 0, n: int = 12, classes: int = 3):
    g = torch.Generator().manual_seed(seed)
    weak_logits = (4 * torch.randn(n, classes, generator=g)).requires_grad_(True)
    strong_logits = torch.randn(n, classes, generator=g).requires_grad_(True)
    return weak_logits, strong_logits


def test_fixmatch_loss_is_the_cross_entropy_to_the_confident_weak_argmax():
    weak_logits, strong_logits = logits_pair()
    probs = torch.softmax(weak_logits.detach().double(), -1)
    expected_mask = probs.max(-1).values >= 0.95
    assert expected_mask.any() and not expected_mask.all()  # the example has both kinds of rows
    pseudo = probs.argmax(-1)
    nll = -torch.log_softmax(strong_logits.detach(), -1)[torch.arange(len(pseudo)), pseudo]
    loss, mask = unlabelled_losses("fixmatch", weak_logits, strong_logits, spec())
    assert torch.equal(mask, expected_mask)
    assert torch.allclose(loss.detach(), torch.where(expected_mask, nll, 0.0), atol=1e-6)
    loss.sum().backward()
    assert weak_logits.grad is None and strong_logits.grad is not None  # the weak view's target has no gradient


def test_uda_loss_is_the_soft_cross_entropy_to_the_sharpened_weak_posteriors():
    weak_logits, strong_logits = logits_pair(1)
    temperature = 0.4
    confidence = torch.softmax(weak_logits.detach().double(), -1).max(-1).values
    expected_mask = confidence >= 0.8
    assert expected_mask.any() and not expected_mask.all()
    target = torch.exp(weak_logits.detach() / temperature)
    target = target / target.sum(-1, keepdim=True)
    soft = -(target * torch.log_softmax(strong_logits.detach(), -1)).sum(-1)
    loss, mask = unlabelled_losses("uda", weak_logits, strong_logits, spec(uda_temperature=temperature))
    assert torch.equal(mask, expected_mask)
    assert torch.allclose(loss.detach(), torch.where(expected_mask, soft, 0.0), atol=1e-6)


def test_flexmatch_uses_the_threshold_of_each_rows_pseudo_label():
    weak_logits, strong_logits = logits_pair(2, n=30)
    class_thresholds = torch.tensor([0.99, 0.4, 0.7], dtype=torch.float64)
    probs = torch.softmax(weak_logits.detach().double(), -1)
    confidence, pseudo = probs.max(-1)
    expected_mask = torch.tensor([float(c) >= float(class_thresholds[k]) for c, k in zip(confidence, pseudo)])
    # a single threshold would decide some row otherwise: the class matters
    assert any((expected_mask != (confidence >= t)).any() for t in class_thresholds)
    nll = -torch.log_softmax(strong_logits.detach(), -1)[torch.arange(len(pseudo)), pseudo]
    loss, mask = unlabelled_losses("flexmatch", weak_logits, strong_logits, spec(), class_thresholds)
    assert torch.equal(mask, expected_mask)
    assert torch.allclose(loss.detach(), torch.where(expected_mask, nll, 0.0), atol=1e-6)


def test_unlabelled_losses_refuse_an_unknown_algorithm_naming_it():
    weak_logits, strong_logits = logits_pair()
    with pytest.raises(ValueError, match="unknown algorithm 'mixmatch'"):
        unlabelled_losses("mixmatch", weak_logits, strong_logits, spec(thresholds=THRESHOLDS | {"mixmatch": 0.9}))


@pytest.mark.parametrize("selected, n_classes, beta", [
    ([0, 0, 1, -1, 2, 0, 1, -1], 4, [1, 2 / 3, 1 / 3, 0]),  # counts 3, 2, 1, 0; 2 unused: max 3
    ([0, 1, -1, -1, -1, -1], 3, [1 / 4, 1 / 4, 0]),  # warm-up: the 4 unused dominate
    ([-1] * 8, 3, [0, 0, 0]),  # nothing selected yet: every threshold 0
    ([0, 0, 0, 0, 1, 1], 3, [1, 1 / 2, 0]),  # after warm-up: the largest class count normalises
])
def test_flexmatch_thresholds_are_tau_m_of_beta(selected, n_classes, beta):
    tau = 0.95
    expected = torch.tensor([tau * b / (2 - b) for b in beta], dtype=torch.float64)
    got = flexmatch_thresholds(torch.tensor(selected), n_classes, tau)
    assert torch.allclose(got, expected, rtol=1e-12, atol=0)


# ------------------------------------------------------------------------------ cycle and EMA


def test_cycle_gives_every_index_once_per_pass():
    cycle = _Cycle(7, torch.Generator().manual_seed(0))
    stream = torch.cat([cycle.take(k) for k in (3, 5, 2, 10, 1)])  # 21 = three passes; 10 spans two
    assert len(stream) == 21
    passes = stream.reshape(3, 7)
    for indices in passes:
        assert sorted(indices.tolist()) == list(range(7))
    assert len({tuple(p.tolist()) for p in passes}) > 1  # a fresh permutation per pass


def test_cycle_state_continues_identically():
    generator = torch.Generator().manual_seed(1)
    cycle = _Cycle(7, generator)
    cycle.take(4)
    state, generator_state = cycle.state(), generator.get_state()
    expected = [cycle.take(k) for k in (5, 9, 3)]
    other = torch.Generator().manual_seed(99)
    resumed = _Cycle(7, other)
    other.set_state(generator_state)
    resumed.load(state)
    for k, want in zip((5, 9, 3), expected):
        assert torch.equal(resumed.take(k), want)


def test_update_ema_is_m_e_plus_1_minus_m_p_and_copies_buffers():
    torch.manual_seed(0)
    ema, model = (nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)) for _ in range(2))
    model[1].running_mean.normal_()
    model[1].num_batches_tracked.fill_(5)
    before = copy.deepcopy(ema)
    update_ema(ema, model, 0.75)
    for e, e0, p in zip(ema.parameters(), before.parameters(), model.parameters()):
        assert torch.equal(e, 0.75 * e0 + 0.25 * p)
    for e, b in zip(ema.buffers(), model.buffers()):
        assert torch.equal(e, b)


# ------------------------------------------------------------------------------ training


def halves(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """8×8 images: class 0 bright on the left half, class 1 on the right half, with noise."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 2
    images = 0.2 * torch.rand(n, 1, 8, 8, generator=g)
    images[labels == 0, :, :, :4] += 0.7
    images[labels == 1, :, :, 4:] += 0.7
    return images, labels


def training_set(n_labelled: int = 8, n_unlabelled: int = 32) -> TrainingSet:
    images, labels = halves(n_labelled + n_unlabelled, 0)
    return TrainingSet(images[:n_labelled], labels[:n_labelled], images[n_labelled:], 2)


def network() -> SmallCNN:
    torch.manual_seed(0)
    return SmallCNN(1, 2, 4)


AUGMENT = AugmentSpec(1, False, 2, 10, 4)
# τ = 0.6 for FixMatch: its unlabelled loss is active by step 20, so a resumed run goes through it
TRAINING = spec(lr=0.1, thresholds=THRESHOLDS | {"fixmatch": 0.6})


def run(algorithm="fixmatch", seed=0, checkpoint=None, fingerprint=None, log=quiet, data=None, train_spec=None):
    return train(algorithm, network(), data or training_set(), train_spec or TRAINING, AUGMENT, seed, CPU, checkpoint,
                 fingerprint, log)


@pytest.fixture(scope="module")
def uninterrupted():
    return run()


def assert_same_states(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for step in a:
        assert a[step].keys() == b[step].keys()
        for name in a[step]:
            assert torch.equal(a[step][name], b[step][name]), (step, name)


def test_fixmatch_keeps_the_ema_at_every_checkpoint_with_one_history_row_each(uninterrupted):
    kept, history = uninterrupted
    assert sorted(kept) == [10, 20, 30]
    assert set(kept[30]) == set(network().state_dict())
    assert [row["step"] for row in history] == [10, 20, 30]
    for row in history:  # the lr of the checkpoint's last step
        assert math.isclose(row["lr"], 0.1 * math.cos(math.pi * (row["step"] - 1) / 60))
    assert history[-1]["mask_rate"] > 0 and history[-1]["loss_unlabelled"] > 0  # the unlabelled loss took part
    assert not torch.equal(kept[10]["classifier.weight"], kept[30]["classifier.weight"])


class Interrupted(Exception):
    pass


def stop_after(step: int, steps: int = 30):
    def log(message: str) -> None:
        if f"step {step}/{steps}:" in message:
            raise Interrupted(message)
    return log


def same_rows(a: list[dict], b: list[dict]) -> bool:
    """History rows equal value for value, NaN equal to NaN (a column no training of the kind fills)."""
    return [list(r) for r in a] == [list(r) for r in b] and all(
        x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
        for r, q in zip(a, b) for x, y in zip(r.values(), q.values()))


def test_a_resumed_training_equals_the_uninterrupted_one_bitwise(uninterrupted, tmp_path):
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(Interrupted):  # the job dies after the checkpoint of step 20 is saved
        run(checkpoint=checkpoint, fingerprint={"run": "a"}, log=stop_after(20))
    assert sorted(torch.load(checkpoint, weights_only=False)["kept"]) == [10, 20]
    messages = []
    kept, history = run(checkpoint=checkpoint, fingerprint={"run": "a"}, log=messages.append)
    assert any(m.startswith(f"resumed from {checkpoint} at step 20") for m in messages)
    assert_same_states(kept, uninterrupted[0])
    assert same_rows(history, uninterrupted[1])


def test_a_checkpoint_of_another_fingerprint_is_not_resumed(uninterrupted, tmp_path):
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(Interrupted):  # another run (seed 1) leaves its checkpoint at step 20
        run(seed=1, checkpoint=checkpoint, fingerprint={"run": "a"}, log=stop_after(20))
    saved = torch.load(checkpoint, weights_only=False)
    assert not torch.equal(saved["kept"][10]["classifier.weight"], uninterrupted[0][10]["classifier.weight"])
    messages = []
    kept, history = run(checkpoint=checkpoint, fingerprint={"run": "b"}, log=messages.append)
    assert not any("resumed" in m for m in messages)
    assert f"ignoring {checkpoint}: it was written under another run; starting afresh" in messages
    assert_same_states(kept, uninterrupted[0])  # trained from scratch
    assert same_rows(history, uninterrupted[1])


def test_supervised_trains_on_the_labelled_images_alone():
    data = training_set()
    data.unlabelled = data.unlabelled[:0]
    kept, history = run("supervised", data=data)
    assert sorted(kept) == [10, 20, 30]
    assert all(math.isnan(row["loss_unlabelled"]) and math.isnan(row["mask_rate"]) for row in history)
    assert history[-1]["loss_labelled"] < history[0]["loss_labelled"]
    model = network()
    model.load_state_dict(kept[30])
    fresh, labels = halves(100, 5)
    assert torch.equal(posteriors(model, fresh, CPU).argmax(-1), labels)  # the EMA model learnt the task


def test_posteriors_are_float64_softmax_over_any_leading_shape():
    model = network()
    images = torch.rand(3, 2, 1, 8, 8, generator=torch.Generator().manual_seed(0))  # (n, K views, C, H, W)
    got = posteriors(model, images, CPU, batch_size=4)
    assert got.shape == (3, 2, 2) and got.dtype == torch.float64
    with torch.no_grad():
        expected = torch.softmax(model(images.reshape(6, 1, 8, 8)).double(), -1).reshape(3, 2, 2)
    assert torch.allclose(got, expected, rtol=1e-6)


def test_a_semi_supervised_algorithm_needs_unlabelled_images():
    data = training_set()
    data.unlabelled = data.unlabelled[:0]
    with pytest.raises(ValueError, match="uda needs unlabelled images"):
        run("uda", data=data)


def test_train_refuses_an_unknown_algorithm_naming_it():
    with pytest.raises(ValueError, match="unknown algorithm 'mixmatch'"):
        run("mixmatch")


def test_flexmatch_in_warm_up_uses_every_unlabelled_image():
    # no prediction reaches τ = 0.95 in 10 steps: every record unused, every class threshold 0
    kept, history = run("flexmatch", train_spec=spec(steps=10, checkpoint_every=5))
    assert sorted(kept) == [5, 10]
    assert [row["mask_rate"] for row in history] == [1.0, 1.0]
    assert all(row["loss_unlabelled"] > 0 for row in history)


def test_uda_at_a_threshold_of_one_over_the_classes_uses_every_unlabelled_image():
    # two classes: the top posterior is >= 0.5 always
    kept, history = run("uda", train_spec=spec(steps=10, checkpoint_every=5, thresholds=THRESHOLDS | {"uda": 0.5}))
    assert sorted(kept) == [5, 10]
    assert [row["mask_rate"] for row in history] == [1.0, 1.0]
    assert all(row["loss_unlabelled"] > 0 for row in history)


# One step on the whole sets (B = n_l, μB = n_u) without augmentation, momentum or weight decay,
# the kept EMA at momentum 0 being the model: the step is p − lr ∇L of the algorithm's objective.
PLAIN = AugmentSpec(0, False, 0, 0)


def one_step_spec(thresholds: dict) -> TrainSpec:
    return TrainSpec(steps=1, checkpoint_every=1, batch_size=8, unlabelled_ratio=4, lr=0.5, momentum=0.0,
                     weight_decay=0.0, ema=0.0, thresholds=thresholds, uda_temperature=0.4)


def mid_threshold(confidence: torch.Tensor) -> float:
    """A threshold between the two middle confidences: half the rows pass, none sits on it."""
    ordered = confidence.sort().values
    return float(ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2


def reference_objective(algorithm: str, model: nn.Module, data: TrainingSet, tau: float) -> torch.Tensor:
    logits_l, logits_u = model(data.labelled), model(data.unlabelled)
    probs = torch.softmax(logits_u.detach().double(), -1)
    confidence, pseudo = probs.max(-1)
    log_probs = torch.log_softmax(logits_u, -1)
    nll = -log_probs[torch.arange(len(pseudo)), pseudo]
    if algorithm == "fixmatch":
        per_image = torch.where(confidence >= tau, nll, 0.0)
    elif algorithm == "flexmatch":  # the first batch is masked before any is counted: every class threshold 0
        per_image = nll
    else:
        target = torch.softmax(logits_u.detach() / 0.4, -1)
        per_image = torch.where(confidence >= tau, -(target * log_probs).sum(-1), 0.0)
    return -log_probs_true(logits_l, data.labels).mean() + per_image.mean()


def log_probs_true(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits, -1)[torch.arange(len(labels)), labels]


@pytest.mark.parametrize("algorithm", ["fixmatch", "flexmatch", "uda"])
def test_one_step_is_sgd_on_the_algorithms_objective(algorithm):
    data = training_set()
    model = network()
    with torch.no_grad():
        tau = mid_threshold(torch.softmax(model(data.unlabelled).double(), -1).max(-1).values)
    loss = reference_objective(algorithm, model, data, tau)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    expected = {name: p.detach() - 0.5 * g for (name, p), g in zip(model.named_parameters(), grads)}
    kept, history = train(algorithm, network(), data, one_step_spec(THRESHOLDS | {algorithm: tau}), PLAIN, 0, CPU,
                          log=quiet)
    # half the records pass τ; FlexMatch's first batch meets thresholds of 0 (USB's order: mask, then count)
    assert history[0]["mask_rate"] == (1.0 if algorithm == "flexmatch" else 0.5)
    for name, want in expected.items():
        assert torch.allclose(kept[1][name], want, atol=1e-6), name


def three_views(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.rand(n, 3, 32, 32, generator=generator) for n in (2, 4, 4))


def test_batchnorm_sees_every_view_in_one_forward():
    """With BatchNorm (the paper presets' WRN) the weak views share the batch's statistics with the
    others, as in the reference implementations: the logits are the joint forward's, which a
    forward of the weak views alone would not give."""
    torch.manual_seed(0)
    model = build_network("wrn", 3, 10, 1).train()
    assert needs_joint_forward(model)
    x, u_weak, u_strong = three_views()
    joint = copy.deepcopy(model)(torch.cat([x, u_weak, u_strong])).float().split([2, 4, 4])
    got = _forward_views(model, x, u_weak, u_strong, True, CPU)
    for name, a, b in zip(("labelled", "weak", "strong"), got, joint):
        assert torch.allclose(a, b, atol=1e-6), name
    alone = copy.deepcopy(model)(u_weak).float()
    assert not torch.allclose(got[1], alone, atol=1e-4)  # the batch's statistics do matter


def test_dropout_needs_the_joint_forward_too():
    """Dropout draws its masks in the forward's order: a separate forward of the weak views would
    give other logits, so a network with dropout takes the joint forward like BatchNorm's."""
    assert needs_joint_forward(nn.Sequential(nn.Flatten(), nn.Dropout(0.1), nn.Linear(64, 2)))
    assert needs_joint_forward(nn.Sequential(nn.Dropout2d(0.1), nn.Flatten(), nn.Linear(64, 2)))
    assert not needs_joint_forward(nn.Sequential(nn.Flatten(), nn.ReLU(), nn.Linear(64, 2)))


@pytest.mark.parametrize("private", [False, True])
def test_without_a_joint_forward_the_weak_views_give_the_same_logits_without_a_graph(private):
    """A network without batch statistics (the CNN, the private WRN's GroupNorm): the joint
    forward's logits, the weak views' with no graph behind them (their backward is skipped)."""
    torch.manual_seed(0)
    model = build_network("cnn", 3, 10, 4) if not private else build_network("wrn", 3, 10, 1, private=True)
    assert not needs_joint_forward(model)
    x, u_weak, u_strong = three_views(1)
    joint = model(torch.cat([x, u_weak, u_strong])).float().split([2, 4, 4])
    got = _forward_views(model, x, u_weak, u_strong, False, CPU)
    for name, a, b in zip(("labelled", "weak", "strong"), got, joint):
        assert torch.allclose(a, b, atol=1e-6), name
    assert got[1].grad_fn is None and not got[1].requires_grad
    assert got[0].requires_grad and got[2].requires_grad


@pytest.mark.parametrize("architecture, joint", [("wrn", True), ("cnn", False)])
def test_train_takes_the_joint_forward_exactly_when_the_network_needs_it(architecture, joint, monkeypatch):
    import privssl.training.semi_supervised as semi

    seen, forward_views = [], semi._forward_views

    def recording(*args):
        seen.append(args[4])
        return forward_views(*args)

    monkeypatch.setattr(semi, "_forward_views", recording)
    torch.manual_seed(0)
    train("fixmatch", build_network(architecture, 1, 2, 1 if architecture == "wrn" else 4), training_set(),
          one_step_spec(THRESHOLDS), PLAIN, 0, CPU, log=quiet)
    assert seen == [joint]


# ------------------------------------------------------------------------------ DP-SGD


@pytest.mark.parametrize("n_labelled, n_unlabelled, expected", [(8, 32, 0.5), (40, 10, 0.8), (4, 8, 1.0)])
def test_sampling_rate_is_the_larger_of_the_two_rates(n_labelled, n_unlabelled, expected):
    assert math.isclose(sampling_rate(spec(), n_labelled, n_unlabelled), expected)  # B = 4, μB = 8


@pytest.mark.parametrize("n_labelled, n_unlabelled", [(3, 32), (8, 7)])
def test_sampling_rate_refuses_batches_larger_than_their_sets(n_labelled, n_unlabelled):
    with pytest.raises(ValueError, match="exceed the sets"):
        sampling_rate(spec(), n_labelled, n_unlabelled)
    data = training_set(n_labelled, n_unlabelled)
    with pytest.raises(ValueError, match="exceed the sets"):
        train_private(network(), data, spec(), PrivateSpec(1.0, 1.0), AUGMENT, 0, CPU, log=quiet)


def private_one_step(private: PrivateSpec, seed: int = 0, tau: float = 0.6) -> dict:
    kept, _ = train_private(network(), training_set(), one_step_spec(THRESHOLDS | {"fixmatch": tau}), private, PLAIN,
                            seed, CPU, log=quiet)
    return kept[1]


def test_dpsgd_without_noise_or_clipping_is_sgd_on_the_summed_fixmatch_losses():
    data = training_set()
    model = network()
    logits_u = model(data.unlabelled)
    confidence, pseudo = torch.softmax(logits_u.detach().double(), -1).max(-1)
    tau = mid_threshold(confidence)
    masked = confidence >= tau
    # (Σ CE of the labelled + λ/μ Σ CE of the confident unlabelled) / B, B = 8, μ = 4, λ = 1
    loss = (-log_probs_true(model(data.labelled), data.labels).sum()
            - 0.25 * log_probs_true(logits_u[masked], pseudo[masked]).sum()) / 8
    grads = torch.autograd.grad(loss, list(model.parameters()))
    got = private_one_step(PrivateSpec(0.0, 1e6), tau=tau)
    for (name, p), g in zip(model.named_parameters(), grads):
        assert torch.allclose(got[name], p.detach() - 0.5 * g, atol=1e-6), name


def test_dpsgd_noise_is_gaussian_of_std_sigma_c_over_b_and_seeded():
    clean = private_one_step(PrivateSpec(0.0, 1.0))
    assert all(torch.equal(clean[k], v) for k, v in private_one_step(PrivateSpec(0.0, 1.0), seed=1).items())
    noisy = private_one_step(PrivateSpec(2.0, 1.0))
    assert all(torch.equal(noisy[k], v) for k, v in private_one_step(PrivateSpec(2.0, 1.0)).items())
    other = private_one_step(PrivateSpec(2.0, 1.0), seed=1)
    assert not torch.equal(noisy["classifier.weight"], other["classifier.weight"])
    # p_noisy − p_clean = −lr σ C z / B with z ~ N(0, 1) per coordinate (lr 0.5, σ 2, C 1, B 8)
    z = torch.cat([(clean[k] - noisy[k]).flatten() for k in clean]).double() * 8 / (0.5 * 2.0)
    assert len(z) > 500
    assert stats.kstest(z.numpy(), "norm").pvalue > 1e-3


def test_a_private_wrn_has_groupnorm_and_per_example_gradients():
    assert any(isinstance(m, nn.BatchNorm2d) for m in build_network("wrn", 1, 3, 1).modules())
    net = build_network("wrn", 1, 3, 1, private=True).double()  # float64: the two gradients agree to rounding
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in net.modules())
    assert any(isinstance(m, nn.GroupNorm) for m in net.modules())
    g = torch.Generator().manual_seed(0)
    images, labels = torch.rand(3, 1, 8, 8, generator=g, dtype=torch.float64), torch.tensor([0, 2, 1])
    per_example = per_example_loss_grads(net, F.cross_entropy, images, labels)
    for b in range(3):
        net.zero_grad()
        F.cross_entropy(net(images[b:b + 1]), labels[b:b + 1]).backward()
        for name, p in net.named_parameters():
            assert torch.allclose(per_example[name][b], p.grad, rtol=1e-9, atol=1e-12), (b, name)


def test_build_network_refuses_an_unknown_architecture():
    with pytest.raises(ValueError, match="unknown architecture 'vit'"):
        build_network("vit", 1, 3, 1)


def test_seeded_network_draws_its_initial_weights_from_the_seed_alone():
    from privssl.training.wide_resnet import seeded_network

    torch.rand(3)  # the global generator's state before the call does not matter
    first = seeded_network(7, "cnn", 1, 10, 4).state_dict()
    torch.rand(5)
    again, other = seeded_network(7, "cnn", 1, 10, 4).state_dict(), seeded_network(8, "cnn", 1, 10, 4).state_dict()
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not all(torch.equal(first[k], other[k]) for k in first)


class _Planted:
    """A pickled object that, once unpickled by a loader that runs code, leaves a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_checkpoint_that_would_run_code_is_refused_and_runs_nothing(tmp_path):
    checkpoint, marker = tmp_path / "run.pt", tmp_path / "RAN"
    torch.save({"fingerprint": {"run": "a"}, "step": _Planted(marker)}, checkpoint)
    with pytest.raises(InputError, match=f"^{checkpoint}: not a checkpoint of this training .*delete it to train "
                                         "from the start$"):
        run(checkpoint=checkpoint, fingerprint={"run": "a"})
    assert not marker.exists()
