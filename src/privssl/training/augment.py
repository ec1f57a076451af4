"""The weak and strong augmentations of FixMatch, FlexMatch and UDA (thesis §3.7.1), batched.

weak: random crop after reflect padding (FixMatch pads 4 pixels of 32, 1/8 of the side), and a
random horizontal flip unless the dataset turns flips off (a flipped digit is another digit);
strong: the weak augmentation followed by torchvision's RandAugment (N ops of magnitude M; the
thesis: N = 2, M = 10), drawn per image: RandAugment on a batch tensor would apply one draw of
operations to the whole batch. Images are float tensors in [0, 1], (N, C, H, W); RandAugment runs
on their uint8 form, as on the PIL images the reference implementations augment.
"""

from __future__ import annotations

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


def weak(images: torch.Tensor, spec: AugmentSpec, generator: torch.Generator) -> torch.Tensor:
    """A random crop of each padded image back to its size, and a random flip (if allowed)."""
    n, _, height, width = images.shape
    p = spec.padding
    shifted = images
    if p:
        padded = F.pad(images, (p, p, p, p), mode="reflect")
        dy = torch.randint(0, 2 * p + 1, (n,), generator=generator)
        dx = torch.randint(0, 2 * p + 1, (n,), generator=generator)
        rows = (dy[:, None] + torch.arange(height)[None]).to(images.device)  # (n, H)
        cols = (dx[:, None] + torch.arange(width)[None]).to(images.device)  # (n, W)
        batch = torch.arange(n, device=images.device)[:, None, None]
        # advanced indexing over (image, row, column), channels kept: (n, H, W, C) -> (n, C, H, W)
        shifted = padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)
    if spec.horizontal_flip:
        flip = (torch.rand(n, generator=generator) < 0.5).to(images.device)
        shifted = torch.where(flip[:, None, None, None], shifted.flip(-1), shifted)
    return shifted.contiguous()


def strong(images: torch.Tensor, spec: AugmentSpec, generator: torch.Generator) -> torch.Tensor:
    """weak, then RandAugment(N, M) with its own draw of operations per image, or per group of
    spec.images_per_draw consecutive images: one call on a group costs little more than on one
    image of 8×8, and each image's view is still a RandAugment view (only images of one group
    share their operations). torchvision draws them from torch's global generator: it is seeded
    from `generator` first, so a seed gives the same views."""
    from torchvision.transforms import v2

    out = weak(images, spec, generator)
    if spec.ops == 0 or not len(out):  # no operation, or an empty Poisson batch of DP-SGD
        return out
    randaugment = v2.RandAugment(num_ops=spec.ops, magnitude=spec.magnitude)
    as_bytes = (out.clamp(0, 1) * 255).round().to(torch.uint8).cpu()
    state = torch.random.get_rng_state()
    torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
    try:
        group = spec.images_per_draw
        augmented = torch.cat([randaugment(as_bytes[i:i + group]) for i in range(0, len(as_bytes), group)])
    finally:
        torch.random.set_rng_state(state)  # the caller's global stream is left as it was
    return (augmented.float() / 255).to(images.device)
