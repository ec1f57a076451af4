"""DP-SGD's augmentation keyed to the record (privssl.training.augment weak_keyed, strong_keyed;
privssl.training.semi_supervised_private private_batch, train_private), issue 28.

DP-SGD's add/remove guarantee needs every other record's view to be the same random variable
whether one record is in the data or not. The positional `strong` broke it (a record shifted the
groups of consecutive images that share RandAugment's operations); these tests fix a step seed and
check that the views of records a and b are the same bit for bit with a third record c in the batch
or not, that the issue's statistic no longer moves with c (and does with the positional code), that
the keyed draws are not degenerate, and that a whole private training is unchanged by removing a
record no step samples."""

from __future__ import annotations

import pytest
import torch
from scipy import stats

from privssl.training import semi_supervised_private
from privssl.training.augment import AugmentSpec, keyed_hash, randaugment_groups, strong, strong_keyed, weak_keyed
from privssl.training.semi_supervised import TrainingSet, TrainSpec
from privssl.training.semi_supervised_private import PrivateSpec, poisson_rates, private_batch, train_private
from privssl.training.wide_resnet import seeded_network

torch.set_num_threads(1)

CPU = torch.device("cpu")
SPEC = AugmentSpec(padding=1, horizontal_flip=True, ops=2, magnitude=10, images_per_draw=4)
EXPECTED_BATCH = 8  # 2 RandAugment groups a step
SALT = 7


def images(n: int, seed: int = 0, channels: int = 1, size: int = 8) -> torch.Tensor:
    return torch.rand(n, channels, size, size, generator=torch.Generator().manual_seed(seed))


def views(pixels: torch.Tensor, ids: list[int], step_seed: int, spec: AugmentSpec = SPEC) -> dict[int, tuple]:
    """Each record's (weak, strong) view in one batch of these records, by id."""
    ids_tensor = torch.tensor(ids)
    weak_views = weak_keyed(pixels, ids_tensor, spec, step_seed, SALT)
    strong_views = strong_keyed(pixels, ids_tensor, spec, step_seed, SALT + 1, EXPECTED_BATCH)
    return {j: (w, s) for j, w, s in zip(ids, weak_views, strong_views)}


def same_group_ids(step_seed: int, salt: int) -> list[int]:
    """Three ids that share one RandAugment group at this step."""
    ids = torch.arange(64)
    groups = randaugment_groups(ids, SPEC, step_seed, salt, EXPECTED_BATCH)
    return ids[groups == groups[0]][:3].tolist()


# ------------------------------------------------------------------------------ coupling


@pytest.mark.parametrize("c_position", ["before", "between", "after"])
@pytest.mark.parametrize("same_group", [False, True])
def test_views_of_a_and_b_are_the_same_bits_with_c_in_the_batch_or_not(c_position, same_group):
    pictures = images(3)  # the images of a, b, c
    for step_seed in range(20):
        a, b, c = same_group_ids(step_seed, SALT + 1) if same_group else (3, 10, 4)
        by_id = dict(zip((a, b, c), pictures))
        order = {"before": [c, a, b], "between": [a, c, b], "after": [a, b, c]}[c_position]
        without = views(torch.stack([by_id[a], by_id[b]]), [a, b], step_seed)
        with_c = views(torch.stack([by_id[j] for j in order]), order, step_seed)
        for j in (a, b):
            assert torch.equal(without[j][0], with_c[j][0]), ("weak", step_seed, j)
            assert torch.equal(without[j][1], with_c[j][1]), ("strong", step_seed, j)


def test_randaugment_treats_each_image_of_a_batch_on_its_own():
    """What the coupling rests on: given torch's global seed, RandAugment's output for one image does
    not depend on the other images of its call, nor does what it draws. 200 calls of 2 operations
    draw each of its 14 operations with near certainty."""
    from torchvision.transforms import v2

    for channels, magnitude in ((1, 10), (3, 30), (1, 1)):
        batch = (images(5, seed=channels, channels=channels) * 255).round().to(torch.uint8)
        randaugment = v2.RandAugment(num_ops=2, magnitude=magnitude)
        for seed in range(200):
            torch.manual_seed(seed)
            whole, after_whole = randaugment(batch), torch.rand(1)
            torch.manual_seed(seed)
            part, after_part = randaugment(batch[[1, 3]]), torch.rand(1)
            torch.manual_seed(seed)
            one = randaugment(batch[3:4])
            assert torch.equal(whole[[1, 3]], part) and torch.equal(whole[3:4], one), (channels, magnitude, seed)
            assert torch.equal(after_whole, after_part), "RandAugment draws depend on the batch"


