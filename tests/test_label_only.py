"""Label-only membership inference: translations, the augmentation attack and the boundary-distance attack."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from privssl.attacks.label_only import augmentation_scores, boundary_distance_scores, translations
from privssl.attacks.statistics import auc


def shifted(image: torch.Tensor, dx: int, dy: int) -> torch.Tensor:
    """Reference shift by rolling, then blanking the rows/columns that wrapped around."""
    out = torch.roll(image, shifts=(dy, dx), dims=(-2, -1))
    if dy > 0:
        out[..., :dy, :] = 0
    elif dy < 0:
        out[..., dy:, :] = 0
    if dx > 0:
        out[..., :, :dx] = 0
    elif dx < 0:
        out[..., :, dx:] = 0
    return out


def linear_predictor(n_classes: int, shape: tuple[int, ...], seed: int):
    """Labels from a fixed random linear map of the pixels: sensitive to every shift."""
    weights = torch.randn(n_classes, math.prod(shape), generator=torch.Generator().manual_seed(seed))
    return lambda batch: (batch.flatten(1) @ weights.T).argmax(1)


def test_translations_shapes_identity_and_shift():
    images = torch.rand(2, 3, 5, 6, generator=torch.Generator().manual_seed(0))
    views = translations(images, 1)
    assert views.shape == (9, 2, 3, 5, 6)
    assert torch.equal(views[4], images)  # (dx, dy) = (0, 0) is the middle view
    expected = torch.zeros_like(images)
    expected[..., :, 1:] = images[..., :, :-1]  # (dx, dy) = (1, 0): one column right, zero column in
    assert torch.equal(views[(1 + 1) * 3 + (0 + 1)], expected)
    assert torch.equal(translations(images, 0), images[None])


def test_translations_follow_the_documented_order():
    images = torch.rand(2, 1, 5, 5, generator=torch.Generator().manual_seed(1))
    views = translations(images, 2)
    order = [(dx, dy) for dx in range(-2, 3) for dy in range(-2, 3)]
    for view, (dx, dy) in zip(views, order, strict=True):
        assert torch.equal(view, shifted(images, dx, dy)), (dx, dy)


@pytest.mark.parametrize("radius", [-1, 5, 1.5, True])
def test_translations_reject_bad_radius(radius):
    with pytest.raises(ValueError, match="radius"):
        translations(torch.rand(1, 1, 5, 6), radius)


def test_augmentation_scores_match_per_image_loop():
    generator = torch.Generator().manual_seed(2)
    images = torch.rand(7, 2, 5, 5, generator=generator)
    labels = torch.randint(0, 3, (7,), generator=generator)
    predict = linear_predictor(3, (2, 5, 5), seed=3)
    radius = 2
    expected = []
    for image, label in zip(images, labels, strict=True):
        hits = [int(predict(shifted(image, dx, dy)[None])[0] == label)
                for dx in range(-radius, radius + 1) for dy in range(-radius, radius + 1)]
        expected.append(sum(hits) / len(hits))
    scores = augmentation_scores(predict, images, labels, radius)
    assert scores.dtype == torch.float64
    assert scores.tolist() == pytest.approx(expected, abs=1e-12)
    assert 0 < scores.min() < scores.max() < 1  # the example is not degenerate
    for chunk in (1, 7, 30):
        assert torch.equal(augmentation_scores(predict, images, labels, radius, chunk=chunk), scores)


def test_augmentation_scores_of_k_models_are_each_models_own_scores():
    """A predictor of K models answering (K, M) at once gives each model the scores it gets alone,
    with its own labels: the rows are neither swapped nor mixed."""
    generator = torch.Generator().manual_seed(5)
    images = torch.rand(9, 1, 5, 5, generator=generator)
    models = [linear_predictor(3, (1, 5, 5), seed) for seed in (6, 7)]
    labels = torch.randint(0, 3, (2, 9), generator=generator)
    joint = augmentation_scores(lambda batch: torch.stack([model(batch) for model in models]), images, labels, 1,
                                chunk=10)
    assert joint.shape == (2, 9)
    for k, model in enumerate(models):
        assert torch.equal(joint[k], augmentation_scores(model, images, labels[k], 1))
    assert not torch.equal(joint[0], joint[1])
    with pytest.raises(ValueError, match="one label row per model"):
        augmentation_scores(models[0], images, labels, 1)
    with pytest.raises(ValueError, match=r"\(K, 9\)"):
        augmentation_scores(models[0], images, labels[:, :5], 1)


def test_attacks_query_at_most_chunk_images_without_gradients():
    sizes = []
    predict = linear_predictor(2, (1, 4, 4), seed=4)

    def recording(batch):
        assert not torch.is_grad_enabled()
        sizes.append(batch.shape[0])
        return predict(batch)

    images = torch.rand(5, 1, 4, 4).requires_grad_()
    labels = predict(images.detach())
    augmentation_scores(recording, images, labels, 1, chunk=4)
    assert max(sizes) == 4 and sum(sizes) == 5 * 9
    sizes.clear()
    # More directions than the chunk: one image at a time, its 10 (image, direction) queries split 4 + 4 + 2.
    boundary_distance_scores(recording, images, labels, directions=10, steps=2, seed=0, chunk=4)
    assert sizes[:4] == [1, 4, 4, 2] and max(sizes) == 4


def mean_threshold(batch: torch.Tensor) -> torch.Tensor:
    """Label 1 iff the mean pixel exceeds ½: a hyperplane with a known distance."""
    return (batch.mean((1, 2, 3)) > 0.5).long()


def hyperplane_example() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Images 1×4×4 with pixels in [0.3, 0.5] (label 0) or [0.5, 0.7] (label 1) and their exact L2
    distance |mean − ½|·√16 to the boundary: the nearest boundary point moves every pixel by
    |mean − ½| and stays in [0, 1], so clipping does not change it."""
    generator = torch.Generator().manual_seed(5)
    low = 0.3 + 0.2 * torch.rand(10, 1, 4, 4, generator=generator)
    images = torch.cat([low, low + 0.2])
    labels = mean_threshold(images)
    assert labels.tolist() == [0] * 10 + [1] * 10
    exact = (images.double().mean((1, 2, 3)) - 0.5).abs() * 4
    return images, labels, exact


