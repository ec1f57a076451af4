"""Attribute inference from embeddings: the attack MLP, its accuracy and the majority baseline."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privssl.attacks.attribute_inference import (
    AttributeAttackSpec,
    attribute_accuracy,
    majority_baseline,
    train_attribute_attack,
)
from privssl.attacks.statistics import clopper_pearson

FAST = AttributeAttackSpec(epochs=20)


def clustered(n: int, n_classes: int, dim: int, generator: torch.Generator, scale: float = 1.0,
              offset: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings at one of n_classes well-separated centres (fixed by seed 0) plus small noise."""
    centres = 3 * torch.randn(n_classes, dim, generator=torch.Generator().manual_seed(0))
    attributes = torch.randint(0, n_classes, (n,), generator=generator)
    embeddings = centres[attributes] + 0.3 * torch.randn(n, dim, generator=generator)
    return offset + scale * embeddings, attributes


def test_spec_defaults_follow_thesis_and_from_config():
    spec = AttributeAttackSpec()
    assert (spec.hidden, spec.epochs, spec.lr) == (128, 100, 0.01)
    assert AttributeAttackSpec.from_config({"epochs": 5, "momentum": 0.0, "other": 1}) == AttributeAttackSpec(
        epochs=5, momentum=0.0)


def test_attack_near_majority_baseline_on_uninformative_embeddings():
    # Attributes independent of the embeddings: no classifier can beat guessing on average, so
    # with uniform attributes every one (a memorising MLP included) scores about 1/4.
    generator = torch.Generator().manual_seed(1)
    aux, target = torch.randn(400, 8, generator=generator), torch.randn(1000, 8, generator=generator)
    aux_attributes = torch.randint(0, 4, (400,), generator=generator)
    attributes = torch.randint(0, 4, (1000,), generator=generator)
    model = train_attribute_attack(aux, aux_attributes, 4, FAST, seed=0)
    result, _ = attribute_accuracy(model, target, attributes)
    baseline, _ = majority_baseline(aux_attributes, attributes)
    assert abs(result["accuracy"] - baseline["baseline"]) < 0.1
    assert result["n"] == 1000 and result["accuracy_lo"] < result["accuracy"] < result["accuracy_hi"]


def test_attack_near_perfect_when_embeddings_contain_attribute():
    generator = torch.Generator().manual_seed(2)
    aux, aux_attributes = clustered(300, 5, 16, generator)
    target, attributes = clustered(300, 5, 16, generator)
    model = train_attribute_attack(aux, aux_attributes, 5, FAST, seed=0)
    result, _ = attribute_accuracy(model, target, attributes)
    assert result["accuracy"] >= 0.95
    assert (result["accuracy_lo"], result["accuracy_hi"]) == clopper_pearson(round(result["accuracy"] * 300), 300)
    assert majority_baseline(aux_attributes, attributes)[0]["baseline"] < 0.4  # the attack is what beats chance


def test_attack_standardises_with_auxiliary_statistics():
    # Embeddings of scale 1000 around 500 diverge plain SGD at lr 0.01; the model scales the
    # target with the auxiliary mean and std it keeps, so a constant feature is also harmless.
    generator = torch.Generator().manual_seed(3)
    aux, aux_attributes = clustered(300, 3, 8, generator, scale=1000.0, offset=500.0)
    target, attributes = clustered(300, 3, 8, generator, scale=1000.0, offset=500.0)
    aux, target = (torch.cat([x, torch.full((300, 1), 7.0)], 1) for x in (aux, target))
    model = train_attribute_attack(aux, aux_attributes, 3, FAST, seed=0)
    assert attribute_accuracy(model, target, attributes)[0]["accuracy"] >= 0.95
    assert torch.allclose(model.mean, aux.mean(0)) and torch.allclose(model.std[:-1], aux[:, :-1].std(0, correction=0))


