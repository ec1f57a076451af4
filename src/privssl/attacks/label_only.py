"""Label-only membership inference (seed 003 Ch. 4 after Choquette-Choo et al., ICML 2021).

He & Zhang ("Quantifying and mitigating privacy risks of contrastive learning") include the
label-only attacks of Choquette-Choo et al.: the target model exposes only its predicted label,
and members are told apart by how much the input must change before that label changes.
Two scores per query, higher = more likely a member (thresholds as in `privssl.attacks.mia`):

* augmentation: the fraction of translated copies of an image still predicted as its true
  label (a model is more robust around the images it was trained on);
* boundary distance: the L2 distance to the decision boundary, found black-box by bisection
  along random directions. Choquette-Choo et al. use HopSkipJump; a few random directions keep
  the query budget (and CPU time) small at the price of a looser estimate: the score is an
  upper bound of the true distance, never below it.

`predict_labels` maps a float image batch (M, C, H, W) in [0, 1] to predicted labels (M,); it
is called on at most `chunk` images at a time to bound memory, and never needs gradients.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

LabelPredictor = Callable[[torch.Tensor], torch.Tensor]


def _check_images(images: torch.Tensor) -> None:
    if images.ndim != 4 or not images.is_floating_point() or images.shape[0] == 0:
        raise ValueError(f"images must be a non-empty float tensor (N, C, H, W), got {images.dtype} of shape "
                         f"{tuple(images.shape)}")


def _check_labels(images: torch.Tensor, labels: torch.Tensor, models: bool = False) -> None:
    """labels (N,), one per image; with `models`, (K, N) too: the labels of K models' tasks."""
    if labels.shape != images.shape[:1] and not (models and labels.ndim == 2 and labels.shape[1:] == images.shape[:1]):
        allowed = f"({images.shape[0]},) (one per image)" + (f" or (K, {images.shape[0]}) (K models)" if models else "")
        raise ValueError(f"labels must have shape {allowed}, got {tuple(labels.shape)}")


def _check_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _check_radius(images: torch.Tensor, radius: int) -> None:
    side = min(images.shape[-2:])
    if isinstance(radius, bool) or not isinstance(radius, int) or not 0 <= radius < side:
        raise ValueError(f"radius must be an integer in [0, {side}) (below the image side), got {radius!r}")


def _predict(predict_labels: LabelPredictor, images: torch.Tensor, chunk: int) -> torch.Tensor:
    """Predicted labels (..., M) of images (M, C, H, W), queried `chunk` images at a time: (M,)
    from one model, (K, M) from a predictor of K models."""
    predictions = []
    for start in range(0, images.shape[0], chunk):
        batch = images[start:start + chunk]
        predicted = predict_labels(batch)
        if predicted.shape[-1:] != batch.shape[:1] or predicted.ndim > 2:
            raise ValueError(f"predict_labels must return one label per image, shape ({batch.shape[0]},) or "
                             f"(K, {batch.shape[0]}), got {tuple(predicted.shape)}")
        predictions.append(predicted)
    # No queries at all (every pair already settled) is an empty answer, not an error.
    return torch.cat(predictions, -1) if predictions else torch.zeros(0, dtype=torch.long)


def translations(images: torch.Tensor, radius: int) -> torch.Tensor:
    """Every shift of images (N, C, H, W) by dx, dy in [-radius, radius] pixels: (V, N, C, H, W).

    V = (2 radius + 1)²; view (dx + radius)(2 radius + 1) + (dy + radius) moves pixel (row i,
    column j) to (i + dy, j + dx), so the identity is the middle view. Pixels shifted in are 0.
    """
    _check_images(images)
    _check_radius(images, radius)
    height, width = images.shape[-2:]
    padded = F.pad(images, (radius, radius, radius, radius))
    # view[i, j] = image[i − dy, j − dx] = padded[i − dy + radius, j − dx + radius]
    views = [padded[..., radius - dy:radius - dy + height, radius - dx:radius - dx + width]
             for dx in range(-radius, radius + 1) for dy in range(-radius, radius + 1)]
    return torch.stack(views)