def test_boundary_distance_bounds_exact_hyperplane_distance():
    images, labels, exact = hyperplane_example()
    scores = boundary_distance_scores(mean_threshold, images, labels, directions=200, steps=20, seed=0)
    assert scores.dtype == torch.float64
    assert (scores >= exact - 1e-5).all()  # an upper bound (up to float32 rounding of the queries)
    assert (scores <= 3 * exact).all()  # many directions: one comes within a modest angle of the normal
    few = boundary_distance_scores(mean_threshold, images, labels, directions=2, steps=20, seed=0)
    assert (few >= scores - 1e-12).all() and (few > scores).any()  # fewer directions: looser bound


def test_boundary_distance_wrong_predictions_score_zero():
    images, labels, _ = hyperplane_example()
    scores = boundary_distance_scores(mean_threshold, images, labels, directions=5, steps=10, seed=0)
    wrong = torch.arange(20) % 3 == 0
    flipped = boundary_distance_scores(mean_threshold, images, torch.where(wrong, 1 - labels, labels),
                                       directions=5, steps=10, seed=0)
    assert (flipped[wrong] == 0).all()
    assert torch.equal(flipped[~wrong], scores[~wrong]) and (scores > 0).all()


def test_boundary_distance_no_label_change_gives_diameter():
    images = torch.rand(4, 3, 2, 2)
    constant = boundary_distance_scores(lambda batch: torch.zeros(batch.shape[0], dtype=torch.long), images,
                                        torch.zeros(4, dtype=torch.long), directions=3, steps=5, seed=0)
    assert constant.tolist() == pytest.approx([math.sqrt(12)] * 4)


def test_boundary_distance_reproducible_and_independent_of_chunk():
    images, labels, _ = hyperplane_example()
    kwargs = {"directions": 6, "steps": 12}
    scores = boundary_distance_scores(mean_threshold, images, labels, seed=7, **kwargs)
    assert torch.equal(boundary_distance_scores(mean_threshold, images, labels, seed=7, **kwargs), scores)
    for chunk in (1, 5, 13):
        assert torch.equal(boundary_distance_scores(mean_threshold, images, labels, seed=7, chunk=chunk, **kwargs),
                           scores)
    assert not torch.equal(boundary_distance_scores(mean_threshold, images, labels, seed=8, **kwargs), scores)


