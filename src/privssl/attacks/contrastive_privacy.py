"""The attacks of thesis Ch. 4 against every target model, with their intervals: the protocol.

Every target model is paired with the shadow model trained the same way (same kind, λ and
repeat) on the attacker's data: the shadow's 'in' records are its training set, its 'out'
records the attacker's held-out part (thesis §4.2.3: four equal disjoint parts). Each attack is
fitted on the shadow and applied to the target's members (its training set) and non-members
(its test set), balanced; for Talos the shadow is itself a Talos model at the same λ, so every
membership attack is adaptive (thesis §4.4.2). Attribute inference trains on the target's own
embeddings of the auxiliary set, so it is adaptive too.

- `nn`: attack MLP on the two largest posteriors (sorted) and whether the prediction is right;
- `correctness`, `confidence`, `entropy`, `modified_entropy`: Song & Mittal's metrics, with
  thresholds fitted on the shadow (privssl.attacks.mia);
- `label_only_augmentation`, `label_only_boundary`: Choquette-Choo et al. (privssl.attacks.label_only),
  thresholds fitted on the shadow;
- `attribute_mlp`: embedding → attribute (privssl.attacks.attribute_inference), evaluated on the
  members' embeddings beside the majority-class baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from privssl.attacks.attribute_inference import (
    AttributeAttackSpec,
    attribute_accuracy,
    majority_baseline,
    train_attribute_attack,
)
from privssl.attacks.contrastive_spec import (
    ATTRIBUTE,
    ATTRIBUTE_ATTACK,
    MEMBERSHIP,
    MEMBERSHIP_ATTACKS,
    MEMBERSHIP_TASK,
    METRIC_ATTACKS,
    NN_ATTACK,
)
from privssl.attacks.label_only import augmentation_scores, boundary_distance_scores
from privssl.attacks.mia import AttackSpec, best_threshold, metric_scores, train_attack_mlps
from privssl.attacks.statistics import accuracy_interval, finite_scores, membership_metrics
from privssl.io import Progress, pack_decisions
from privssl.release.training_time import draw_seed
from privssl.training.contrastive_targets import TargetModel


@dataclass(frozen=True)
class AttackSettings:
    nn: AttackSpec
    attribute: AttributeAttackSpec
    translation: int  # label-only augmentation: shifts of up to this many pixels
    directions: int  # label-only boundary distance: random directions per record
    steps: int  # ... and bisection steps per direction
    fpr: tuple[float, ...]  # TPR reported at these false-positive rates
    bootstrap: int  # resamples of the AUC interval

    @classmethod
    def from_config(cls, cfg: dict, fpr, bootstrap: int) -> "AttackSettings":
        label_only = cfg["label_only"]
        return cls(AttackSpec.from_config(cfg["membership"]), AttributeAttackSpec.from_config(cfg["attribute"]),
                   label_only["translation"], label_only["directions"], label_only["steps"], tuple(fpr), bootstrap)


@dataclass
class Split:
    """Images of one split with their task label, membership-task label and sensitive attribute."""

    images: torch.Tensor
    task: torch.Tensor
    attribute: torch.Tensor
    membership: torch.Tensor  # the labels of the task the membership attacks' models learned


def nn_inputs(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The thesis's NN-attack input (§4.2.2): the two largest posteriors in descending order and
    an indicator of a correct prediction; (..., N, 3)."""
    top2 = probs.topk(2, dim=-1).values
    correct = (probs.argmax(-1) == labels).to(probs.dtype).unsqueeze(-1)
    return torch.cat([top2, correct], -1).float()


def _key(model: TargetModel) -> tuple:
    return model.kind, model.lam, model.repeat


def pair_models(targets: list[TargetModel], shadows: list[TargetModel]) -> list[tuple[TargetModel, TargetModel]]:
    """Each target with the shadow trained its way; both lists must hold the same models."""
    by_key = {_key(s): s for s in shadows}
    if sorted(map(str, by_key)) != sorted(str(_key(t)) for t in targets):
        raise ValueError(f"targets {[_key(t) for t in targets]} and shadows {list(by_key)} differ: every target "
                         f"needs the shadow of its kind, lambda and repeat")
    return [(t, by_key[_key(t)]) for t in targets]


def _model_row(dataset: str, target: TargetModel, test: Split) -> dict:
    right = target.predict_labels(test.images) == test.task
    accuracy, lo, hi = accuracy_interval(int(right.sum()), len(test.task))
    return {"dataset": dataset, "target": target.kind, "lambda": np.nan if target.lam is None else target.lam,
            "repeat": target.repeat, "task_accuracy": accuracy, "task_accuracy_lo": lo, "task_accuracy_hi": hi,
            "n_test": len(test.task), "task_decisions": pack_decisions(right.cpu().numpy())}


