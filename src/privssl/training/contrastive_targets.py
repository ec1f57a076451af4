"""The target (and shadow) models of thesis Ch. 4: supervised, contrastive and Talos.

Each is trained on its own training set, the way the thesis trains them (§4.2.3):
- supervised: the base encoder (same architecture) plus a linear classification layer, trained
  end-to-end from scratch with cross-entropy and Adam;
- contrastive: the public SimCLR encoder fine-tuned on the training set with the contrastive loss
  and no labels (the thesis pre-trains on STL-10's unlabelled images, then fine-tunes on the
  training set), then a linear classification layer trained on its frozen output;
- talos: the same with the adversarial attribute classifier at λ > 0 (privssl.training.talos); the
  contrastive model is Talos at λ = 0, and all λ of one repeat share one seed, so their
  differences are due to λ alone.

A shadow model is trained in exactly the same way on the attacker's data: for Talos at the same λ
(the thesis's adaptive adversary).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from privssl.io import atomic_torch_save
from privssl.training import checkpoints
from privssl.training.encoders import build_encoder, encode, unit_float
from privssl.training.heads import HeadSpec, head_logits, train_head
from privssl.training.simclr import SimCLRSpec, pretrain, state_digest
from privssl.training.talos import TalosAdversary, TalosSpec


MAX_REPEATS = 500  # two seeds a repeat below the next stage seed's: 2 x 500 = 1000


@dataclass(frozen=True)
class TrainingSpec:
    """Epochs, mini-batch size (None: full batch) and Adam learning rate of one training stage."""

    epochs: int
    batch_size: int | None
    lr: float


@dataclass(frozen=True)
class TargetSpec:
    """How every target and shadow model is trained (config section `contrastive`)."""

    fine_tune: TrainingSpec  # contrastive fine-tuning of the public encoder (and Talos)
    supervised: TrainingSpec  # end-to-end supervised training
    classifier: TrainingSpec  # the classification layer on the frozen encoder, full batch
    lambdas: tuple[float, ...]  # Talos's adversarial factors; 0 (the contrastive model) is always trained
    adversary_hidden: int
    adversary_lr: float

    @classmethod
    def from_config(cls, cfg: dict) -> "TargetSpec":
        talos, tune, supervised = cfg["talos"], cfg["fine_tune"], cfg["supervised"]
        return cls(TrainingSpec(tune["epochs"], tune["batch_size"], tune["lr"]),
                   TrainingSpec(supervised["epochs"], supervised["batch_size"], supervised["lr"]),
                   TrainingSpec(cfg["classifier"]["epochs"], None, cfg["classifier"]["lr"]),
                   tuple(sorted({0.0, *map(float, talos["lambdas"])})), talos["hidden"], talos["lr"])


@dataclass
class TargetModel:
    """A trained model: base encoder f and classification layer (stacked-head parameters, B = 1).
    `membership`: the model the membership attacks query, trained on the membership task (the
    same encoder with its own layer for a contrastive or Talos model, a second supervised model),
    None where that task is the task itself."""

    kind: str  # supervised | contrastive | talos
    lam: float | None  # None for supervised
    repeat: int
    encoder: nn.Module
    layer: dict[str, torch.Tensor]
    membership: "TargetModel | None" = None

    def membership_model(self) -> "TargetModel":
        return self if self.membership is None else self.membership

    @torch.no_grad()
    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """h = f(x), the representation the attribute-inference adversary sees."""
        return encode(self.encoder, images, next(self.encoder.parameters()).device)

    @torch.no_grad()
    def posteriors(self, images: torch.Tensor) -> torch.Tensor:
        """Class probabilities (N, C), the black-box output of the model."""
        return self.posteriors_of(self.embed(images))

    @torch.no_grad()
    def posteriors_of(self, embedded: torch.Tensor) -> torch.Tensor:
        """`posteriors` from the images' embeddings h = f(x), for models that share f."""
        return torch.softmax(head_logits(self.layer, embedded.double())[0], -1)

    @torch.no_grad()
    def predict_labels(self, images: torch.Tensor) -> torch.Tensor:
        """Predicted labels only: what a label-only adversary observes."""
        return self.posteriors(images).argmax(-1)


def classification_layer(features: torch.Tensor, labels: torch.Tensor, n_classes: int, spec: TrainingSpec,
                         seed: int) -> dict[str, torch.Tensor]:
    """The linear layer on frozen representations: full-batch Adam in float64 (privssl.training.heads)."""
    head = HeadSpec(architecture="linear", epochs=spec.epochs, batch_size=None, optimizer="adam", lr=spec.lr,
                    init_seed=seed)
    return train_head(head, features, labels, n_classes)