@torch.no_grad()  # label queries only: no graph is ever needed
def augmentation_scores(predict_labels: LabelPredictor, images: torch.Tensor, labels: torch.Tensor, radius: int,
                        chunk: int = 4096) -> torch.Tensor:
    """Augmentation attack: the fraction (N,) of each image's translations (`translations`)
    predicted as its true label, in float64. With labels (K, N) and a predictor of K models
    returning (K, M), the K models' scores (K, N) from one pass over the views: models sharing an
    encoder (a contrastive model's task and membership-task layers) then encode each view once."""
    _check_images(images)
    _check_labels(images, labels, models=True)
    _check_radius(images, radius)
    _check_positive("chunk", chunk)
    n_views = (2 * radius + 1) ** 2
    # Blocks of images whose views fill about one chunk, so the views held at once stay bounded.
    block = max(1, chunk // n_views)
    scores = []
    for start in range(0, images.shape[0], block):
        views = translations(images[start:start + block], radius)
        predicted = _predict(predict_labels, views.flatten(0, 1), chunk)
        if predicted.shape[:-1] != labels.shape[:-1]:
            raise ValueError(f"predict_labels answered for {tuple(predicted.shape[:-1]) or 'one'} model(s), the labels "
                             f"are of {tuple(labels.shape[:-1]) or 'one'}: allowed: one label row per model")
        predicted = predicted.unflatten(-1, (n_views, -1))  # (..., V, block)
        scores.append((predicted == labels[..., None, start:start + block]).double().mean(-2))
    return torch.cat(scores, -1)


@torch.no_grad()
def boundary_distance_scores(predict_labels: LabelPredictor, images: torch.Tensor, labels: torch.Tensor,
                             directions: int, steps: int, seed: int, chunk: int = 4096) -> torch.Tensor:
    """Boundary-distance attack: an upper bound (N,) on each image's L2 distance to the decision
    boundary, in float64, from label queries only.

    Along `directions` random unit directions per image (Gaussian normalised over C·H·W, drawn
    from `seed` image after image, so independent of `chunk`) bisection (`steps` halvings of
    [0, r_max], r_max = √(C·H·W) the diameter of the unit cube) finds the smallest radius at which
    the predicted label differs from the true one (to within r_max / 2^steps where the label
    changes once along the ray; a radius with a changed label in any case); a direction whose
    label does not change even at r_max gives r_max. The score is the smallest over directions.
    Perturbed images are clipped to [0, 1]: a projection onto a box containing the image, so a
    perturbed image is no farther than its radius and the score stays an upper bound of the true
    distance. Random directions replace Choquette-Choo et al.'s HopSkipJump to keep the query
    budget (and CPU time) small. Images predicted wrongly unperturbed score 0, as in
    Choquette-Choo et al. (they are already across the boundary).
    """
    _check_images(images)
    _check_labels(images, labels)
    for name, value in (("directions", directions), ("steps", steps), ("chunk", chunk)):
        _check_positive(name, value)
    generator = torch.Generator().manual_seed(seed)
    # Blocks of images whose (image, direction) pairs fill about one chunk of queries per step.
    block = max(1, chunk // directions)
    scores = [_block_distances(predict_labels, images[start:start + block], labels[start:start + block],
                               directions, steps, generator, chunk)
              for start in range(0, images.shape[0], block)]
    return torch.cat(scores)


def _block_distances(predict_labels: LabelPredictor, images: torch.Tensor, labels: torch.Tensor, directions: int,
                     steps: int, generator: torch.Generator, chunk: int) -> torch.Tensor:
    """`boundary_distance_scores` of one block of images, drawing its directions from `generator`."""
    n_images, dim = images.shape[0], images[0].numel()
    r_max = math.sqrt(dim)
    # One draw per image in order: the stream, hence each image's directions, ignore the blocking.
    noise = torch.stack([torch.randn(directions, dim, generator=generator, dtype=images.dtype)
                         for _ in range(n_images)])
    unit = (noise / noise.norm(dim=-1, keepdim=True)).view(n_images, directions, *images.shape[1:])
    correct = _predict(predict_labels, images, chunk) == labels

    def flips(pairs: torch.Tensor, radii: torch.Tensor) -> torch.Tensor:
        """Whether image pairs[:, 0] moved by radii along its direction pairs[:, 1] changes label."""
        moved = images[pairs[:, 0]] + radii.to(images.dtype).view(-1, 1, 1, 1) * unit[pairs[:, 0], pairs[:, 1]]
        return _predict(predict_labels, moved.clamp(0, 1), chunk) != labels[pairs[:, 0]]

    hi = torch.full((n_images, directions), r_max, dtype=torch.float64)
    # Only correctly predicted images, along directions that change the label by r_max, need bisection.
    pairs = torch.cartesian_prod(torch.nonzero(correct).view(-1), torch.arange(directions)).view(-1, 2)
    pairs = pairs[flips(pairs, hi[pairs[:, 0], pairs[:, 1]])]
    lo = torch.zeros(pairs.shape[0], dtype=torch.float64)
    for _ in range(steps):
        # A pair whose lower end has reached its image's smallest upper end over every direction
        # cannot lower the score (a minimum over directions): its queries stop (issue 50). The
        # score is the same bit for bit where the predictor labels an image alike in any batch
        # (the workflow's networks do: benchmarks/inference_batch.py); the batches are smaller now
        best = hi.min(dim=1).values
        going = lo < best[pairs[:, 0]]
        pairs, lo = pairs[going], lo[going]
        if not len(pairs):
            break
        upper = hi[pairs[:, 0], pairs[:, 1]]
        mid = (lo + upper) / 2
        changed = flips(pairs, mid)
        hi[pairs[:, 0], pairs[:, 1]] = torch.where(changed, mid, upper)
        lo = torch.where(changed, lo, mid)
    return torch.where(correct, hi.min(dim=1).values, 0.0)
