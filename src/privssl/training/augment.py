"""The weak and strong augmentations of FixMatch, FlexMatch and UDA (thesis §3.7.1), batched.

weak: random crop after reflect padding (FixMatch pads 4 pixels of 32, 1/8 of the side), and a
random horizontal flip unless the dataset turns flips off (a flipped digit is another digit);
strong: the weak augmentation followed by torchvision's RandAugment (N ops of magnitude M; the
thesis: N = 2, M = 10), drawn per image: RandAugment on a batch tensor would apply one draw of
operations to the whole batch. Images are float tensors in [0, 1], (N, C, H, W); RandAugment runs
on their uint8 form, as on the PIL images the reference implementations augment.

Two forms. `weak` and `strong` draw from a generator in the order of the batch: an image's view
depends on its position, and with `images_per_draw` > 1 consecutive images share RandAugment's
operations. `weak_keyed` and `strong_keyed`, for DP-SGD, make every random choice of a record's
views a function of (a step seed, that record's identity) alone (see the section below).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class AugmentSpec:
    padding: int  # pixels of reflect padding before the random crop
    horizontal_flip: bool
    ops: int  # RandAugment's N
    magnitude: int  # RandAugment's M (of its 31 levels)
    images_per_draw: int = 1  # images that share one draw of RandAugment's operations (1: every image its own)

    def __post_init__(self) -> None:
        for name, low in (("padding", 0), ("ops", 0), ("magnitude", 0), ("images_per_draw", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"augmentation {name} = {value!r} is not allowed; allowed: an integer >= {low}")
        if self.magnitude > 30:
            raise ValueError(f"augmentation magnitude = {self.magnitude} is not allowed; allowed: 0 .. 30 "
                             "(RandAugment's 31 levels)")

    @classmethod
    def from_config(cls, cfg: dict) -> "AugmentSpec":
        randaugment = cfg["randaugment"]
        return cls(cfg["padding"], bool(cfg["horizontal_flip"]), randaugment["ops"], randaugment["magnitude"],
                   randaugment.get("images_per_draw", 1))


def _crop_and_flip(images: torch.Tensor, spec: AugmentSpec, dy: torch.Tensor | None, dx: torch.Tensor | None,
                   flip: torch.Tensor | None) -> torch.Tensor:
    """Each padded image cropped back to its size at offset (dy, dx) in 0 .. 2p, and mirrored where
    `flip` is set (None: that choice is not made)."""
    n, _, height, width = images.shape
    p = spec.padding
    shifted = images
    if p:
        padded = F.pad(images, (p, p, p, p), mode="reflect")
        rows = (dy[:, None] + torch.arange(height)[None]).to(images.device)  # (n, H)
        cols = (dx[:, None] + torch.arange(width)[None]).to(images.device)  # (n, W)
        batch = torch.arange(n, device=images.device)[:, None, None]
        # advanced indexing over (image, row, column), channels kept: (n, H, W, C) -> (n, C, H, W)
        shifted = padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)
    if flip is not None:
        shifted = torch.where(flip.to(images.device)[:, None, None, None], shifted.flip(-1), shifted)
    return standard_layout(shifted)


def standard_layout(images: torch.Tensor) -> torch.Tensor:
    """The batch with the standard (N, C, H, W) strides. `.contiguous()` is not enough: a
    single-channel batch gathered through the permute above passes it with channels_last strides
    (a size-1 dimension's stride is never checked), every convolution then keeps that layout, and
    the CPU's GroupNorm runs about 20x slower in it: 400 steps of the Fashion-MNIST preset's
    FixMatch took 25 s instead of 16 s (docs/benchmarks.md, issue 50)."""
    standard, step = [], 1
    for size in reversed(images.shape):
        standard.insert(0, step)
        step *= size
    return images if list(images.stride()) == standard else images.clone(memory_format=torch.contiguous_format)


def weak(images: torch.Tensor, spec: AugmentSpec, generator: torch.Generator) -> torch.Tensor:
    """A random crop of each padded image back to its size, and a random flip (if allowed)."""
    n, p = len(images), spec.padding
    dy = torch.randint(0, 2 * p + 1, (n,), generator=generator) if p else None
    dx = torch.randint(0, 2 * p + 1, (n,), generator=generator) if p else None
    flip = torch.rand(n, generator=generator) < 0.5 if spec.horizontal_flip else None
    return _crop_and_flip(images, spec, dy, dx, flip)


def _randaugment(spec: AugmentSpec):
    from torchvision.transforms import v2  # here only: torchvision's import takes a while

    return v2.RandAugment(num_ops=spec.ops, magnitude=spec.magnitude)


def _as_bytes(images: torch.Tensor) -> torch.Tensor:
    return (images.clamp(0, 1) * 255).round().to(torch.uint8).cpu()


def strong(images: torch.Tensor, spec: AugmentSpec, generator: torch.Generator) -> torch.Tensor:
    """weak, then RandAugment(N, M) with its own draw of operations per image, or per group of
    spec.images_per_draw consecutive images: one call on a group costs little more than on one
    image of 8×8, and each image's view is still a RandAugment view (only images of one group
    share their operations). torchvision draws them from torch's global generator: it is seeded
    from `generator` first, so a seed gives the same views."""
    out = weak(images, spec, generator)
    if spec.ops == 0 or not len(out):  # no operation, or an empty batch
        return out
    randaugment = _randaugment(spec)
    as_bytes = _as_bytes(out)
    state = torch.random.get_rng_state()
    torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
    try:
        group = spec.images_per_draw
        augmented = torch.cat([randaugment(as_bytes[i:i + group]) for i in range(0, len(as_bytes), group)])
    finally:
        torch.random.set_rng_state(state)  # the caller's global stream is left as it was
    return (augmented.float() / 255).to(images.device)


# ----------------------------------------------------------------- keyed to the record (DP-SGD)
#
# DP-SGD's guarantee for add/remove of one record x rests on: the noisy sum with x is the sum
# without x plus x's clipped gradient (norm ≤ C), and every other record's gradient is the same
# random variable whether x is there or not. Drawing views in batch order breaks the second half:
# x's presence shifts the draws (crop offsets, flips, RandAugment seeds) of every record after it,
# and with images_per_draw > 1 it changes which records share RandAugment's operations, so it
# changes the joint distribution of the other records' views (two records with one image share an
# identical view whenever they fall in one group of consecutive images, and x moves the groups).
# Here every choice about record j's views is a counter-based hash of (step seed, salt, choice, j):
# the step seed is drawn from the run's generator, independently of the data; the salt tells the
# views of one record apart (labelled weak, unlabelled weak, unlabelled strong). Conditioned on the
# step seed, a record's view depends on that record alone, so removing x leaves every other
# record's view unchanged, bit for bit. The identity j must be fixed for the record whatever else
# is in the data set (an index into the dataset's pool, not a position in the training set, which
# a removed record before j would shift).
#
# RandAugment's operations are drawn from torch's global generator, once per call, and a call on a
# batch applies them to each image on its own: every operation is per image and what the call
# draws does not depend on the batch's size (checked on torchvision 0.29 for each of its 14
# operations at each of the 31 levels and both signs, 1 and 3 channels;
# tests/test_private_augmentation.py checks it again on 600 draws). So records may still share a
# draw, as `strong` lets images_per_draw images share one: the records of one *group* share the
# operations, a group being a function of (step seed, record) alone, and the global generator is
# seeded from hash(step seed, group) before the group's call. A fixed group per record (id //
# images_per_draw) would keep the same records together at every step and, with sparse ids (pool
# indices), leave most groups with one sampled record, one call each; a group drawn per step from
# ⌈expected batch / images_per_draw⌉ keeps `strong`'s number of calls and changes the partners.

_MASK32 = 0xFFFFFFFF
_ROW, _COLUMN, _FLIP, _GROUP, _SEED_HIGH, _SEED_LOW = range(6)  # the choices, each its own hash


def _mul32(x, constant: int):
    """x · constant mod 2³² for words x in [0, 2³²): the products of 16-bit halves stay below 2⁴⁹,
    so int64 never overflows (signed overflow is undefined) and Python ints give the same words."""
    low, high = x & 0xFFFF, x >> 16
    return (low * constant + (((high * constant) & 0xFFFF) << 16)) & _MASK32


def _mix32(x):
    """Wellons' lowbias32: a bijection of 32-bit words in which every input bit flips every output
    bit with probability close to 1/2 (tensor or Python int)."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def _check_word(name: str, value, bits: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**bits:
        raise ValueError(f"{name} = {value!r} is not allowed; allowed: an integer in [0, 2^{bits})")


