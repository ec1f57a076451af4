"""DPAdapter's pre-training kinds and downstream model (privssl.training.dpadapter): the SAM settings of
each kind, pre-training from a copy of the public encoder with a seeded classification layer,
standard pre-training against plain minibatch SGD, and the downstream copy."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from privssl.data.images import load_pool
from privssl.training import dpadapter
from privssl.training.dpadapter import PRETRAININGS, Classifier, downstream_model, pretrain_classifier, pretraining_spec
from privssl.training.encoders import ConvEncoder
from privssl.training.sam import SAMSpec, train_sam

SPEC = SAMSpec(rho=0.5, perturb_batch=32, update_batch=16, two_batch=True, epochs=1, warmup_epochs=1, lr=0.05,
               momentum=0.9, weight_decay=5e-4)


@pytest.fixture(scope="module")
def digits():
    pool = load_pool("digits", "data")  # bundled with scikit-learn: float images in [0, 1], 10 classes
    return pool.images[:48], pool.labels[:48]


def encoder(seed: int = 0) -> ConvEncoder:
    torch.manual_seed(seed)
    return ConvEncoder(1, 8, 8)


def state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def assert_states_equal(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for k in a:
        assert torch.equal(a[k], b[k]), k


# --------------------------------------------------------------------------- pretraining_spec


def test_pretraining_spec_of_each_kind():
    standard = pretraining_spec("standard", 0.7, SPEC)
    assert standard.rho == 0.0 and replace(standard, rho=SPEC.rho) == SPEC  # nothing else changes
    sam = pretraining_spec("sam", 0.7, SPEC)
    assert (sam.rho, sam.two_batch) == (0.7, False) and replace(sam, rho=SPEC.rho, two_batch=True) == SPEC
    adapter = pretraining_spec("dpadapter", 0.7, replace(SPEC, two_batch=False))
    assert (adapter.rho, adapter.two_batch) == (0.7, True) and replace(adapter, rho=SPEC.rho) == SPEC
    with pytest.raises(ValueError, match=r"'amp'.*allowed: standard, sam, dpadapter"):
        pretraining_spec("amp", 0.7, SPEC)


# --------------------------------------------------------------------------- pretrain_classifier


@pytest.mark.parametrize("kind", ["standard", "sam", "dpadapter"])
def test_pretraining_trains_a_copy_and_leaves_the_public_encoder_unchanged(digits, kind):
    images, labels = digits
    public = encoder()
    before = state(public)
    model, history = pretrain_classifier(kind, 0.05, SPEC, images, labels, 10, public, seed=3)
    assert_states_equal(state(public), before)
    assert model.encoder is not public
    assert all(p is not q for p, q in zip(model.encoder.parameters(), public.parameters()))
    assert any(not torch.equal(p, q) for p, q in zip(model.encoder.parameters(), public.parameters()))
    assert [row["phase"] for row in history] == ["warmup", "sam"]
    assert isinstance(model, Classifier) and model.classifier.out_features == 10


def test_every_kind_starts_from_the_same_seeded_classification_layer_and_batches(digits, monkeypatch):
    """What pretrain_classifier hands train_sam: the public encoder's weights, the classification
    layer of torch.manual_seed(seed); nn.Linear(out_dim, classes), inputs in [0, 1], the kind's
    SAM settings and a generator in the state of Generator().manual_seed(seed)."""
    images, labels = digits
    public = encoder()
    seen = {}

    def recording_train_sam(model, loss_fn, x, y, spec, generator, log=None):
        seen[(spec.rho, spec.two_batch)] = (state(model), x.clone(), y.clone(), spec, generator.get_state())
        return []

    monkeypatch.setattr(dpadapter, "train_sam", recording_train_sam)
    for kind in ("standard", "sam", "dpadapter"):
        pretrain_classifier(kind, 0.05, SPEC, images, labels, 10, public, seed=11)
    pretrain_classifier("standard", 0.05, replace(SPEC, two_batch=False), images, labels, 10, public, seed=12)
    assert set(seen) == {(0.0, True), (0.05, False), (0.05, True), (0.0, False)}

    torch.manual_seed(11)
    expected = nn.Linear(public.out_dim, 10)
    for key in [(0.0, True), (0.05, False), (0.05, True)]:
        model_state, x, y, spec, generator_state = seen[key]
        assert torch.equal(model_state["classifier.weight"], expected.weight.detach())
        assert torch.equal(model_state["classifier.bias"], expected.bias.detach())
        assert_states_equal({k[len("encoder."):]: v for k, v in model_state.items() if k.startswith("encoder.")},
                            state(public))
        assert torch.equal(x, images) and torch.equal(y, labels) and y.dtype == torch.long
        assert torch.equal(generator_state, torch.Generator().manual_seed(11).get_state())
        assert spec == pretraining_spec({(0.0, True): "standard", (0.05, False): "sam",
                                         (0.05, True): "dpadapter"}[key], 0.05, SPEC)
    # another seed, another classification layer: the comparison above can fail
    assert not torch.equal(seen[(0.0, False)][0]["classifier.weight"], expected.weight.detach())


@pytest.mark.parametrize("two_batch", [True, False])
def test_standard_pretraining_is_plain_minibatch_sgd_and_train_sam_at_rho_zero(digits, two_batch):
    """Warm-up and SAM epochs at ρ = 0 are SGD steps on the update batches of each epoch's
    permutation; each SAM step also draws (and at ρ = 0 ignores) a perturbation batch, in both modes."""
    images, labels = digits
    spec = replace(SPEC, two_batch=two_batch, epochs=2, warmup_epochs=1)
    public = encoder()
    model, _ = pretrain_classifier("standard", 0.5, spec, images, labels, 10, public, seed=5)

    torch.manual_seed(5)
    reference = Classifier(copy.deepcopy(public), 10)
    through_train_sam = copy.deepcopy(reference)
    g = torch.Generator().manual_seed(5)
    optimiser = torch.optim.SGD(reference.parameters(), lr=spec.lr, momentum=spec.momentum,
                                weight_decay=spec.weight_decay)
    n = len(labels)
    for epoch in range(spec.warmup_epochs + spec.epochs):
        order = torch.randperm(n, generator=g)
        for start in range(0, n, spec.update_batch):
            idx = order[start:start + spec.update_batch]
            if epoch >= spec.warmup_epochs:
                torch.randperm(n, generator=g)  # the perturbation batch, unused at ρ = 0
            optimiser.zero_grad()
            F.cross_entropy(reference(images[idx]), labels[idx]).backward()
            optimiser.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)

    train_sam(through_train_sam, F.cross_entropy, images, labels, pretraining_spec("standard", 0.5, spec),
              torch.Generator().manual_seed(5))
    for p, q in zip(model.parameters(), through_train_sam.parameters()):
        assert torch.equal(p, q)


def test_kinds_differ_by_their_perturbation(digits):
    images, labels = digits
    public = encoder()
    models = {kind: pretrain_classifier(kind, 0.5, SPEC, images, labels, 10, public, seed=5)[0]
              for kind in ("standard", "sam", "dpadapter")}
    flat = {k: torch.cat([p.detach().flatten() for p in m.parameters()]) for k, m in models.items()}
    assert not torch.allclose(flat["standard"], flat["sam"])
    assert not torch.allclose(flat["sam"], flat["dpadapter"])
    # ρ = 0 removes the perturbation: one SAM epoch of vanilla SAM is then the standard training
    sam_at_zero = pretrain_classifier("sam", 0.0, SPEC, images, labels, 10, public, seed=5)[0]
    for p, q in zip(sam_at_zero.parameters(), models["standard"].parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- downstream_model


def test_downstream_model_is_a_copy_with_a_fresh_seeded_classification_layer(digits):
    images, labels = digits
    pretrained, _ = pretrain_classifier("dpadapter", 0.05, SPEC, images, labels, 10, encoder(), seed=3)
    before = state(pretrained)
    model = downstream_model(pretrained, 4, seed=21)
    assert model is not pretrained and model.encoder is not pretrained.encoder
    assert_states_equal(state(model.encoder), state(pretrained.encoder))
    assert (model.classifier.in_features, model.classifier.out_features) == (pretrained.encoder.out_dim, 4)
    torch.manual_seed(21)
    fresh = nn.Linear(pretrained.encoder.out_dim, 4)
    assert torch.equal(model.classifier.weight, fresh.weight) and torch.equal(model.classifier.bias, fresh.bias)
    assert model(images[:5]).shape == (5, 4)

    with torch.no_grad():  # changing the downstream model leaves the pre-trained one as it was
        for p in model.parameters():
            p.add_(1.0)
    assert_states_equal(state(pretrained), before)
    assert pretrained.classifier.out_features == 10


def test_every_kind_trains_on_the_same_update_batches():
    """At ρ = 0 the three kinds are plain SGD: they must be the same network after several SAM
    epochs, so the draws of B_p must not shift vanilla SAM's update batches."""
    torch.manual_seed(0)
    encoder = ConvEncoder(1, 8, 8)
    x = torch.rand(48, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 3, (48,), generator=torch.Generator().manual_seed(2))
    spec = SAMSpec(perturb_batch=32, update_batch=16, two_batch=True, epochs=3, warmup_epochs=1)
    models = [pretrain_classifier(kind, 0.0, spec, x, y, 3, encoder, seed=5)[0] for kind in PRETRAININGS]
    for other in models[1:]:
        for a, b in zip(models[0].parameters(), other.parameters()):
            assert torch.equal(a, b)


