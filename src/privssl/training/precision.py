"""Faster arithmetic on CUDA for the trainings outside every privacy guarantee.

SimCLR training (the public encoder, the contrastive targets' fine-tuning) and the non-private
semi-supervised targets run their forward passes under bf16 autocast and keep convolution weights and inputs in
channels_last layout on a GPU, where tensor cores make both several times faster. The losses are
computed from float32 logits. Nothing that a privacy claim rests on goes through here: per-example
gradients, clipping, noise and accounting (DP-SGD, DPCL, DPAdapter, the released heads) stay in
float32 or float64. On the CPU both are off, so CPU results do not change.
"""

from __future__ import annotations

import contextlib

import torch


def autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA; nothing on the CPU (whose bf16 kernels are slower, not faster)."""
    if device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def channels_last(x, device: torch.device):
    """A module's 4-D weights or an image batch in channels_last layout on CUDA; as is on the CPU."""
    if device.type != "cuda":
        return x
    if isinstance(x, torch.nn.Module):
        return x.to(memory_format=torch.channels_last)
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x


def arithmetic(device: torch.device) -> str:
    """What a checkpoint's fingerprint records of the device: its kind, and on CUDA the mixed
    precision above, so that a GPU checkpoint written before or without it is not resumed."""
    return "cuda bf16 channels_last" if device.type == "cuda" else device.type
