"""The fine-tuning algorithm A_S: a head on frozen encoder features, trained many at once.

The sensitivity sampler (Algorithm 2) needs A_S to be a *deterministic function of its data
set*, otherwise Δ measures seed noise instead of the influence of one record. Hence:
- every head starts from the same initialisation, drawn from `init_seed`;
- mini-batches follow one fixed permutation of d per epoch, shared by every head; a head
  whose data set lacks an element simply skips it (its mask is 0 there), so the batch order
  never depends on which element is missing;
- computation is in float64 by default (`precision`), so rounding does not blur differences of
  ~1e-5. float32 is twice as fast, and is a different algorithm A_S: the released head and the
  sampler's heads must share it. For a chaotic recipe (Adam without regularisation, the presets'
  head) the float32 and float64 heads of the same data differ by 1.5 % (digits) to 16 %
  (Fashion-MNIST) of their norm: see docs/sensitivity_ablation.md before choosing it.

Heads are stacked along a leading dimension B and share the features; only their data masks
differ. Adam is element-wise, so one optimiser over stacked parameters is B independent Adams.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

ARCHITECTURES = ("linear", "mlp")
OPTIMIZERS = ("adam", "sgd")
DTYPE = torch.float64  # the default precision, and the one of the other trainers' arithmetic
PRECISIONS = {"float64": torch.float64, "float32": torch.float32}


@dataclass(frozen=True)
class HeadSpec:
    """Hyper-parameters S of the fine-tuning algorithm A_S."""

    architecture: str = "mlp"
    hidden: int = 128
    epochs: int = 100
    batch_size: int | None = None  # None: full batch
    optimizer: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.0  # sgd only
    weight_decay: float = 0.0
    init_seed: int = 0
    precision: str = "float64"  # the arithmetic of A_S: float64 | float32

    @property
    def dtype(self) -> torch.dtype:
        return PRECISIONS[self.precision]

    def __post_init__(self) -> None:
        # A spec also arrives from a file (the tune rule's tuning/head.json), not only from the
        # checked config: every field is checked here, before any training.
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"head architecture {self.architecture!r} unknown; allowed: {ARCHITECTURES}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"head optimizer {self.optimizer!r} unknown; allowed: {OPTIMIZERS}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"head precision {self.precision!r} unknown; allowed: {tuple(PRECISIONS)}")

        def whole(value) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        def real(value) -> bool:
            return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

        checks = {"hidden": whole(self.hidden) and self.hidden >= 1,
                  "epochs": whole(self.epochs) and self.epochs >= 1,
                  "batch_size": self.batch_size is None or (whole(self.batch_size) and self.batch_size >= 1),
                  "lr": real(self.lr) and self.lr > 0, "momentum": real(self.momentum) and 0 <= self.momentum < 1,
                  "weight_decay": real(self.weight_decay) and self.weight_decay >= 0,
                  "init_seed": whole(self.init_seed) and self.init_seed >= 0}
        allowed = {"hidden": "an integer >= 1", "epochs": "an integer >= 1", "batch_size": "null or an integer >= 1",
                   "lr": "a finite number > 0", "momentum": "a number in [0, 1)",
                   "weight_decay": "a finite number >= 0", "init_seed": "an integer >= 0"}
        for field, ok in checks.items():
            if not ok:
                raise ValueError(f"head.{field} = {getattr(self, field)!r} is not allowed; allowed: {allowed[field]}")

    @classmethod
    def from_config(cls, cfg: dict) -> HeadSpec:
        return cls(**{k: cfg[k] for k in cls.__dataclass_fields__ if k in cfg})


def parameter_shapes(spec: HeadSpec, in_dim: int, n_classes: int) -> dict[str, tuple[int, ...]]:
    """Shapes of one head's parameters, in the fixed order used to flatten them."""
    if spec.architecture == "linear":
        return {"weight": (in_dim, n_classes), "bias": (n_classes,)}
    return {"weight1": (in_dim, spec.hidden), "bias1": (spec.hidden,),
            "weight2": (spec.hidden, n_classes), "bias2": (n_classes,)}


