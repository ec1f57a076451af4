"""The classifiers of the semi-supervised branch: WRN-28-k (Zagoruyko & Komodakis 2016) as FixMatch
and the thesis use it (WRN-28-2, §3.4.1), and a small CNN for the CPU default.

WRN-28-k follows FixMatch's reference network: 3 groups of 4 pre-activation basic blocks of widths
16k, 32k, 64k, leaky ReLU (0.1), BatchNorm with momentum 0.001, global average pooling. DP-SGD needs
per-example gradients, which BatchNorm's batch statistics couple (privssl.training.per_example):
`norm="group"` swaps it for GroupNorm, as Opacus' ModuleValidator.fix does. The small CNN has no
GroupNorm only, so it trains the same way with and without DP-SGD.
"""

from __future__ import annotations

import torch
from torch import nn

from privssl.training.semi_supervised_spec import ARCHITECTURES

NORMS = ("batch", "group")


def _norm(kind: str, channels: int) -> nn.Module:
    if kind == "batch":
        return nn.BatchNorm2d(channels, momentum=0.001)
    return nn.GroupNorm(min(16, channels), channels)


class _Block(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, norm: str):
        super().__init__()
        self.bn1, self.conv1 = _norm(norm, c_in), nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn2, self.conv2 = _norm(norm, c_out), nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.act = nn.LeakyReLU(0.1)
        self.shortcut = None if c_in == c_out and stride == 1 else nn.Conv2d(c_in, c_out, 1, stride, 0, bias=False)

    def forward(self, x):
        out = self.act(self.bn1(x))
        residual = x if self.shortcut is None else self.shortcut(out)
        out = self.conv2(self.act(self.bn2(self.conv1(out))))
        return out + residual


class WideResNet(nn.Module):
    def __init__(self, in_channels: int, n_classes: int, widen: int = 2, depth: int = 28, norm: str = "batch"):
        super().__init__()
        if (depth - 4) % 6:
            raise ValueError(f"WRN depth = {depth} is not allowed; allowed: 6n + 4 (28: 4 blocks per group)")
        blocks = (depth - 4) // 6
        widths = [16, 16 * widen, 32 * widen, 64 * widen]
        layers = [nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False)]
        for group in range(3):
            for b in range(blocks):
                c_in = widths[group] if b == 0 else widths[group + 1]
                layers.append(_Block(c_in, widths[group + 1], (1 if group == 0 else 2) if b == 0 else 1, norm))
        layers += [_norm(norm, widths[3]), nn.LeakyReLU(0.1), nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(widths[3], n_classes)

    def forward(self, x):
        return self.classifier(self.features(x))


class SmallCNN(nn.Module):
    """Three 3×3 convolutions (width, 2·width, 2·width; the last two of stride 2), each with
    GroupNorm (per image, so DP-SGD's per-example gradients stay defined) and ReLU, global average
    pooling and a linear layer: a few hundred kFLOP per 8×8 image."""

    def __init__(self, in_channels: int, n_classes: int, width: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, 1, 1), _norm("group", width), nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, 2, 1), _norm("group", 2 * width), nn.ReLU(),
            nn.Conv2d(2 * width, 2 * width, 3, 2, 1), _norm("group", 2 * width), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(2 * width, n_classes)

    def forward(self, x):
        return self.classifier(self.features(x))


def seeded_network(seed: int, architecture: str, in_channels: int, n_classes: int, width: int,
                   private: bool = False) -> nn.Module:
    """`build_network` with its initial weights drawn from `seed` (torch's global generator, which
    the layers' initialisers read): the same network in every process."""
    torch.manual_seed(seed)
    return build_network(architecture, in_channels, n_classes, width, private)


def build_network(architecture: str, in_channels: int, n_classes: int, width: int, private: bool = False) -> nn.Module:
    """`cnn` of `width` filters, or WRN-28-`width`; `private` (DP-SGD) swaps BatchNorm for GroupNorm."""
    if architecture == "cnn":
        return SmallCNN(in_channels, n_classes, width)
    if architecture == "wrn":
        return WideResNet(in_channels, n_classes, widen=width, norm="group" if private else "batch")
    raise ValueError(f"unknown architecture {architecture!r}; allowed: {', '.join(ARCHITECTURES)}")