def _fit(probs: torch.Tensor, labels: torch.Tensor, n_members: int) -> dict:
    """The queried model's accuracy on the members and on the non-members, from its posteriors
    (N, C) on the members then the non-members: the over-fitting the membership attacks meet."""
    hits = probs.argmax(-1) == labels
    fit = {}
    for name, part in (("train", hits[:n_members]), ("test", hits[n_members:])):
        fit |= dict(zip((f"queried_{name}_accuracy", f"queried_{name}_accuracy_lo", f"queried_{name}_accuracy_hi"),
                        accuracy_interval(int(part.sum()), len(part))))
    return fit


def attack_seed(seed: int, repeat: int) -> int:
    """The attacks' seed against the models of one repeat: repeat 0 keeps the stage's seed, every
    other repeat draws its own (the NN attack's initialisation and batches, the boundary attack's
    directions, the attribute attack's, the bootstrap's), so that each independent training meets
    independently drawn attacks and the spread between repeats holds the attacks' luck too."""
    return seed if repeat == 0 else draw_seed(seed, repeat)


def shared_label_predictor(models: list[TargetModel]) -> Callable[[torch.Tensor], torch.Tensor]:
    """The predicted labels (K, M) of K models on one batch, each distinct encoder run once: a
    contrastive or Talos encoder serves both its task's and its membership task's layer, so the
    label-only queries of both inferences cost one encoding (the labels are those of
    `TargetModel.predict_labels`, bit for bit)."""

    def predict(images: torch.Tensor) -> torch.Tensor:
        embedded = {}
        for model in models:
            if id(model.encoder) not in embedded:
                embedded[id(model.encoder)] = model.embed(images)
        return torch.stack([model.posteriors_of(embedded[id(model.encoder)]).argmax(-1) for model in models])

    return predict


def _nn_attacks(inputs: torch.Tensor, is_member: torch.Tensor, spec: AttackSpec, seeds: list[int]) -> list:
    """One NN attack per model e on inputs[e] with seeds[e]: the models of one seed (one repeat)
    trained in one stacked computation (privssl.attacks.mia.train_attack_mlps)."""
    fitted = [None] * len(seeds)
    for seed in dict.fromkeys(seeds):
        chosen = [e for e, s in enumerate(seeds) if s == seed]
        for e, model in zip(chosen, train_attack_mlps(inputs[chosen], is_member, spec, seed)):
            fitted[e] = model
    return fitted