def init_heads(spec: HeadSpec, in_dim: int, n_classes: int, n_heads: int,
               device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """n_heads identical copies of PyTorch's default nn.Linear initialisation, U(±1/√fan_in)."""
    generator = torch.Generator().manual_seed(spec.init_seed)
    params = {}
    for name, shape in parameter_shapes(spec, in_dim, n_classes).items():
        fan_in = shape[0] if name.startswith("weight") else params[name.replace("bias", "weight")].shape[1]
        bound = 1.0 / math.sqrt(fan_in)
        # drawn in float64 whatever the precision, then rounded: a float32 head starts where the
        # float64 one does, up to rounding
        value = ((torch.rand(shape, generator=generator, dtype=DTYPE) * 2 - 1) * bound).to(spec.dtype)
        params[name] = value.to(device).expand(n_heads, *shape).clone()
    return params


class _ClassProduct(torch.autograd.Function):
    """x @ w for B stacked heads, x (B, N, K) and w (B, K, C), where C (the classes) is few.

    A GEMM with C = 10 columns runs at a fraction of its transpose's speed (10 rows): at the
    Fashion-MNIST preset's MLP, 80 × (100 × 256) @ (256 × 10) at 14 GFLOP/s against 51, and the
    weight's gradient x^T @ dy at 11 against 40 (one thread, float32; docs/benchmarks.md). Both are
    computed transposed, w^T @ x^T and (dy^T @ x)^T; x's gradient dy @ w^T keeps x's layout, which
    the ReLU's backward needs (given a transposed gradient it ran 10x slower). The same sums in
    another order: the heads differ from the plain product's by rounding only."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return torch.bmm(w.transpose(1, 2), x.transpose(1, 2)).transpose(1, 2)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        x, w = ctx.saved_tensors
        grad_x = torch.bmm(grad, w.transpose(1, 2)) if ctx.needs_input_grad[0] else None
        grad_w = torch.bmm(grad.transpose(1, 2), x).transpose(1, 2) if ctx.needs_input_grad[1] else None
        return grad_x, grad_w


def class_product(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """(B, N, C) = x @ w for each head, x (B, N, K) its own rows, w (B, K, C): see _ClassProduct."""
    return _ClassProduct.apply(x, w)


def head_logits(params: dict[str, torch.Tensor], features: torch.Tensor) -> torch.Tensor:
    """Logits (B, N, C) of B stacked heads on shared features (N, F) or on their own (B, N, F)."""
    if "weight" in params:
        if features.ndim == 2:  # one GEMM of the shared rows with every head's columns
            return torch.einsum("nf,bfh->bnh", features, params["weight"]) + params["bias"][:, None, :]
        return class_product(features, params["weight"]) + params["bias"][:, None, :]
    pattern = "nf,bfh->bnh" if features.ndim == 2 else "bnf,bfh->bnh"
    hidden = torch.relu(torch.einsum(pattern, features, params["weight1"]) + params["bias1"][:, None, :])
    return class_product(hidden, params["weight2"]) + params["bias2"][:, None, :]


def pool_logits(params: dict[str, torch.Tensor], features: torch.Tensor) -> torch.Tensor:
    """Logits (B, C, pool) of B stacked linear heads on every row of the shared pool (pool, F):
    one GEMM, (B·C, F) @ (F, pool), in the layout the cross-entropy reads. (Rows of C = 10
    contiguous classes, (pool · B, C), made its softmax 6x slower on the CPU.)"""
    weight = params["weight"]
    heads, width, n_classes = weight.shape
    logits = (weight.transpose(1, 2).reshape(heads * n_classes, width) @ features.T).view(heads, n_classes, -1)
    return logits + params["bias"][:, :, None]


def flatten(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, P): every head's parameters as one vector, the space the mechanisms act on."""
    return torch.cat([p.reshape(p.shape[0], -1) for p in params.values()], dim=1)


def unflatten(flat: torch.Tensor, shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """Inverse of `flatten` for a stack (B, P) of head vectors."""
    sizes = {name: math.prod(shape) for name, shape in shapes.items()}
    if sum(sizes.values()) != flat.shape[1]:
        raise ValueError(f"flat heads have {flat.shape[1]} parameters, the shapes need {sum(sizes.values())}")
    params, offset = {}, 0
    for name, shape in shapes.items():
        params[name] = flat[:, offset:offset + sizes[name]].reshape(flat.shape[0], *shape)
        offset += sizes[name]
    return params


def _fit(spec: HeadSpec, params: dict[str, torch.Tensor], n: int, batch_loss,
         on_epoch: Callable[[], None] | None = None) -> dict[str, torch.Tensor]:
    """The optimisation loop of A_S, shared by every batched trainer: `epochs` passes over n
    positions in a fixed permutation per epoch (drawn from `init_seed`, the same for every head);
    `batch_loss(positions)` returns the sum over heads of each head's mean loss on the batch.
    `on_epoch` is called after each epoch (a job's progress log)."""
    for p in params.values():
        p.requires_grad_(True)
    # fused: one kernel per parameter for the whole update, where the default runs ~10 element-wise
    # passes over every stacked head's weights; the update took half the step before (the sampler
    # 1.73x faster at the Fashion-MNIST preset's head, docs/benchmarks.md)
    if spec.optimizer == "adam":
        optimiser = torch.optim.Adam(params.values(), lr=spec.lr, weight_decay=spec.weight_decay, fused=True)
    else:
        optimiser = torch.optim.SGD(params.values(), lr=spec.lr, momentum=spec.momentum,
                                    weight_decay=spec.weight_decay, fused=True)
    batch_size = n if spec.batch_size is None else min(spec.batch_size, n)
    order = torch.Generator().manual_seed(spec.init_seed + 1)
    device = next(iter(params.values())).device
    for _ in range(spec.epochs):
        permutation = torch.randperm(n, generator=order).to(device)
        for start in range(0, n, batch_size):
            loss = batch_loss(permutation[start:start + batch_size])
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
        if on_epoch is not None:
            on_epoch()
    return {k: v.detach() for k, v in params.items()}


def train_heads(spec: HeadSpec, features: torch.Tensor, labels: torch.Tensor, masks: torch.Tensor,
                n_classes: int, on_epoch: Callable[[], None] | None = None) -> dict[str, torch.Tensor]:
    """A_S on B data sets at once: data set b is {features[n] : masks[b, n] = 1}.

    Returns the B trained heads stacked. Head b equals what training on its own data set
    alone would give (see tests/test_heads.py), up to rounding. A head skips the
    records it lacks, so the batch order never depends on which record is missing.
    """
    features = features.to(spec.dtype)
    masks = masks.to(device=features.device, dtype=spec.dtype)
    if masks.ndim != 2 or masks.shape[1] != features.shape[0]:
        raise ValueError(f"masks must be (heads, {features.shape[0]}), got {tuple(masks.shape)}")
    params = init_heads(spec, features.shape[1], n_classes, masks.shape[0], features.device)

    def batch_loss(idx: torch.Tensor) -> torch.Tensor:
        weight = masks[:, idx]
        logits = head_logits(params, features[idx])
        losses = F.cross_entropy(logits.transpose(1, 2), labels[idx].expand(len(weight), -1), reduction="none")
        # Mean over the elements each head actually has; the sum over heads decouples.
        return ((losses * weight).sum(1) / weight.sum(1).clamp(min=1.0)).sum()

    return _fit(spec, params, features.shape[0], batch_loss, on_epoch)


POOL_LOGITS_RATIO = 4  # the largest pool, in batches, whose logits a linear head computes whole


def logits_from_pool(spec: HeadSpec, pool_size: int, batch: int) -> bool:
    """Whether a batch's loss comes from the logits of every pool row (one GEMM of the shared
    features; each row's loss weighed by how often the head's batch holds it) rather than from
    each head's gathered rows (B × batch × F copied, then a batched product). Only a linear head:
    its product has C columns, so the gather costs more than the product, and the shared GEMM wins
    while the pool is at most POOL_LOGITS_RATIO batches (benchmarks/head_step.py). An MLP's first
    layer has `hidden` columns: its product dominates, and the pool's is pool / batch times larger.
    One difference from gathering: a pool row that no head's batch holds still has its loss
    computed (weighed by 0), so a logit that overflowed to ±inf on such a row makes every head NaN
    (0 · NaN), where gathering would skip the row; training has then diverged anyway, and the
    sampler's check_finite refuses the distances."""
    return spec.architecture == "linear" and pool_size <= POOL_LOGITS_RATIO * batch


def train_heads_on_sets(spec: HeadSpec, features: torch.Tensor, labels: torch.Tensor, sets: torch.Tensor,
                        n_classes: int, on_epoch: Callable[[], None] | None = None) -> dict[str, torch.Tensor]:
    """A_S on B data sets of one size n at once: data set b is the rows features[sets[b]], in
    that order (repeats allowed). Head b equals `train_head(spec, features[sets[b]], ...)`
    exactly as A_S defines it (same positions in each batch), up to rounding; each
    batch gathers only its own rows (or, see `logits_from_pool`, weighs the pool's, B × pool × C),
    so memory is B × batch × F, not B × n × F."""
    features = features.to(spec.dtype)
    sets = sets.to(features.device)
    if sets.ndim != 2 or sets.shape[1] < 1:
        raise ValueError(f"sets must be (heads, n) row indices, got {tuple(sets.shape)}")
    params = init_heads(spec, features.shape[1], n_classes, sets.shape[0], features.device)
    batch = sets.shape[1] if spec.batch_size is None else min(spec.batch_size, sets.shape[1])
    from_pool = logits_from_pool(spec, features.shape[0], batch)
    pool_labels = labels.expand(sets.shape[0], -1)

    def batch_loss(idx: torch.Tensor) -> torch.Tensor:
        rows = sets[:, idx]
        if from_pool:
            # a head's mean over its batch's positions = the pool rows' losses weighed by how often
            # the batch holds each row / batch: no gather, and no scatter back in the backward
            # (they took 40 % of a full-batch step; a cross-entropy over the pool takes less)
            weights = torch.zeros(pool_labels.shape, dtype=features.dtype, device=features.device)
            weights.scatter_add_(1, rows, torch.full(rows.shape, 1 / len(idx), dtype=features.dtype,
                                                     device=features.device))
            losses = F.cross_entropy(pool_logits(params, features), pool_labels, reduction="none")
            return (losses * weights).sum()
        # index_select, not features[rows]: the same rows, 5x faster (advanced indexing's CPU kernel)
        logits = head_logits(params, features.index_select(0, rows.reshape(-1)).view(*rows.shape, -1))
        return F.cross_entropy(logits.transpose(1, 2), labels[rows], reduction="none").mean(1).sum()

    return _fit(spec, params, sets.shape[1], batch_loss, on_epoch)


def train_head(spec: HeadSpec, features: torch.Tensor, labels: torch.Tensor,
               n_classes: int) -> dict[str, torch.Tensor]:
    """The released head ω = A_S(d): the same algorithm on the whole of d, B = 1."""
    masks = torch.ones(1, features.shape[0], dtype=spec.dtype, device=features.device)
    return train_heads(spec, features, labels, masks, n_classes)


@torch.no_grad()
def predict_proba(params: dict[str, torch.Tensor], features: torch.Tensor,
                  chunk: int = 256) -> torch.Tensor:
    """Class probabilities (B, N, C) of B heads, computed in chunks of heads to bound memory, in
    the heads' precision."""
    features = features.to(next(iter(params.values())).dtype)
    n_heads = next(iter(params.values())).shape[0]
    out = [torch.softmax(head_logits({k: v[i:i + chunk] for k, v in params.items()}, features), -1)
           for i in range(0, n_heads, chunk)]
    return torch.cat(out, 0)


@torch.no_grad()
def correct(params: dict[str, torch.Tensor], features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(B, n) bool: whether each stacked head classifies each record right."""
    return predict_proba(params, features).argmax(-1) == labels


def accuracy(params: dict[str, torch.Tensor], features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Accuracy (B,) of each stacked head."""
    return correct(params, features, labels).to(DTYPE).mean(-1)