def keyed_hash(step_seed: int, salt: int, choice: int, keys: torch.Tensor) -> torch.Tensor:
    """One pseudo-random 32-bit word (int64) per key in [0, 2³²): a function of (step seed, salt,
    choice, that key) only, so neither the other keys nor their order matter."""
    _check_word("step seed", step_seed, 64)
    _check_word("salt", salt, 32)
    if keys.dtype.is_floating_point or keys.dtype.is_complex or keys.dtype == torch.bool or keys.ndim != 1:
        raise ValueError(f"keys of dtype {keys.dtype} and shape {tuple(keys.shape)} are not allowed; allowed: "
                         "a 1-D integer tensor")
    keys = keys.to(torch.int64)
    if len(keys) and (int(keys.min()) < 0 or int(keys.max()) > _MASK32):
        raise ValueError(f"keys from {int(keys.min())} to {int(keys.max())} are not allowed; allowed: "
                         "integers in [0, 2^32)")
    prefix = _mix32(_mix32(_mix32(_mix32(step_seed & _MASK32) ^ (step_seed >> 32)) ^ salt) ^ choice)
    return _mix32(_mix32(keys ^ prefix) ^ prefix)


def _check_ids(images: torch.Tensor, ids: torch.Tensor) -> None:
    if ids.ndim != 1 or len(ids) != len(images):
        raise ValueError(f"record ids of shape {tuple(ids.shape)} are not allowed for {len(images)} images; "
                         "allowed: one id per image")