def evaluate(dataset: str, pairs: list[tuple[TargetModel, TargetModel]], data: dict[str, Split], n_attributes: int,
             settings: AttackSettings, seed: int, log: Callable[[str], None] = print,
             membership_task: bool = False) -> tuple[list[dict], list[tuple[dict, np.ndarray, np.ndarray]],
                                                     list[tuple[dict, np.ndarray, int]]]:
    """One row per (target model, attack): membership attacks and attribute inference; each
    membership row with its per-record scores and calls (the members, then the non-members), each
    attribute row with the attack's guess of every member's attribute and the majority baseline's
    one guess (contrastive_guess_table). `data`:
    the splits target_train (members), target_test, shadow_train, shadow_test and aux.
    `membership_task`: the models have membership models of a task of their own, whose attacks
    are rows of their own (inference `membership_task`) beside the task models' (`membership`).
    `seed`: the stage's; each repeat's models are attacked with their repeat's (attack_seed)."""
    members, nonmembers = data["target_train"], data["target_test"]
    shadow_in, shadow_out = data["shadow_train"], data["shadow_test"]
    is_member = torch.cat([torch.ones(len(members.task)), torch.zeros(len(nonmembers.task))]).bool()
    shadow_member = torch.cat([torch.ones(len(shadow_in.task)), torch.zeros(len(shadow_out.task))]).bool()
    shadow_members = shadow_member.numpy()
    target_images = torch.cat([members.images, nonmembers.images])
    shadow_images = torch.cat([shadow_in.images, shadow_out.images])
    queries = {MEMBERSHIP: (lambda m: m, lambda split: split.task)}
    if membership_task:
        queries[MEMBERSHIP_TASK] = (lambda m: m.membership_model(), lambda split: split.membership)

    seeds = [attack_seed(seed, target.repeat) for target, _ in pairs]

    def membership(inference: str, scores: torch.Tensor, threshold: float, attack: str,
                   e: int) -> tuple[dict, tuple[np.ndarray, np.ndarray]]:
        # the row, and its per-record scores and calls (member iff score >= threshold, as
        # membership_metrics decides): the reports read the row's decisions from the calls
        values = scores.double().numpy()
        metrics = membership_metrics(values, is_member.numpy(), threshold, settings.fpr, settings.bootstrap, seeds[e])
        return ({"inference": inference, "attack": attack, "n": metrics["n_members"] + metrics["n_nonmembers"],
                 **metrics}, (values, finite_scores(values) >= threshold))

    rows, scored, guessed = [], [], []
    # a few models, most of a minute each: one attack's row is the unit of the progress in `log`
    progress = Progress(log, "attacks on target models", len(pairs) * (len(queries) * len(MEMBERSHIP_ATTACKS) + 1))

    def add(row: dict, per_record: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        rows.append(row)
        if per_record is not None:
            scored.append((row, *per_record))
        progress.advance()

    labels = {inference: {"target": torch.cat([labels_of(members), labels_of(nonmembers)]),
                          "shadow": torch.cat([labels_of(shadow_in), labels_of(shadow_out)])}
              for inference, (_, labels_of) in queries.items()}
    augmentation = {}  # (e, role): every inference's scores (K, N), computed when the first needs them

    def augmentation_attack(e: int, role: str, model: TargetModel, images: torch.Tensor,
                            inference: str) -> torch.Tensor:
        # the same translated views for every inference: one pass serves them all (shared_label_predictor)
        if (e, role) not in augmentation:
            augmentation[e, role] = augmentation_scores(
                shared_label_predictor([queried(model) for queried, _ in queries.values()]), images,
                torch.stack([labels[name][role] for name in queries]), settings.translation)
        return augmentation[e, role][list(queries).index(inference)]

    label_only = {
        "label_only_augmentation": augmentation_attack,
        "label_only_boundary": lambda e, role, model, images, inference: boundary_distance_scores(
            queries[inference][0](model).predict_labels, images, labels[inference][role], settings.directions,
            settings.steps, seeds[e]),
    }
    bases = [_model_row(dataset, target, nonmembers) for target, _ in pairs]
    nn_accuracy = {}
    for inference, (queried, _) in queries.items():
        target_labels, shadow_labels = labels[inference]["target"], labels[inference]["shadow"]
        target_probs = torch.stack([queried(t).posteriors(target_images) for t, _ in pairs])
        shadow_probs = torch.stack([queried(s).posteriors(shadow_images) for _, s in pairs])
        # the NN attacks of every repeat's models in one stacked training (privssl.attacks.mia.train_attack_mlps)
        nn_models = _nn_attacks(nn_inputs(shadow_probs, shadow_labels), shadow_member, settings.nn, seeds)
        for e, (target, shadow) in enumerate(pairs):
            base = bases[e] | _fit(target_probs[e], target_labels, len(members.task))
            with torch.no_grad():
                nn_scores = torch.sigmoid(nn_models[e](nn_inputs(target_probs[e], target_labels)).squeeze(-1))
            nn_row, nn_values = membership(inference, nn_scores, 0.5, NN_ATTACK, e)
            nn_accuracy[e, inference] = nn_row["accuracy"]
            add(base | nn_row, nn_values)
            shadow_metrics = metric_scores(shadow_probs[e], shadow_labels)
            target_metrics = metric_scores(target_probs[e], target_labels)
            for attack in METRIC_ATTACKS:
                threshold = best_threshold(shadow_metrics[attack].numpy(), shadow_members)
                row, values = membership(inference, target_metrics[attack], threshold, attack, e)
                add(base | row, values)
            for attack, scores in label_only.items():
                threshold = best_threshold(scores(e, "shadow", shadow, shadow_images, inference).numpy(),
                                           shadow_members)
                row, values = membership(inference, scores(e, "target", target, target_images, inference),
                                         threshold, attack, e)
                add(base | row, values)
    aux = data["aux"]
    for e, (target, _) in enumerate(pairs):
        attacker = train_attribute_attack(target.embed(aux.images), aux.attribute, n_attributes, settings.attribute,
                                          seeds[e])
        inferred, guesses = attribute_accuracy(attacker, target.embed(members.images), members.attribute)
        baseline, majority = majority_baseline(aux.attribute, members.attribute)
        add(bases[e] | {"inference": ATTRIBUTE, "attack": ATTRIBUTE_ATTACK, **inferred, **baseline})
        guessed.append((rows[-1], guesses, majority))
        mias = ", ".join(f"{inference} {nn_accuracy[e, inference]:.3f}" for inference in queries)
        log(f"{dataset} {target.kind} lambda={target.lam} repeat={target.repeat}: task accuracy "
            f"{bases[e]['task_accuracy']:.3f}, NN MIA ({mias}), attribute inference {inferred['accuracy']:.3f}")
    return rows, scored, guessed
