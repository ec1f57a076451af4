"""The attacker's heads released the victim's way (privssl.attacks.adaptive.release_like_victim):
one dispatch on the kind of release for the adaptive attack, LiRA and the one-run audit. Each
case is checked against what the release method states, not against the dispatch itself."""

import pytest
import torch

from privssl.attacks.adaptive import release_like_victim
from privssl.release.certified import CertifiedSpec, fit_certified_head
from privssl.release.dpsgd_spec import DPSGDSpec
from privssl.release.mechanisms import Gaussian, Logistic
from privssl.training.heads import DTYPE, HeadSpec, flatten

N, FEATURES, CLASSES = 30, 4, 3
HEAD = HeadSpec(architecture="linear", epochs=5)
CERTIFIED = CertifiedSpec(clip_norm=1.0, l2=0.1)


@pytest.fixture(scope="module")
def data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, FEATURES, generator=g, dtype=DTYPE) * 0.3
    y = torch.randint(0, CLASSES, (N,), generator=g)
    sets = torch.stack([torch.arange(0, 20), torch.arange(10, 30)])
    return x, y, sets


def test_an_output_perturbation_release_adds_the_methods_own_noise_to_the_given_heads(data):
    """ALM: the clean heads the caller has plus logistic noise at each of the release's scales, a
    fresh draw per (ε, head) from the seed (the family stated here, not read from the registry)."""
    x, y, sets = data
    clean = torch.randn(2, 15, generator=torch.Generator().manual_seed(1), dtype=DTYPE)
    scales = torch.tensor([0.5, 3.0], dtype=DTYPE)
    out = release_like_victim("alm", {"noise_scale": scales}, x, y, sets, CLASSES, HEAD, seed=7,
                              trained={"finetune": clean})
    unit = Logistic(None).sample((4, 15), torch.Generator().manual_seed(7)).reshape(2, 2, 15)
    torch.testing.assert_close(out, clean[None] + scales[:, None, None] * unit, rtol=1e-12, atol=1e-12)


def test_a_certified_release_starts_from_a_certified_head_not_the_fine_tuned_one(data):
    """The certified Gaussian release adds its noise to the certified learner's head on each set;
    a fine-tuned head the caller passes is another kind and must not be used."""
    x, y, sets = data
    decoy = torch.full((2, (FEATURES + 1) * CLASSES), 99.0, dtype=DTYPE)
    scales = torch.tensor([0.2], dtype=DTYPE)
    out = release_like_victim("certified_gaussian", {"noise_scale": scales}, x, y, sets, CLASSES, HEAD, seed=3,
                              certified_spec=CERTIFIED, trained={"finetune": decoy})
    certified = torch.cat([flatten(fit_certified_head(x[s], y[s], CLASSES, CERTIFIED).params) for s in sets])
    noise = Gaussian(None).sample((2, certified.shape[1]), torch.Generator().manual_seed(3))
    torch.testing.assert_close(out[0], certified + 0.2 * noise, rtol=1e-10, atol=1e-10)


def test_none_is_the_clean_heads_and_dpsgd_trains_privately_whatever_heads_are_given(data):
    x, y, sets = data
    clean = torch.randn(2, 15, generator=torch.Generator().manual_seed(2), dtype=DTYPE)
    assert torch.equal(release_like_victim("none", None, x, y, sets, CLASSES, HEAD, 0, trained={"finetune": clean}),
                       clean[None])
    release = {"specs": [DPSGDSpec(clip_norm=1.0, batch_size=10, epochs=2, lr=0.5, momentum=0.0)],
               "noise_scale": torch.tensor([1.0], dtype=DTYPE)}
    first = release_like_victim("dpsgd", release, x, y, sets, CLASSES, HEAD, 5, trained={"finetune": clean})
    second = release_like_victim("dpsgd", release, x, y, sets, CLASSES, HEAD, 5, trained={"finetune": clean + 1})
    assert first.shape == (1, 2, 15) and torch.equal(first, second)  # the given heads play no part
    assert not torch.allclose(first[0], clean, atol=1e-3)


def test_a_training_time_method_is_refused_naming_it(data):
    x, y, sets = data
    with pytest.raises(ValueError, match="'dpcl' is released by its own training branch"):
        release_like_victim("dpcl", {}, x, y, sets, CLASSES, HEAD, 0)
