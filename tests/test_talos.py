"""Talos: the gradient-reversal layer, λ = 0 is plain SimCLR, the adversary's effect, resuming."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from privssl.training.simclr import Augmentation, SimCLRSpec, pretrain
from privssl.training.talos import TalosAdversary, TalosSpec, adversarial_classifier, reverse_gradient

CPU = torch.device("cpu")
SPEC = SimCLRSpec(encoder="convnet", width=16, epochs=3, batch_size=32, temperature=0.1, lr=1e-3,
                  augmentation=Augmentation(min_area=0.5, brightness=0.3, jitter=0.1, horizontal_flip=False))


def images_and_attributes(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 8, 8, generator=g), torch.randint(0, 4, (n,), generator=g)


@pytest.mark.parametrize("lam", [0.0, 0.5, 3.0])
def test_gradient_reversal_is_identity_forward_and_minus_lambda_backward(lam):
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(5, 3, dtype=torch.float64)
    y = reverse_gradient(x, lam)
    assert torch.equal(y, x)
    (y * weights).sum().backward()
    assert torch.allclose(x.grad, -lam * weights)


def test_gradient_reversal_jacobian_is_minus_lambda_identity():
    # what autograd reports as the layer's Jacobian (a numeric check would see the identity forward)
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    jacobian = torch.autograd.functional.jacobian(lambda v: reverse_gradient(v, 2.0), x)
    assert torch.allclose(jacobian, -2.0 * torch.eye(4, dtype=torch.float64))


def test_talos_at_lambda_zero_equals_plain_simclr(tmp_path):
    images, attributes = images_and_attributes()
    plain, plain_history = pretrain(SPEC, images, seed=3, device=CPU, checkpoint=tmp_path / "a.pt", log=lambda _: None)
    adversary = TalosAdversary(TalosSpec(0.0, hidden=8, lr=1e-2), attributes, 4, 16, seed=4, device=CPU)
    talos, talos_history = pretrain(SPEC, images, seed=3, device=CPU, checkpoint=tmp_path / "b.pt",
                                    log=lambda _: None, adversary=adversary)
    for name, value in plain.state_dict().items():
        assert torch.equal(value, talos.state_dict()[name]), name
    assert [h["loss"] for h in plain_history] == [h["loss"] for h in talos_history]
    assert all("adversary_accuracy" in h for h in talos_history)


def test_positive_lambda_changes_the_encoder_and_starts_from_the_given_encoder(tmp_path):
    images, attributes = images_and_attributes()
    start, _ = pretrain(replace(SPEC, epochs=1), images, seed=9, device=CPU, checkpoint=tmp_path / "s.pt",
                        log=lambda _: None)
    init = start.encoder.state_dict()
    plain, _ = pretrain(replace(SPEC, epochs=0), images, seed=3, device=CPU, checkpoint=tmp_path / "z.pt",
                        log=lambda _: None, init_encoder=init)
    for name, value in init.items():  # zero epochs: the encoder is the one it started from
        assert torch.equal(plain.encoder.state_dict()[name], value)
    adversary = TalosAdversary(TalosSpec(2.0, hidden=8, lr=1e-2), attributes, 4, 16, seed=4, device=CPU)
    talos, _ = pretrain(SPEC, images, seed=3, device=CPU, checkpoint=tmp_path / "t.pt", log=lambda _: None,
                        init_encoder=init, adversary=adversary)
    clean, _ = pretrain(SPEC, images, seed=3, device=CPU, checkpoint=tmp_path / "c.pt", log=lambda _: None,
                        init_encoder=init)
    assert not torch.equal(talos.encoder.dense[0].weight, clean.encoder.dense[0].weight)


def test_encoder_step_descends_contrastive_minus_lambda_adversary_loss():
    # One encoder step through the reversal equals the gradient of L_con - lam L_C, computed directly.
    torch.manual_seed(0)
    encoder = torch.nn.Linear(6, 5).double()
    projector = torch.nn.Linear(5, 4).double()
    classifier = adversarial_classifier(5, 8, 3).double()
    x, s, lam = torch.randn(10, 6, dtype=torch.float64), torch.randint(0, 3, (10,)), 1.7

    def contrastive(h):  # any loss of the projection stands in for NT-Xent here
        return projector(h).pow(2).mean()

    h = encoder(x)
    (contrastive(h) + F.cross_entropy(classifier(reverse_gradient(h, lam)), s)).backward()
    through_reversal = encoder.weight.grad.clone()
    encoder.zero_grad()
    h = encoder(x)
    (contrastive(h) - lam * F.cross_entropy(classifier(h), s)).backward()
    assert torch.allclose(through_reversal, encoder.weight.grad)


def test_adversary_learns_an_attribute_the_representation_carries():
    images, attributes = images_and_attributes(n=96)
    images[:, 0, 0, :] = attributes[:, None].float() / 3  # the attribute written into the top row
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 16), torch.nn.ReLU())
    adversary = TalosAdversary(TalosSpec(1.0, hidden=32, lr=1e-2), attributes, 4, 16, seed=0, device=CPU)
    identity = lambda batch, generator: batch  # noqa: E731 (no augmentation: the attribute stays readable)
    stats = [adversary.fit_epoch(encoder, images, epoch, 32, identity, CPU) for epoch in range(60)]
    assert stats[-1]["adversary_accuracy"] > 0.8 > stats[0]["adversary_accuracy"]


def test_bad_lambda_and_attributes_are_refused():
    with pytest.raises(ValueError, match="lambda must be >= 0"):
        TalosSpec(-1.0)
    with pytest.raises(ValueError, match=r"values in \[0, 4\)"):
        TalosAdversary(TalosSpec(1.0), torch.tensor([0, 4]), 4, 16, seed=0, device=CPU)


def test_talos_resumes_from_its_checkpoint(tmp_path):
    images, attributes = images_and_attributes()
    make = lambda: TalosAdversary(TalosSpec(2.0, hidden=8, lr=1e-2), attributes, 4, 16, seed=4, device=CPU)  # noqa: E731
    straight, _ = pretrain(SPEC, images, seed=3, device=CPU, checkpoint=tmp_path / "a.pt", log=lambda _: None,
                           adversary=make())
    pretrain(replace(SPEC, epochs=1), images, seed=3, device=CPU, checkpoint=tmp_path / "b.pt", log=lambda _: None,
             adversary=make())
    messages = []
    resumed, _ = pretrain(SPEC, images, seed=3, device=CPU, checkpoint=tmp_path / "b.pt", log=messages.append,
                          adversary=make())
    assert any("resumed" in m for m in messages)
    for name, value in straight.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[name]), name
