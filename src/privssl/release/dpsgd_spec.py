"""The hyper-parameters of DP-SGD training and the sampling plan they imply, free of Opacus, so
that the batched trainer of the attacks (`dpsgd_batched`) and the scripts that only pass a spec
along do not pay Opacus' import."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ACCOUNTANTS = ("rdp", "pld", "prv")  # Opacus' RDP and PRV, dp_accounting's PLD (privssl.accounting.dpsgd)


@dataclass(frozen=True)
class DPSGDSpec:
    """Hyper-parameters of the DP-SGD head (config key `dpsgd`)."""

    clip_norm: float = 1.0  # C: per-example gradient L2 clipping
    batch_size: int = 50  # expected Poisson batch
    epochs: int = 30
    lr: float = 0.1
    momentum: float = 0.9
    repeats: int = 3  # independent trainings per ε
    accountant: str = "pld"

    def __post_init__(self) -> None:
        def bad(field: str, allowed: str) -> ValueError:
            return ValueError(f"dpsgd.{field} = {getattr(self, field)!r} is not allowed; allowed: {allowed}")

        def is_int(value) -> bool:
            return isinstance(value, (int, np.integer)) and not isinstance(value, bool)

        def is_real(value) -> bool:
            return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) \
                and math.isfinite(value)

        if not (is_real(self.clip_norm) and self.clip_norm > 0):
            raise bad("clip_norm", "a finite number > 0")
        for field in ("batch_size", "epochs", "repeats"):
            if not (is_int(getattr(self, field)) and getattr(self, field) >= 1):
                raise bad(field, "an integer >= 1")
        if not (is_real(self.lr) and self.lr > 0):
            raise bad("lr", "a finite number > 0")
        if not (is_real(self.momentum) and 0 <= self.momentum < 1):
            raise bad("momentum", "a number in [0, 1)")
        if self.accountant not in ACCOUNTANTS:
            raise bad("accountant", ", ".join(ACCOUNTANTS))

    @classmethod
    def from_config(cls, cfg: dict) -> "DPSGDSpec":
        unknown = set(cfg) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown dpsgd fields {sorted(unknown)}; allowed: {list(cls.__dataclass_fields__)}")
        return cls(**cfg)


def sampling_plan(n: int, spec: DPSGDSpec) -> tuple[float, int]:
    """(q, steps) exactly as Opacus will run them on n records: the DPDataLoader's rate
    1 / len(DataLoader(batch_size)) = 1 / ceil(n / batch_size), int(1/q) batches per epoch."""
    if n < 1:
        raise ValueError(f"DP-SGD needs at least one record, got n = {n}")
    sample_rate = 1 / math.ceil(n / spec.batch_size)
    return sample_rate, spec.epochs * int(1 / sample_rate)