def test_pretraining_runs_on_the_encoders_device(monkeypatch):
    """The classifier and the public images go where the encoder is (on a GPU machine, the GPU; a
    classification layer left on the CPU failed there). The meta device stands in for the GPU on
    the CPU: mixing it with CPU tensors fails as CUDA does."""
    seen = {}

    def record(model, loss_fn, x, y, spec, generator, log=None):
        seen.update(parameters={p.device.type for p in model.parameters()}, x=x.device.type, y=y.device.type)
        return []

    monkeypatch.setattr(dpadapter, "train_sam", record)
    images, labels = torch.rand(8, 1, 8, 8), torch.arange(8) % 2
    pretrain_classifier("dpadapter", 0.5, SPEC, images, labels, 2, encoder().to("meta"), seed=0)
    assert seen == {"parameters": {"meta"}, "x": "meta", "y": "meta"}


def test_shared_trunk_robustness_is_robust_accuracy_of_every_fine_tuning():
    """Two fine-tunings of one pre-trained network (the convolutions frozen, the dense layer and a
    fresh classifier trained apart): the shared trunk's robust accuracies equal robust_accuracy's,
    draw for draw; a network whose trunk moved is refused; a mistake in the noise stream (the top's
    noise not skipped between draws) would give other draws."""
    from privssl.training.dpadapter import Classifier, downstream_model
    from privssl.training.encoders import ConvEncoder, split_for_training
    from privssl.training.sam import SharedTrunkRobustness, robust_accuracy

    torch.manual_seed(0)
    pretrained = Classifier(ConvEncoder(1, 8, width=8), 4).eval()
    x, y = torch.rand(50, 1, 8, 8), torch.randint(0, 3, (50,))
    shared = SharedTrunkRobustness(x, 0.3, 4, seed=7, batch_size=16)
    for seed in (1, 2):
        model = downstream_model(pretrained, 3, seed)
        trunk, top = split_for_training(model.encoder, "top")
        with torch.no_grad():
            for p in top.parameters():
                p.add_(0.1 * torch.randn(p.shape))
        expected = robust_accuracy(model, x, y, 0.3, 4, torch.Generator().manual_seed(7), batch_size=16)
        assert shared.accuracy(trunk, torch.nn.Sequential(top, model.classifier), y) == expected
        assert len(set(expected[1])) > 1  # the draws differ: the comparison sees the stream
    with torch.no_grad():
        next(trunk.parameters()).add_(1e-3)
    with pytest.raises(ValueError, match="trunk or top differs"):
        shared.accuracy(trunk, torch.nn.Sequential(top, model.classifier), y)