def identical_strong_views(step_seeds, batch_of) -> torch.Tensor:
    """Per step seed: do records a and b (one image, ids 0 and 1) get identical strong views?"""
    out = []
    for step_seed in step_seeds:
        strong_a, strong_b = batch_of(step_seed)
        out.append(torch.equal(strong_a, strong_b))
    return torch.tensor(out)


def test_the_issues_statistic_does_not_move_with_c_and_moved_with_positional_groups():
    """Issue 28: P(a and b share an identical strong view) with c absent and present. a and b
    hold one image (no crop, no flip, so only RandAugment's operations tell their views apart)."""
    spec = AugmentSpec(padding=0, horizontal_flip=False, ops=2, magnitude=10, images_per_draw=2)
    image, other = images(2)
    same = torch.stack([image, image])
    with_c = torch.stack([other, image, image])  # c before a and b
    seeds = range(300)

    def keyed(batch, ids):
        return lambda s: strong_keyed(batch, torch.tensor(ids), spec, s, SALT, 4)[-2:]

    absent = identical_strong_views(seeds, keyed(same, [0, 1]))
    present = identical_strong_views(seeds, keyed(with_c, [2, 0, 1]))
    assert torch.equal(absent, present)  # the same events, seed by seed
    assert 0.2 < absent.double().mean() < 0.8  # a and b share a group at some steps (2 groups), not at all

    def positional(batch):
        return lambda s: strong(batch, spec, torch.Generator().manual_seed(s))[-2:]

    old_absent = identical_strong_views(seeds, positional(same)).double().mean()
    old_present = identical_strong_views(seeds, positional(with_c)).double().mean()
    assert old_absent == 1.0 and old_present < 0.1, (old_absent, old_present)  # c moved b out of a's group


# ------------------------------------------------------------------------------ the keyed draws