def weak_keyed(images: torch.Tensor, ids: torch.Tensor, spec: AugmentSpec, step_seed: int,
               salt: int) -> torch.Tensor:
    """`weak` with the crop offsets and flip of the record with id j drawn from hash(step seed,
    salt, j): the view of each record is the same whatever else is in the batch, and where."""
    _check_ids(images, ids)
    p = spec.padding
    dy = keyed_hash(step_seed, salt, _ROW, ids) % (2 * p + 1) if p else None
    dx = keyed_hash(step_seed, salt, _COLUMN, ids) % (2 * p + 1) if p else None
    flip = keyed_hash(step_seed, salt, _FLIP, ids) >> 31 == 1 if spec.horizontal_flip else None
    return _crop_and_flip(images, spec, dy, dx, flip)


def randaugment_groups(ids: torch.Tensor, spec: AugmentSpec, step_seed: int, salt: int,
                       expected_batch: float) -> torch.Tensor:
    """The group of each record, whose members share one draw of RandAugment's operations at this
    step: the record itself when spec.images_per_draw is 1; otherwise one of
    ⌈expected_batch / images_per_draw⌉ groups, by hash(step seed, salt, id), so a batch of the
    expected size puts images_per_draw records in a group on average (the number of calls, and so
    the cost, of `strong`), and the records that share change from step to step. `expected_batch`
    (μB for DP-SGD's Poisson batches) must not be read from the data."""
    if not (isinstance(expected_batch, (int, float)) and math.isfinite(expected_batch) and expected_batch > 0):
        raise ValueError(f"expected batch = {expected_batch!r} is not allowed; allowed: a finite number > 0")
    if spec.images_per_draw == 1:
        return ids.to(torch.int64)
    return keyed_hash(step_seed, salt, _GROUP, ids) % math.ceil(expected_batch / spec.images_per_draw)


def strong_keyed(images: torch.Tensor, ids: torch.Tensor, spec: AugmentSpec, step_seed: int, salt: int,
                 expected_batch: float) -> torch.Tensor:
    """`weak_keyed`, then RandAugment(N, M) with the operations of each record's group
    (`randaugment_groups`) drawn from torch's global generator seeded from hash(step seed, salt,
    group): a record's view depends on (step seed, salt, its id, its image) alone. The caller's
    global generator state is restored afterwards."""
    out = weak_keyed(images, ids, spec, step_seed, salt)
    groups = randaugment_groups(ids, spec, step_seed, salt, expected_batch)
    if spec.ops == 0 or not len(out):  # no operation, or an empty Poisson batch
        return out
    randaugment = _randaugment(spec)
    as_bytes = _as_bytes(out)
    keys = torch.unique(groups)
    seeds = ((keyed_hash(step_seed, salt, _SEED_HIGH, keys) >> 1) << 32 | keyed_hash(step_seed, salt, _SEED_LOW, keys))
    augmented = torch.empty_like(as_bytes)
    state = torch.random.get_rng_state()
    try:
        for key, seed in zip(keys.tolist(), seeds.tolist()):
            members = groups == key
            # the CPU generator alone, which RandAugment reads on these CPU tensors (torch.manual_seed
            # would reseed every device's, at 70 times the cost)
            torch.default_generator.manual_seed(seed)
            augmented[members] = randaugment(as_bytes[members])
    finally:
        torch.random.set_rng_state(state)  # the caller's global stream is left as it was
    return (augmented.float() / 255).to(images.device)
