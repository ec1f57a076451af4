"""SimCLR pre-training: the NT-Xent loss, the augmentation, learning, resuming, encoders."""

import math
import shutil
from dataclasses import replace

import pytest
import torch

from privssl.data.images import load_pool
from privssl.training.encoders import build_encoder
from privssl.training.simclr import Augmentation, SimCLRSpec, nt_xent, pretrain

CPU = torch.device("cpu")
GENTLE = Augmentation(min_area=0.5, brightness=0.3, jitter=0.1, horizontal_flip=False)




def cos(a, b):
    return float(a @ b) / (float(a.norm()) * float(b.norm()))


def projections(n=6, k=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(n, k, generator=g, dtype=torch.float64)
    return z1, z1 + 0.8 * torch.randn(n, k, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("temperature", [0.1, 0.5])
def test_nt_xent_cross_view_loop(temperature):
    z1, z2 = projections()
    n = len(z1)
    s = [[cos(z1[i], z2[j]) / temperature for j in range(n)] for i in range(n)]

    def ce(rows):  # mean over i of −log softmax(rows[i])[i]
        return sum(math.log(sum(math.exp(v) for v in row)) - row[i] for i, row in enumerate(rows)) / n

    expected = 0.5 * (ce(s) + ce([list(col) for col in zip(*s)]))
    correct = sum(max(range(n), key=lambda j: s[i][j]) == i for i in range(n))
    correct += sum(max(range(n), key=lambda i: s[i][j]) == j for j in range(n))
    loss, acc = nt_xent(z1, z2, temperature, "cross_view")
    assert float(loss) == pytest.approx(expected, rel=1e-10)
    assert float(acc) == pytest.approx(correct / (2 * n), rel=1e-6)


@pytest.mark.parametrize("temperature", [0.1, 0.5])
def test_nt_xent_all_is_simclr_eq1(temperature):
    z1, z2 = projections()
    n = len(z1)
    z = list(z1) + list(z2)
    partner = [(i + n) % (2 * n) for i in range(2 * n)]
    total, correct = 0.0, 0
    for i in range(2 * n):
        sims = {k: cos(z[i], z[k]) / temperature for k in range(2 * n) if k != i}
        total += -math.log(math.exp(sims[partner[i]]) / sum(math.exp(v) for v in sims.values()))
        correct += max(sims, key=sims.get) == partner[i]
    loss, acc = nt_xent(z1, z2, temperature, "all")
    assert float(loss) == pytest.approx(total / (2 * n), rel=1e-10)
    assert float(acc) == pytest.approx(correct / (2 * n), rel=1e-6)


def test_nt_xent_unknown_negatives():
    z1, z2 = projections()
    with pytest.raises(ValueError, match="'hard'"):
        nt_xent(z1, z2, 0.1, "hard")


def test_augmentation_shape_range_seed():
    images = torch.rand(8, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    aug = Augmentation()
    a = aug(images, torch.Generator().manual_seed(1))
    b = aug(images, torch.Generator().manual_seed(1))
    c = aug(images, torch.Generator().manual_seed(2))
    assert a.shape == images.shape and a.min() >= 0 and a.max() <= 1
    assert torch.equal(a, b)
    assert (a - c).abs().max() > 0.1


def test_augmentation_without_transforms_is_identity():
    images = torch.rand(5, 3, 12, 12, generator=torch.Generator().manual_seed(0))
    identity = Augmentation(min_area=1.0, brightness=0.0, jitter=0.0, horizontal_flip=False)
    torch.testing.assert_close(identity(images, torch.Generator().manual_seed(3)), images, rtol=0, atol=1e-5)


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return load_pool("digits", tmp_path_factory.mktemp("data")).images


def test_pretraining_lowers_loss_without_collapse(digits, tmp_path):
    spec = SimCLRSpec(epochs=8, batch_size=128, augmentation=GENTLE)
    _, history = pretrain(spec, digits[:400], seed=0, device=CPU, checkpoint=tmp_path / "ckpt.pt", log=lambda _: None)
    assert [h["epoch"] for h in history] == list(range(1, 9))
    # batches of 128, 128, 128, 16: a collapsed encoder scores about ln(128) = 4.85 and 1/128
    assert history[-1]["loss"] < history[0]["loss"] - 0.3
    chance = (3 * 128 * (1 / 128) + 16 * (1 / 16)) / 400
    assert history[-1]["contrastive_accuracy"] > 3 * chance


def test_pretraining_resumes_exactly(digits, tmp_path):
    images = digits[:96]
    spec = SimCLRSpec(width=16, epochs=3, batch_size=32, augmentation=GENTLE)
    quiet = lambda _: None  # noqa: E731
    straight, straight_history = pretrain(spec, images, seed=1, device=CPU, checkpoint=tmp_path / "a.pt", log=quiet)
    pretrain(replace(spec, epochs=2), images, seed=1, device=CPU, checkpoint=tmp_path / "b.pt", log=quiet)
    messages = []
    resumed, resumed_history = pretrain(spec, images, seed=1, device=CPU, checkpoint=tmp_path / "b.pt",
                                        log=messages.append)
    assert "resumed" in messages[0] and "after epoch 2" in messages[0]
    assert resumed_history == straight_history
    expected = straight.encoder.state_dict()
    assert all(torch.equal(v, expected[k]) for k, v in resumed.encoder.state_dict().items())

    messages.clear()
    other = replace(spec, epochs=1, temperature=0.2)
    _, history = pretrain(other, images, seed=1, device=CPU, checkpoint=tmp_path / "b.pt", log=messages.append)
    assert "ignoring" in messages[0]
    _, fresh = pretrain(other, images, seed=1, device=CPU, checkpoint=tmp_path / "c.pt", log=quiet)
    assert history == fresh and history != straight_history[:1]


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    theirs = b.state_dict()
    return all(torch.equal(v, theirs[k]) for k, v in a.state_dict().items())


def quiet(_: str) -> None:
    pass


SMALL = SimCLRSpec(width=16, epochs=1, batch_size=32, augmentation=GENTLE)


def test_longer_checkpoint_is_no_prefix_of_a_shorter_run(digits, tmp_path):
    """After a 2-epoch run, asking for 1 epoch starts afresh and gives the 1-epoch encoder of a run
    that never saw the checkpoint, not the 2-epoch one; that run's checkpoint then resumes to 2."""
    images, two_epochs = digits[:64], replace(SMALL, epochs=2)
    two, two_history = pretrain(two_epochs, images, seed=1, device=CPU, checkpoint=tmp_path / "run.pt", log=quiet)
    messages = []
    one, history = pretrain(SMALL, images, seed=1, device=CPU, checkpoint=tmp_path / "run.pt", log=messages.append)
    fresh, fresh_history = pretrain(SMALL, images, seed=1, device=CPU, checkpoint=tmp_path / "fresh.pt", log=quiet)
    assert messages[0].startswith("ignoring") and "epoch 2, past the 1 requested" in messages[0]
    assert history == fresh_history == two_history[:1]
    assert same_weights(one.encoder, fresh.encoder) and not same_weights(one.encoder, two.encoder)

    messages.clear()
    resumed, resumed_history = pretrain(two_epochs, images, seed=1, device=CPU, checkpoint=tmp_path / "run.pt",
                                        log=messages.append)
    assert "resumed" in messages[0] and "after epoch 1" in messages[0]
    assert resumed_history == two_history and same_weights(resumed.encoder, two.encoder)


@pytest.fixture(scope="module")
def one_epoch_checkpoint(digits, tmp_path_factory):
    path = tmp_path_factory.mktemp("checkpoint") / "simclr.pt"
    pretrain(SMALL, digits[:64], seed=1, device=CPU, checkpoint=path, log=quiet)
    return path


# Each changes one thing that changes the encoder; "same" changes nothing.
VARIANTS = {
    "same": lambda spec, images, seed: (spec, images, seed),
    "temperature": lambda spec, images, seed: (replace(spec, temperature=0.2), images, seed),
    "lr": lambda spec, images, seed: (replace(spec, lr=2e-3), images, seed),
    "batch_size": lambda spec, images, seed: (replace(spec, batch_size=16), images, seed),
    "negatives": lambda spec, images, seed: (replace(spec, negatives="all"), images, seed),
    "width": lambda spec, images, seed: (replace(spec, width=8), images, seed),
    "augmentation": lambda spec, images, seed: (replace(spec, augmentation=replace(GENTLE, jitter=0.2)), images, seed),
    "seed": lambda spec, images, seed: (spec, images, seed + 1),
    "image_order": lambda spec, images, seed: (spec, images.flip(0), seed),  # same images, same sum
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_checkpoint_resumes_only_under_the_settings_that_wrote_it(digits, one_epoch_checkpoint, tmp_path, variant):
    spec, images, seed = VARIANTS[variant](SMALL, digits[:64], 1)
    checkpoint = tmp_path / "simclr.pt"
    shutil.copy(one_epoch_checkpoint, checkpoint)
    messages = []
    pretrain(spec, images, seed=seed, device=CPU, checkpoint=checkpoint, log=messages.append)
    if variant == "same":
        assert messages[0].startswith("resumed") and "after epoch 1" in messages[0]
    else:
        assert messages[0].startswith("ignoring") and "written under another" in messages[0]


def test_checkpoint_resumes_only_at_the_intra_op_thread_count_that_wrote_it(digits, tmp_path):
    """Float sums split differently across threads: a run at 2 threads starts afresh from a
    checkpoint written at 1, and resumes one written at 2."""
    images, two_epochs, threads = digits[:64], replace(SMALL, epochs=2), torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        pretrain(SMALL, images, seed=1, device=CPU, checkpoint=tmp_path / "simclr.pt", log=quiet)
        torch.set_num_threads(2)
        afresh, resumed = [], []
        pretrain(two_epochs, images, seed=1, device=CPU, checkpoint=tmp_path / "simclr.pt", log=afresh.append)
        pretrain(two_epochs, images, seed=1, device=CPU, checkpoint=tmp_path / "simclr.pt", log=resumed.append)
    finally:
        torch.set_num_threads(threads)
    assert afresh[0].startswith("ignoring") and "another threads" in afresh[0]
    assert resumed[0].startswith("resumed") and "after epoch 2" in resumed[0]


def test_encoders(digits):
    convnet = build_encoder("convnet", 1, 8, 32)
    assert convnet(digits[:10]).shape == (10, 32) and convnet.out_dim == 32
    resnet = build_encoder("resnet18", 3, 32, 64)
    assert resnet(torch.rand(2, 3, 32, 32)).shape == (2, 512) and resnet.out_dim == 512
    with pytest.raises(ValueError, match="'vit'"):
        build_encoder("vit", 3, 32, 64)