def train_supervised(encoder_name: str, width: int, images: torch.Tensor, labels: torch.Tensor, n_classes: int,
                     spec: TrainingSpec, seed: int, device: torch.device) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """Encoder + linear layer end-to-end with cross-entropy (Adam, a fresh seeded permutation per epoch)."""
    torch.manual_seed(seed)
    encoder = build_encoder(encoder_name, images.shape[1], images.shape[-1], width).to(device)
    layer = nn.Linear(encoder.out_dim, n_classes).to(device)
    optimiser = torch.optim.Adam([*encoder.parameters(), *layer.parameters()], lr=spec.lr)
    generator = torch.Generator().manual_seed(seed)
    labels = labels.to(device)
    encoder.train()
    for _ in range(spec.epochs):
        permutation = torch.randperm(len(images), generator=generator)
        for start in range(0, len(images), spec.batch_size):
            idx = permutation[start:start + spec.batch_size]
            loss = F.cross_entropy(layer(encoder(unit_float(images[idx].to(device)))), labels[idx.to(device)])
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
    encoder.eval()
    stacked = {"weight": layer.weight.detach().T.double()[None].cpu(), "bias": layer.bias.detach().double()[None].cpu()}
    return encoder, stacked


def _layer_record(layer: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The layer as saved. Its keys are the same string objects whether the layer was trained now
    or read back from a checkpoint (whose keys are new objects): pickle memoises by identity, so
    the models file's bytes would otherwise depend on where a restarted job resumed."""
    return {"weight": layer["weight"].cpu(), "bias": layer["bias"].cpu()}


def _supervised_cached(path: Path, fingerprint: dict[str, str], train: Callable[[], tuple[nn.Module, dict]],
                       log: Callable[[str], None]) -> tuple[dict, dict]:
    """A finished supervised model is kept in the checkpoint folder, so a restarted job skips it."""
    if path.exists():
        saved = torch.load(path, map_location="cpu", weights_only=True)
        if checkpoints.resumable(saved["fingerprint"], fingerprint, path, log):
            log(f"supervised model from {path}")
            return saved["encoder"], saved["layer"]
    encoder, layer = train()
    state = {k: v.cpu() for k, v in encoder.state_dict().items()}
    atomic_torch_save({"fingerprint": fingerprint, "encoder": state, "layer": layer}, path)
    return state, layer


def repeat_seeds(seed: int, repeat: int) -> tuple[int, int]:
    """(the models' seed, the Talos adversaries' seed) of one repeat of a role with stage seed
    `seed`: no seed is shared with another repeat or another stage seed's repeats, so the repeats
    are independent trainings (repeat 0 keeps the seeds of the runs before repeats were spaced)."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 0 <= repeat < MAX_REPEATS:
        raise ValueError(f"repeat {repeat!r} is not allowed; allowed: an integer from 0 to {MAX_REPEATS - 1}")
    return seed * 1000 + 2 * repeat, seed * 1000 + 2 * repeat + 1


@dataclass(frozen=True)
class RoleSet:
    """What one role's models (target or shadow) train on: its images, their task labels (of
    n_task classes) and sensitive attribute (of n_attribute), and the membership task's labels
    where the membership claims' models learn another task than the task (None: the task's
    models serve both)."""

    images: torch.Tensor
    task: torch.Tensor
    n_task: int
    attribute: torch.Tensor
    n_attribute: int
    membership_task: torch.Tensor | None = None
    n_membership_task: int | None = None

    def __post_init__(self):
        if self.membership_task is not None and (self.n_membership_task is None
                                                 or len(self.membership_task) != len(self.task)):
            raise ValueError(f"membership_task needs one label per image ({len(self.task)}) and its class count, got "
                             f"{len(self.membership_task)} labels and {self.n_membership_task}")


@dataclass(frozen=True)
class RoleJob:
    """How a role's trainings run: drawn from `seed` on `device`, each resuming from its own
    checkpoint under `checkpoint_dir` fingerprinted with `code` (privssl.training.checkpoints)."""

    seed: int
    device: torch.device
    checkpoint_dir: Path
    log: Callable[[str], None] = print
    code: str = ""


def train_targets(data: RoleSet, public: dict, simclr: SimCLRSpec, spec: TargetSpec, repeats: int,
                  job: RoleJob) -> tuple[list[dict], list[dict]]:
    """Every model of one role on its training set `data`: per repeat the supervised model and
    the Talos models at every λ (λ = 0: contrastive). `public`: the public encoder file
    (privssl.training.encoders.load_encoder's format) the contrastive models start from. With a
    membership task: a second supervised model on its labels, and a second classification layer
    on every contrastive and Talos encoder (which never see a label, so they serve both tasks).

    Returns the models as plain records (kind, lambda, repeat, encoder state, layer, and
    `membership`: its encoder state, None for the model's own, and its layer) and the per-epoch
    history of every contrastive and Talos training."""
    images, task, attribute, n_task, n_attribute = data.images, data.task, data.attribute, data.n_task, data.n_attribute
    membership_task, n_membership_task = data.membership_task, data.n_membership_task
    seed, device, checkpoint_dir, log, code = job.seed, job.device, job.checkpoint_dir, job.log, job.code
    tune = replace(simclr, epochs=spec.fine_tune.epochs, batch_size=spec.fine_tune.batch_size, lr=spec.fine_tune.lr)
    separate = membership_task is not None
    models, history = [], []
    for repeat in range(repeats):
        run_seed, adversary_seed = repeat_seeds(seed, repeat)

        def supervised(labels: torch.Tensor, n_classes: int, name: str) -> tuple[dict, dict]:
            # as SimCLR's checkpoint: the intra-op thread count too, which splits float sums differently
            fingerprint = checkpoints.fingerprint(
                encoder=public["encoder"], width=public["width"], supervised=spec.supervised, seed=run_seed,
                n_task=n_classes, arithmetic=device.type, threads=torch.get_num_threads(),
                data=state_digest({"images": images.float(), "task": labels.float()}), code=code)
            return _supervised_cached(
                checkpoint_dir / f"r{repeat}_{name}.pt", fingerprint,
                lambda: train_supervised(public["encoder"], public["width"], images, labels, n_classes,
                                         spec.supervised, run_seed, device), log)

        encoder_state, layer = supervised(task, n_task, "supervised")
        membership = {"encoder": None, "layer": _layer_record(layer)}
        if separate:
            state, own = supervised(membership_task, n_membership_task, "supervised_membership")
            membership = {"encoder": state, "layer": _layer_record(own)}
        models.append({"kind": "supervised", "lambda": None, "repeat": repeat, "encoder": encoder_state,
                       "layer": _layer_record(layer), "membership": membership})
        # C reads the encoder's representation: `width` wide for the convnet, 512 for ResNet-18
        representation = build_encoder(public["encoder"], images.shape[1], images.shape[-1], public["width"]).out_dim
        for lam in spec.lambdas:
            adversary = TalosAdversary(TalosSpec(lam, spec.adversary_hidden, spec.adversary_lr), attribute,
                                       n_attribute, representation, adversary_seed, device)
            model, epochs = pretrain(tune, images, run_seed, device, checkpoint_dir / f"r{repeat}_lambda{lam:g}.pt",
                                     log, init_encoder=public["state"], adversary=adversary, code=code)
            features = encode(model.encoder, images, device)
            layer = _layer_record(classification_layer(features, task, n_task, spec.classifier, run_seed))
            membership_layer = (_layer_record(classification_layer(features, membership_task, n_membership_task,
                                                                   spec.classifier, run_seed)) if separate else layer)
            kind = "contrastive" if lam == 0 else "talos"
            models.append({"kind": kind, "lambda": lam, "repeat": repeat,
                           "encoder": {k: v.cpu() for k, v in model.encoder.state_dict().items()},
                           "layer": layer, "membership": {"encoder": None, "layer": membership_layer}})
            history += [{"repeat": repeat, "target": kind, "lambda": lam, **row} for row in epochs]
    return models, history


def load_models(bundle: dict, device: torch.device) -> list[TargetModel]:
    """The TargetModels of a contrastive_train file (validated by artefacts.contrastive.load_contrastive_models)."""

    def built(state: dict) -> nn.Module:
        encoder = build_encoder(bundle["encoder"], bundle["in_channels"], bundle["image_size"], bundle["width"])
        encoder.load_state_dict(state)
        return encoder.to(device).eval()

    def layer_of(layer: dict) -> dict:  # the layer stays on the CPU in float64, where `encode` returns features
        return {k: v.cpu().double() for k, v in layer.items()}

    out = []
    for record in bundle["models"]:
        lam = None if record["kind"] == "supervised" else float(record["lambda"])
        model = TargetModel(record["kind"], lam, int(record["repeat"]), built(record["encoder"]),
                            layer_of(record["layer"]))
        own = record["membership"]
        encoder = model.encoder if own["encoder"] is None else built(own["encoder"])
        model.membership = TargetModel(model.kind, lam, model.repeat, encoder, layer_of(own["layer"]))
        out.append(model)
    return out