def test_attack_deterministic_for_seed():
    generator = torch.Generator().manual_seed(4)
    aux, aux_attributes = torch.randn(100, 6, generator=generator), torch.randint(0, 3, (100,), generator=generator)
    spec = AttributeAttackSpec(hidden=16, epochs=3)
    first, second, other = (train_attribute_attack(aux, aux_attributes, 3, spec, seed=s) for s in (0, 0, 1))
    for name, value in first.state_dict().items():
        assert torch.equal(value, second.state_dict()[name]), name
    assert not torch.equal(first(aux), other(aux))


def test_majority_baseline_hand_count():
    aux = torch.tensor([2, 2, 1, 1, 0, 3])  # classes 1 and 2 tie: the smaller, 1, is guessed
    attributes = torch.tensor([1, 1, 2, 0, 1])
    lo, hi = clopper_pearson(3, 5)
    assert majority_baseline(aux, attributes) == ({"baseline": 0.6, "baseline_lo": lo, "baseline_hi": hi}, 1)
    other = majority_baseline(torch.tensor([0, 2, 2]), attributes)  # the auxiliary set's majority, not the target's
    assert other == ({"baseline": 0.2, "baseline_lo": clopper_pearson(1, 5)[0],
                      "baseline_hi": clopper_pearson(1, 5)[1]}, 2)


def test_guesses_are_each_members_prediction_in_order():
    """The guesses are exactly the attack model's prediction of each record's attribute, recomputed
    here, in the records' order, and give the reported accuracy; the baseline's one guess is the
    auxiliary set's majority and gives the baseline's accuracy."""
    generator = torch.Generator().manual_seed(5)
    aux, aux_attributes = clustered(200, 3, 8, generator)
    target, attributes = clustered(37, 3, 8, generator)
    target = target + 2.5 * torch.randn(37, 8, generator=generator)  # blurred: some right, some wrong
    model = train_attribute_attack(aux, aux_attributes, 3, FAST, seed=0)
    result, guesses = attribute_accuracy(model, target, attributes)
    with torch.no_grad():
        predicted = model(target).argmax(1)
    expected = (predicted == attributes).numpy()
    assert 0 < expected.sum() < 37
    assert np.array_equal(guesses, predicted.numpy())
    assert result["accuracy"] == expected.mean() and result["n"] == 37
    majority = int(np.bincount(aux_attributes.numpy()).argmax())
    baseline, guess = majority_baseline(aux_attributes, attributes)
    assert guess == majority and baseline["baseline"] == (attributes == majority).numpy().mean()


@pytest.mark.parametrize("embeddings, attributes, n_classes, match", [
    (torch.zeros(4), torch.zeros(4, dtype=torch.long), 2, "embeddings"),
    (torch.zeros(0, 3), torch.zeros(0, dtype=torch.long), 2, "embeddings"),
    (torch.zeros(4, 3), torch.zeros(4, 1, dtype=torch.long), 2, "attributes"),
    (torch.zeros(4, 3), torch.zeros(5, dtype=torch.long), 2, "attributes"),
    (torch.zeros(4, 3), torch.tensor([0, 1, 2, 1]), 2, "attributes"),
    (torch.zeros(4, 3), torch.tensor([0, -1, 1, 1]), 2, "attributes"),
    (torch.zeros(4, 3), torch.zeros(4), 2, "attributes"),
    (torch.zeros(4, 3), torch.zeros(4, dtype=torch.long), 1, "n_classes"),
])
def test_train_rejects_bad_inputs(embeddings, attributes, n_classes, match):
    with pytest.raises(ValueError, match=match):
        train_attribute_attack(embeddings, attributes, n_classes, FAST, seed=0)


def test_accuracy_and_baseline_reject_bad_shapes():
    model = train_attribute_attack(torch.randn(8, 3), torch.tensor([0, 1] * 4), 2, AttributeAttackSpec(epochs=1),
                                   seed=0)
    with pytest.raises(ValueError, match="attributes"):
        attribute_accuracy(model, torch.randn(4, 3), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="embeddings"):
        attribute_accuracy(model, torch.randn(4), torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="aux_attributes"):
        majority_baseline(torch.zeros(2, 2, dtype=torch.long), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="attributes"):
        majority_baseline(torch.zeros(2, dtype=torch.long), torch.tensor([0.5, 1.0]))