def test_one_shared_trunk_serves_the_pretrained_network_then_its_fine_tunings():
    """scripts/dpadapter_train.py measures the pre-trained network's robust accuracy through the
    shared trunk that its fine-tunings then reuse: the pre-trained network's number must be
    robust_accuracy's of it, and the fine-tunings' numbers after it unchanged."""
    from privssl.training.encoders import split_for_training
    from privssl.training.sam import SharedTrunkRobustness, robust_accuracy

    torch.manual_seed(1)
    pretrained = Classifier(ConvEncoder(1, 8, width=8), 3).eval()
    x, y = torch.rand(40, 1, 8, 8), torch.randint(0, 3, (40,))
    expected = robust_accuracy(pretrained, x, y, 0.3, 3, torch.Generator().manual_seed(5), batch_size=16)
    fine_tuned = downstream_model(pretrained, 3, seed=2)
    alone = SharedTrunkRobustness(x, 0.3, 3, seed=5, batch_size=16)
    trunk, top = split_for_training(fine_tuned.encoder, "top")
    fine_tuned_alone = alone.accuracy(trunk, nn.Sequential(top, fine_tuned.classifier), y)

    shared = SharedTrunkRobustness(x, 0.3, 3, seed=5, batch_size=16)
    trunk, top = split_for_training(pretrained.encoder, "top")
    assert shared.accuracy(trunk, nn.Sequential(top, pretrained.classifier), y) == expected
    assert len(set(expected[1])) > 1
    trunk, top = split_for_training(fine_tuned.encoder, "top")
    assert shared.accuracy(trunk, nn.Sequential(top, fine_tuned.classifier), y) == fine_tuned_alone