def bisection_reference(predict, images: torch.Tensor, labels: torch.Tensor, directions: int, steps: int,
                        seed: int) -> tuple[torch.Tensor, int]:
    """The boundary attack as its docstring states it, one image and one direction at a time, every
    direction bisected to the end: (scores, images queried)."""
    generator = torch.Generator().manual_seed(seed)
    r_max, queries, scores = math.sqrt(images[0].numel()), 0, []
    for image, label in zip(images, labels):
        noise = torch.randn(directions, image.numel(), generator=generator, dtype=image.dtype)
        units = (noise / noise.norm(dim=-1, keepdim=True)).view(directions, *image.shape)

        def flips(unit, radius):
            nonlocal queries
            queries += 1
            moved = image + torch.tensor(radius, dtype=torch.float64).to(image.dtype) * unit
            return bool(predict(moved.clamp(0, 1)[None])[0] != label)

        queries += 1
        if predict(image[None])[0] != label:
            scores.append(0.0)
            continue
        best = r_max
        for unit in units:
            if not flips(unit, r_max):
                continue
            lo, hi = 0.0, r_max
            for _ in range(steps):
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if flips(unit, mid) else (mid, hi)
            best = min(best, hi)
        scores.append(best)
    return torch.tensor(scores, dtype=torch.float64), queries


def test_boundary_distance_is_the_bisection_of_every_direction_with_fewer_queries():
    """The same scores, bit for bit, as bisecting every direction to the end (a pair stops once it
    can no longer lower its image's minimum), from fewer label queries."""
    images = smooth_images(40, torch.Generator().manual_seed(3))
    predict = linear_predictor(3, tuple(images.shape[1:]), 11)
    labels = predict(images)
    labels[::7] = (labels[::7] + 1) % 3  # some wrongly predicted images, which score 0
    queried = 0

    def counting(batch):
        nonlocal queried
        queried += len(batch)
        return predict(batch)

    scores = boundary_distance_scores(counting, images, labels, directions=5, steps=8, seed=2)
    reference, reference_queries = bisection_reference(predict, images, labels, 5, 8, 2)
    assert torch.equal(scores, reference)
    assert (scores > 0).sum() > 20 and len(set(scores.tolist())) > 20
    assert queried < 0.8 * reference_queries, (queried, reference_queries)


@pytest.mark.parametrize("name", ["directions", "steps", "chunk"])
def test_boundary_distance_rejects_bad_counts(name):
    kwargs = {"directions": 2, "steps": 2, "seed": 0, name: 0}
    with pytest.raises(ValueError, match=name):
        boundary_distance_scores(mean_threshold, torch.rand(2, 1, 3, 3), torch.zeros(2, dtype=torch.long), **kwargs)


def test_attacks_reject_mismatched_labels():
    images = torch.rand(3, 1, 4, 4)
    with pytest.raises(ValueError, match="labels"):
        augmentation_scores(mean_threshold, images, torch.zeros(2, dtype=torch.long), 1)
    with pytest.raises(ValueError, match="labels"):
        boundary_distance_scores(mean_threshold, images, torch.zeros(3, 1, dtype=torch.long), 2, 2, 0)


def smooth_images(n: int, generator: torch.Generator) -> torch.Tensor:
    """Random 1×8×8 images upsampled from 4×4 noise, so that a one-pixel shift keeps most content."""
    return F.interpolate(torch.rand(n, 1, 4, 4, generator=generator), size=(8, 8), mode="bilinear",
                         align_corners=False)


def test_label_only_attacks_beat_chance_on_overfitted_model():
    generator = torch.Generator().manual_seed(0)
    members, nonmembers = smooth_images(100, generator), smooth_images(100, generator)
    member_labels = torch.randint(0, 10, (100,), generator=generator)
    nonmember_labels = torch.randint(0, 10, (100,), generator=generator)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(300):  # full batch: the random labels can only be memorised
        loss = F.cross_entropy(model(members), member_labels)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()

    def predict(batch):
        return model(batch).argmax(1)

    with torch.no_grad():
        assert (predict(members) == member_labels).all()
    images, labels = torch.cat([members, nonmembers]), torch.cat([member_labels, nonmember_labels])
    is_member = (torch.arange(200) < 100).numpy()
    augmentation = augmentation_scores(predict, images, labels, radius=1)
    boundary = boundary_distance_scores(predict, images, labels, directions=10, steps=10, seed=0)
    assert auc(augmentation.numpy(), is_member) > 0.7
    assert auc(boundary.numpy(), is_member) > 0.8