def lowbias32(x: int) -> int:
    """Wellons' lowbias32 on Python's exact integers: the reference of keyed_hash's int64 arithmetic."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def test_keyed_hash_is_exact_32_bit_arithmetic_without_int64_overflow():
    step_seed, salt, choice = 2**62 - 12345, 2**32 - 1, 3
    keys = [0, 1, 2**31, 2**32 - 1, 123456789]
    prefix = lowbias32(lowbias32(lowbias32(lowbias32(step_seed & 0xFFFFFFFF) ^ (step_seed >> 32)) ^ salt) ^ choice)
    expected = [lowbias32(lowbias32(k ^ prefix) ^ prefix) for k in keys]
    assert keyed_hash(step_seed, salt, choice, torch.tensor(keys)).tolist() == expected


def test_keyed_hash_words_are_uniform_and_differ_between_steps_salts_and_choices():
    keys = torch.arange(20000)
    words = keyed_hash(11, 0, 0, keys)
    assert stats.chisquare(torch.bincount(words % 10, minlength=10).numpy()).pvalue > 1e-3
    assert stats.chisquare(torch.bincount(words >> 28, minlength=16).numpy()).pvalue > 1e-3  # the top bits too
    for other in (keyed_hash(12, 0, 0, keys), keyed_hash(11, 1, 0, keys), keyed_hash(11, 0, 1, keys)):
        assert (other == words).double().mean() < 1e-3
        # no linear trace of one in the other
        assert abs(stats.pearsonr(other.double().numpy(), words.double().numpy()).statistic) < 0.05


def crop_offsets(out: torch.Tensor, height: int, width: int, p: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(dy, dx) of each unflipped crop of the image whose pixel (r, c) holds r·W + c: the crop's
    centre pixel is the image's (dy + H/2 − p, dx + W/2 − p)."""
    centre = out[:, 0, height // 2, width // 2].round().long()
    return centre // width - height // 2 + p, centre % width - width // 2 + p


def test_weak_keyed_crops_cover_every_offset_and_differ_between_steps_and_salts():
    p, size, n = 2, 8, 3000
    spec = AugmentSpec(padding=p, horizontal_flip=False, ops=0, magnitude=0)
    grid = torch.arange(size * size, dtype=torch.float32).reshape(1, 1, size, size).expand(n, 1, size, size)
    ids = torch.arange(n) * 7 + 100  # any distinct ids
    offsets = {}
    for step_seed, salt in ((1, 0), (2, 0), (1, 1)):
        dy, dx = crop_offsets(weak_keyed(grid, ids, spec, step_seed, salt), size, size, p)
        for d in (dy, dx):
            counts = torch.bincount(d, minlength=2 * p + 1)
            assert len(counts) == 2 * p + 1 and stats.chisquare(counts.numpy()).pvalue > 1e-3, counts
        offsets[step_seed, salt] = dy * (2 * p + 1) + dx
    for other in ((2, 0), (1, 1)):  # another step, another view of the same records
        assert (offsets[other] == offsets[1, 0]).double().mean() < 0.1  # 1/25 by chance


def test_weak_keyed_flips_half_of_the_records():
    spec = AugmentSpec(padding=0, horizontal_flip=True, ops=0, magnitude=0)
    n = 4000
    pixels = images(1).expand(n, -1, -1, -1)
    flipped = (weak_keyed(pixels, torch.arange(n), spec, 5, 0) != pixels).flatten(1).any(1)
    assert abs(flipped.double().mean() - 0.5) < 0.03


def test_randaugment_groups_spread_the_records_and_change_from_step_to_step():
    ids = torch.arange(4000)
    groups = randaugment_groups(ids, SPEC, 9, SALT, 40)  # ⌈40 / 4⌉ = 10 groups
    counts = torch.bincount(groups)
    assert len(counts) == 10 and stats.chisquare(counts.numpy()).pvalue > 1e-3
    again = randaugment_groups(ids, SPEC, 10, SALT, 40)
    assert (again == groups).double().mean() < 0.15  # 1/10 by chance
    one_each = AugmentSpec(padding=1, horizontal_flip=True, ops=2, magnitude=10, images_per_draw=1)
    assert torch.equal(randaugment_groups(ids, one_each, 9, SALT, 40), ids)  # every record its own draw


def test_groups_of_different_groups_and_steps_draw_different_operations():
    """One image under many ids and steps: one view per group, and about as many distinct views
    as 100 independent draws give (60 to 75 on this image: draws of 2 of 14 operations coincide,
    e.g. in another order, or an identity with an operation that leaves this image as it is)."""
    spec = AugmentSpec(padding=0, horizontal_flip=False, ops=2, magnitude=10, images_per_draw=4)
    n, steps, expected_batch = 400, 10, 40  # 10 groups a step
    pixels = images(1).expand(n, -1, -1, -1)
    distinct = set()
    for step_seed in range(steps):
        out = strong_keyed(pixels, torch.arange(n), spec, step_seed, SALT, expected_batch)
        groups = randaugment_groups(torch.arange(n), spec, step_seed, SALT, expected_batch)
        for g in groups.unique():
            members = out[groups == g]
            assert (members == members[0]).all()  # one group, one draw
        distinct |= {tuple(v.flatten().tolist()) for v in out}
    assert len(distinct) > 55


def test_strong_keyed_leaves_the_global_generator_as_it_was():
    torch.manual_seed(3)
    expected = torch.rand(4)
    torch.manual_seed(3)
    strong_keyed(images(6), torch.arange(6), SPEC, 1, SALT, EXPECTED_BATCH)
    assert torch.equal(torch.rand(4), expected)


@pytest.mark.parametrize("call, message", [
    (lambda: keyed_hash(-1, 0, 0, torch.arange(3)), r"step seed = -1 is not allowed"),
    (lambda: keyed_hash(0, 2**32, 0, torch.arange(3)), r"salt = 4294967296 is not allowed"),
    (lambda: keyed_hash(0, 0, 0, torch.tensor([0, -2])), r"keys from -2 to 0 are not allowed"),
    (lambda: keyed_hash(0, 0, 0, torch.rand(3)), r"keys of dtype torch.float32 .* allowed: a 1-D integer"),
    (lambda: weak_keyed(images(3), torch.arange(2), SPEC, 0, 0), r"record ids of shape \(2,\) .* 3 images"),
    (lambda: strong_keyed(images(3), torch.arange(3), SPEC, 0, 0, 0), r"expected batch = 0 is not allowed"),
])
def test_bad_keys_are_refused_naming_the_value(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ------------------------------------------------------------------------------ DP-SGD training


TRAIN = TrainSpec(steps=6, checkpoint_every=3, batch_size=2, unlabelled_ratio=4, lr=0.1, momentum=0.9,
                  weight_decay=5e-4, ema=0.5, thresholds={"fixmatch": 0.0})  # τ = 0: every strong view trains
PRIVATE = PrivateSpec(noise_multiplier=1.0, clip_norm=1.0)
N_LABELLED, N_UNLABELLED = 8, 64  # q_l = 1/4, q_u = 1/8


def training_set(drop_unlabelled: int | None = None) -> TrainingSet:
    pixels = images(N_LABELLED + N_UNLABELLED, seed=1)
    ids = torch.arange(N_LABELLED + N_UNLABELLED) * 3 + 50  # as pool indices: sparse, any order would do
    keep = torch.ones(N_UNLABELLED, dtype=torch.bool)
    if drop_unlabelled is not None:
        keep[drop_unlabelled] = False
    return TrainingSet(pixels[:N_LABELLED], torch.arange(N_LABELLED) % 2, pixels[N_LABELLED:][keep], 2,
                       ids[:N_LABELLED], ids[N_LABELLED:][keep])


RATES = poisson_rates(TRAIN, N_LABELLED, N_UNLABELLED)  # (1/4, 1/8)


def private_run(data: TrainingSet, monkeypatch, seed: int = 0) -> tuple[dict, list]:
    """train_private's EMA states, and every step's PrivateBatch. The rates are held at those of
    the whole set, as the claim takes them (|d| public): the set without a record would otherwise
    be sampled at μB / (n_u − 1)."""
    batches = []

    def recorded(data, spec, _rates, augment, step_seed):
        batches.append(private_batch(data, spec, RATES, augment, step_seed))  # the library function, as imported
        return batches[-1]

    monkeypatch.setattr(semi_supervised_private, "private_batch", recorded)
    network = seeded_network(seed, "cnn", 1, 2, 4, private=True)
    kept, _ = train_private(network, data, TRAIN, PRIVATE, SPEC, seed, CPU, log=lambda _: None)
    return kept, batches



def test_private_training_is_reproducible_from_its_seed(monkeypatch):
    first, _ = private_run(training_set(), monkeypatch)
    again, _ = private_run(training_set(), monkeypatch)
    other, _ = private_run(training_set(), monkeypatch, seed=1)
    assert all(torch.equal(first[6][k], again[6][k]) for k in first[6])
    assert not torch.equal(first[6]["classifier.weight"], other[6]["classifier.weight"])


def test_removing_an_unlabelled_record_leaves_the_others_inputs_and_an_unsampled_ones_whole_training(monkeypatch):
    full = training_set()
    kept, batches = private_run(full, monkeypatch)
    sampled = torch.stack([b.sampled_unlabelled for b in batches]).any(0)
    assert sampled.any() and not sampled.all()
    ids_u = full.unlabelled_ids
    for removed in (int(sampled.nonzero()[0]), int((~sampled).nonzero()[0])):
        kept_without, batches_without = private_run(training_set(removed), monkeypatch)
        others = ids_u != ids_u[removed]
        for step, (with_r, without_r) in enumerate(zip(batches, batches_without)):
            # the same records of the others sampled, with the same views: only r's own are gone
            assert torch.equal(with_r.sampled_unlabelled[others], without_r.sampled_unlabelled), step
            assert torch.equal(with_r.sampled_labelled, without_r.sampled_labelled), step
            assert torch.equal(with_r.labelled, without_r.labelled), step
            in_batch = ids_u[with_r.sampled_unlabelled]
            not_r = in_batch != ids_u[removed]
            assert torch.equal(with_r.weak[not_r], without_r.weak), step
            assert torch.equal(with_r.strong[not_r], without_r.strong), step
        if not sampled[removed]:  # never in a batch: the training is the same, bit for bit
            assert all(torch.equal(kept[s][k], kept_without[s][k]) for s in kept for k in kept[s])
        else:  # its own gradients moved the weights
            assert not all(torch.equal(kept[6][k], kept_without[6][k]) for k in kept[6])


def test_record_ids_must_be_one_per_record_and_distinct():
    data = training_set()
    data.unlabelled_ids = data.unlabelled_ids.clone()
    data.unlabelled_ids[5] = data.unlabelled_ids[2]
    repeated = int(data.unlabelled_ids[2])
    with pytest.raises(ValueError, match=rf"unlabelled record id {repeated} is given to 2 records; allowed: distinct"):
        train_private(seeded_network(0, "cnn", 1, 2, 4, private=True), data, TRAIN, PRIVATE, SPEC, 0, CPU)
    data.labelled_ids = data.labelled_ids[:3]
    with pytest.raises(ValueError, match=r"labelled record ids of shape \(3,\) are not allowed for 8 images"):
        data.record_ids()


def test_keyed_poisson_sampling_is_at_the_accounted_rate():
    """Over many steps each record is sampled at q = B / n_l and μB / n_u (binomial test)."""
    data = training_set()
    spec = AugmentSpec(padding=0, horizontal_flip=False, ops=0, magnitude=0)
    labelled = unlabelled = 0
    steps = 400
    for step_seed in range(steps):
        batch = private_batch(data, TRAIN, RATES, spec, step_seed)
        labelled += int(batch.sampled_labelled.sum())
        unlabelled += int(batch.sampled_unlabelled.sum())
    for count, n, rate in ((labelled, N_LABELLED, RATES[0]), (unlabelled, N_UNLABELLED, RATES[1])):
        assert stats.binomtest(count, steps * n, rate).pvalue > 1e-3, (count, n, rate)
