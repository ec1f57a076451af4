"""Base encoders NN_θ for SimCLR pre-training.

`convnet` is the encoder of the Keras `semisupervised_simclr` example the paper follows:
4 × Conv2D(width, 3×3, stride 2, ReLU) → flatten → Dense(width, ReLU). The convolutions use
padding 1 so that it also fits images of 8×8 (digits) and 32×32 (CIFAR), where the example's
unpadded convolutions on 96×96 inputs would shrink the map below 1×1.

`resnet18` is torchvision's ResNet-18 with the CIFAR stem (3×3 stride-1 first convolution, no
max-pool), for paper-scale runs; its 512-d pooled output is the representation.
"""

from __future__ import annotations

import torch
from torch import nn

from privssl.training.encoder_names import ENCODERS  # noqa: F401 (re-exported)

TRAINABLE = ("all", "top")  # what private training updates: every weight, or the convnet's dense layer


class ConvEncoder(nn.Module):
    def __init__(self, in_channels: int, image_size: int, width: int = 128, n_conv: int = 4):
        super().__init__()
        layers, channels = [], in_channels
        for _ in range(n_conv):
            layers += [nn.Conv2d(channels, width, 3, stride=2, padding=1), nn.ReLU()]
            channels = width
        self.conv = nn.Sequential(*layers, nn.Flatten())
        with torch.no_grad():
            flat = self.conv(torch.zeros(1, in_channels, image_size, image_size)).shape[1]
        self.dense = nn.Sequential(nn.Linear(flat, width), nn.ReLU())
        self.out_dim = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense(self.conv(x))


def resnet18_encoder(in_channels: int) -> nn.Module:
    from torchvision.models import resnet18

    net = resnet18(weights=None)  # pre-training from scratch: no hub download
    net.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
    net.maxpool = nn.Identity()
    net.fc = nn.Identity()
    net.out_dim = 512
    return net


def build_encoder(name: str, in_channels: int, image_size: int, width: int) -> nn.Module:
    if name == "convnet":
        return ConvEncoder(in_channels, image_size, width)
    if name == "resnet18":
        return resnet18_encoder(in_channels)
    raise ValueError(f"unknown encoder {name!r}; allowed: {', '.join(ENCODERS)}")


def split_for_training(encoder: nn.Module, trainable: str) -> tuple[nn.Module, nn.Module]:
    """(frozen trunk, trained top) with encoder(x) = top(trunk(x)), the two sharing the encoder's
    modules. `top` keeps the convnet's convolutions as fixed public features and trains its dense
    layer: per-example gradients of 16k weights instead of 460k make CPU-sized private training
    possible. `all` trains every weight (the papers' setting)."""
    if trainable == "all":
        return nn.Identity(), encoder
    if trainable == "top" and isinstance(encoder, ConvEncoder):
        for param in encoder.conv.parameters():
            param.requires_grad_(False)
        return encoder.conv, encoder.dense
    raise ValueError(f"trainable = {trainable!r} is not allowed for a {type(encoder).__name__}; allowed: "
                     f"{', '.join(TRAINABLE) if isinstance(encoder, ConvEncoder) else 'all'}")


def projection_head(in_dim: int, width: int) -> nn.Module:
    """SimCLR projection MLP of the Keras example: Dense(width, ReLU) → Dense(width)."""
    return nn.Sequential(nn.Linear(in_dim, width), nn.ReLU(), nn.Linear(width, width))


def unit_float(images: torch.Tensor) -> torch.Tensor:
    """Images as float in [0, 1]; uint8 pools are converted batch by batch to bound memory."""
    return images.float() / 255.0 if images.dtype == torch.uint8 else images.float()


@torch.no_grad()
def encode(encoder: nn.Module, images: torch.Tensor, device: torch.device,
           batch_size: int = 512) -> torch.Tensor:
    """r = NN_θ(x) for every image, in evaluation mode, returned on the CPU."""
    encoder.eval()
    out = [encoder(unit_float(images[i:i + batch_size].to(device))).cpu() for i in range(0, len(images), batch_size)]
    return torch.cat(out) if out else torch.empty(0, encoder.out_dim)
