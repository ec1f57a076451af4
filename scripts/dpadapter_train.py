#!/usr/bin/env python
"""Rule `dpadapter_train`: DPAdapter (seed 002) against standard pre-training and vanilla SAM.

Each pre-training (standard; vanilla SAM and DPAdapter at every radius ρ) trains the public SimCLR
encoder and a classifier on the public labelled split, once per repeat: each repeat's seeded
initialisation and batch order is shared by every kind, so the kinds are paired within a repeat
and the repeats are independent pre-trainings (the trainings behind a verdict about them). Its
accuracy and robust accuracy (Gaussian noise on every weight) are measured on the test split.
Each pre-trained network is then fine-tuned on the private set d by DP-SGD (privssl.training.private_sgd)
at every target ε, once per repeat, σ calibrated by the RDP accountant for sampling without
replacement. The
DPAdapter network at `release_radius` is the release of method `dpadapter`: its posteriors go to
the attack rule, beside the attacker's adaptive shadow fine-tuned the same way on its shadow
records. σ of every (ε, role) is calibrated before any training."""

import argparse
import math
import time
from dataclasses import dataclass, field

import pandas as pd
import torch

from privssl.accounting.dpcl import calibrate, epsilon
from privssl.accounting.dpcl_spec import fine_tune_phases
from privssl.artefacts.image import load_encoder, load_private_sets
from privssl.cli import device_argument, json_object, positive_float, thread_count
from privssl.io import Progress, atomic_torch_save, atomic_write_csv, pack_decisions, pick_device, script_logger
from privssl.release.training_time import EVALUATED, draw_seed, release_record, utility_rows
from privssl.training.dpadapter import downstream_model, pretrain_classifier
from privssl.training.encoders import split_for_training, unit_float
from privssl.training.private_sgd import REPLACE_ONE_FACTOR, PrivateSGDSpec, predict_proba, train_private_classifier
from privssl.training.sam import SAMSpec, SharedTrunkRobustness

METHOD = "dpadapter"
ROLES = ("target", "shadow")


def correct(model, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Whether the model classifies each image right (n,) bool."""
    return predict_proba(model, images, unit_float).argmax(1) == labels


def accuracy(model, images: torch.Tensor, labels: torch.Tensor) -> float:
    return correct(model, images, labels).double().mean().item()


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--splits", required=True)
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--encoder", required=True, help="the public SimCLR encoder (.pt) pre-training starts from")
    parser.add_argument("--attacker", required=True, help="the shadow rule's attacker file: its shadow records")
    parser.add_argument("--clean-accuracy", required=True, type=float, help="test accuracy of the clean release")
    parser.add_argument("--dpadapter", required=True, type=json_object, help="the config section `dpadapter`")
    parser.add_argument("--delta", required=True, type=positive_float)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-utility", required=True)
    parser.add_argument("--out-release", required=True)
    parser.add_argument("--out-results", required=True)
    parser.add_argument("--out-history", required=True)
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    args = parser.parse_args()
    if not 0 < args.clean_accuracy <= 1:
        parser.error(f"--clean-accuracy {args.clean_accuracy} is not allowed; allowed: (0, 1], the clean head's "
                     "accuracy")
    section = args.dpadapter
    if section["release_radius"] not in section["radii"]:
        parser.error(f"dpadapter.release_radius = {section['release_radius']} is not among dpadapter.radii "
                     f"{section['radii']}")
    return args


def calibrated_noise(section: dict, delta: float, sizes: dict[str, int], log) -> tuple[dict, dict]:
    """σ and the accountant's ε of every (ε index, role), for the role's `sizes` records, before
    any training: an unreachable ε fails here."""
    sigma, spent = {}, {}
    for e, eps in enumerate(section["eps"]):
        for role in ROLES:
            n = sizes[role]
            sigma[e, role] = calibrate(eps, delta, fine_tune_phases(section, n)).scale
            spent[e, role] = epsilon(fine_tune_phases(section, n, sigma[e, role]), delta)
            log.info("ε target %g %s (n = %d): σ = %.4g, accountant ε = %.4g", eps, role, n, sigma[e, role],
                     spent[e, role])
    return sigma, spent


@dataclass
class PreTraining:
    """One pre-trained network with its seed and its test accuracy, clean and under weight noise,
    and the noisy outputs of its frozen trunk, which its fine-tunings' robust accuracies reuse."""

    network: torch.nn.Module
    seed: int
    accuracy: float
    robust_accuracy: float
    robustness: SharedTrunkRobustness


def pretrainings(kind: str, rho: float, tuning: "FineTuning", public: dict, history: list, log) -> list[PreTraining]:
    """One pre-training of `kind` at radius `rho` per repeat (a verdict about pre-training needs
    independent ones), each repeat's initialisation and batch order shared by every kind, which
    then differ only in the perturbation; repeat 0 keeps the seed of the single pre-training of
    earlier versions. Appends the trainings' rows to `history`."""
    args, sets, device = tuning.args, tuning.sets, tuning.device
    section = args.dpadapter
    sam_spec = SAMSpec.from_config(section["pretrain"], prefix="dpadapter.pretrain")
    labelled = sets.labels["pretrain"] >= 0  # the classifier learns the public labels: labelled images only
    public_images, public_labels = sets.images["pretrain"][labelled], sets.labels["pretrain"][labelled]
    sam_spec.check_data_size(len(public_labels), prefix="dpadapter.pretrain")
    test_images, test_labels = sets.images["test"], sets.labels["test"]
    trained = []
    for repeat in range(section["repeats"]):
        start = time.monotonic()
        seed = draw_seed(args.seed, 0, *((repeat,) if repeat else ()))
        network, rows = pretrain_classifier(kind, rho, sam_spec, public_images, public_labels, sets.n_classes,
                                            public, seed, log.info)
        network.to(device)
        history += [{"dataset": args.dataset, "pretraining": kind, "rho": rho, "repeat": repeat, **row}
                    for row in rows]
        clean = accuracy(network, test_images, test_labels)
        # robust_accuracy's number bit for bit, the noisy trunk's outputs kept for the fine-tunings
        robustness = tuning.robustness()
        trained.append(PreTraining(network, seed, clean, tuning.robust_accuracy(network, robustness), robustness))
        log.info("%s ρ = %g pre-training %d pre-trained in %.1f s: accuracy %.4f, robust accuracy %.4f", kind, rho,
                 repeat, time.monotonic() - start, trained[-1].accuracy, trained[-1].robust_accuracy)
    return trained


@dataclass
class FineTuning:
    """What every DP-SGD fine-tuning of a pre-trained network shares: the records of each role,
    the spec and the calibrated noise of every (ε index, role)."""

    args: argparse.Namespace
    sets: object
    device: torch.device
    spec: PrivateSGDSpec
    sigma: dict
    spent: dict
    trained_on = {"target": "finetune", "shadow": "shadow_inside"}

    def train(self, pretrained: torch.nn.Module, role: str, noise: float, keys: tuple) -> torch.nn.Module:
        """DP-SGD fine-tuning of a copy of `pretrained` on the role's records at σ = noise (0: the
        noise-free limit, clipping kept), its batches and head seeded by `keys`."""
        data, seed = self.trained_on[role], self.args.seed
        generator = torch.Generator().manual_seed(draw_seed(seed, 1, *keys))
        model = downstream_model(pretrained, self.sets.n_classes, draw_seed(seed, 2, *keys))
        trunk, top = split_for_training(model.encoder, self.args.dpadapter["trainable"])
        with torch.no_grad():  # the frozen trunk's output is fixed: computed once
            inputs = trunk(unit_float(self.sets.images[data]).to(self.device))
        train_private_classifier(torch.nn.Sequential(top, model.classifier), inputs, self.sets.labels[data],
                                 self.spec, noise, generator)
        return model

    def about(self, role: str) -> dict:
        """What every utility row of the release says of its mechanism, trained on the role's records."""
        n, clip = len(self.sets.labels[self.trained_on[role]]), self.spec.clip_norm
        return {"sensitivity": REPLACE_ONE_FACTOR * clip,
                "sensitivity_statement": f"gradient Δ = {REPLACE_ONE_FACTOR * clip:g} (2C, per-example C = {clip:g})",
                "mechanisms": "the fine-tuning gradient", "sample_rate": self.spec.batch_size / n,
                "steps": self.spec.steps(n)}

    def robustness(self) -> SharedTrunkRobustness:
        """The robust accuracy of one pre-trained network and of its fine-tunings, its frozen
        trunk's noisy outputs computed once for all of them (the same numbers as `robust_accuracy`:
        the pre-trained network's top has the fine-tunings' shapes, its classes being the task's)."""
        robust = self.args.dpadapter["robust"]
        return SharedTrunkRobustness(unit_float(self.sets.images["test"]).to(self.device), robust["noise"],
                                     robust["draws"], self.args.seed)

    def robust_accuracy(self, model: torch.nn.Module, robustness: SharedTrunkRobustness) -> float:
        trunk, top = split_for_training(model.encoder, self.args.dpadapter["trainable"])
        return robustness.accuracy(trunk, torch.nn.Sequential(top, model.classifier),
                                   self.sets.labels["test"].to(self.device))[0]


@dataclass
class Outputs:
    """What the job writes, gathered over every pre-training: their histories, a results row of
    every target fine-tuning and, of the release, its utility runs, its noise-free limits and the
    posteriors the attack rule reads (the targets' EVALUATED sets, the shadows' pairs)."""

    history: list = field(default_factory=list)
    results: list = field(default_factory=list)
    runs: list = field(default_factory=list)
    limits: list = field(default_factory=list)
    probs: dict = field(default_factory=lambda: {name: [] for name in (*EVALUATED, "shadow_pairs")})


def fine_tunings(tuning: FineTuning, kind: str, rho: float, pretrained: list[PreTraining], released: bool,
                 out: Outputs, log) -> None:
    """Every (ε, repeat)'s DP-SGD fine-tuning of the repeat's pre-trained network: the target's
    and, of the released network, the attacker's shadow too. Appends their rows and posteriors
    to `out`."""
    args, sets, section = tuning.args, tuning.sets, tuning.args.dpadapter
    test_images, test_labels = sets.images["test"], sets.labels["test"]
    progress = Progress(log.info, f"{kind} ρ = {rho:g} fine-tunings (ε × repeat)",
                        len(section["eps"]) * section["repeats"])
    for e, eps in enumerate(section["eps"]):
        for repeat in range(section["repeats"]):
            for r, role in enumerate(ROLES if released else ROLES[:1]):
                model = tuning.train(pretrained[repeat].network, role, tuning.sigma[e, role], (e, repeat, r))
                if role == "shadow":
                    out.probs["shadow_pairs"].append(predict_proba(model, sets.images["shadow_pairs"], unit_float))
                    continue
                down_correct = correct(model, test_images, test_labels)
                noise = {"noise_multiplier": tuning.sigma[e, role], "eps_spent": tuning.spent[e, role]}
                out.results.append({"dataset": args.dataset, "pretraining": kind, "rho": rho, "eps": eps,
                                    "repeat": repeat, "pretraining_seed": pretrained[repeat].seed,
                                    "accuracy": down_correct.double().mean().item(), "n_test": len(test_labels),
                                    "decisions": pack_decisions(down_correct.cpu().numpy()),
                                    "robust_accuracy": tuning.robust_accuracy(model, pretrained[repeat].robustness),
                                    "pretrain_accuracy": pretrained[repeat].accuracy,
                                    "pretrain_robust_accuracy": pretrained[repeat].robust_accuracy,
                                    "robust_noise": section["robust"]["noise"],
                                    "robust_draws": section["robust"]["draws"], **noise})
                if released:
                    for name in EVALUATED:
                        out.probs[name].append(predict_proba(model, sets.images[name], unit_float))
                    out.runs.append({**tuning.about(role), "eps": eps, "repeat": repeat, "correct": down_correct,
                                     **noise})
            progress.advance()
        log.info("%s ρ = %g ε = %g: downstream accuracy %s", kind, rho, eps,
                 [round(row["accuracy"], 4) for row in out.results[-section["repeats"]:]])


def noise_free_limits(tuning: FineTuning, kind: str, rho: float, pretrained: list[PreTraining], out: Outputs,
                      log) -> None:
    """The release's noise-free limit: σ = 0, clipping kept, one per repeat, seeded apart from
    every ε's. Appends each repeat's utility run to `out`."""
    sets, section = tuning.sets, tuning.args.dpadapter
    for repeat in range(section["repeats"]):
        model = tuning.train(pretrained[repeat].network, "target", 0.0, (len(section["eps"]), repeat, 0))
        out.limits.append({**tuning.about("target"), "eps": math.inf, "repeat": repeat,
                           "correct": correct(model, sets.images["test"], sets.labels["test"]),
                           "noise_multiplier": 0.0, "eps_spent": math.inf})
    log.info("%s ρ = %g noise-free limit: downstream accuracy %s", kind, rho,
             [round(float(run["correct"].double().mean()), 4) for run in out.limits])


def main() -> None:
    args = parse_arguments()
    log = script_logger("dpadapter_train")
    section = args.dpadapter
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    sets = load_private_sets(args.splits, args.data_root, args.attacker)
    fine_tune = PrivateSGDSpec.from_config(section["fine_tune"], "dpadapter.fine_tune")
    sizes = {role: len(sets.labels[FineTuning.trained_on[role]]) for role in ROLES}
    tuning = FineTuning(args, sets, device, fine_tune, *calibrated_noise(section, args.delta, sizes, log))
    public = load_encoder(args.encoder, device)
    kinds = [("standard", 0.0)] + [(kind, rho) for kind in ("sam", "dpadapter") for rho in section["radii"]]
    out = Outputs()
    for kind, rho in kinds:
        pretrained = pretrainings(kind, rho, tuning, public, out.history, log)
        released = kind == METHOD and rho == section["release_radius"]
        fine_tunings(tuning, kind, rho, pretrained, released, out, log)
        if released:
            noise_free_limits(tuning, kind, rho, pretrained, out, log)
    atomic_torch_save(release_record(METHOD, list(section["eps"]), section["repeats"], sets.n_classes, out.probs),
                      args.out_release)
    atomic_write_csv(utility_rows(args.dataset, METHOD, out.runs + out.limits, args.delta, args.clean_accuracy),
                     args.out_utility)
    atomic_write_csv(pd.DataFrame(out.results), args.out_results)
    atomic_write_csv(pd.DataFrame(out.history), args.out_history)


if __name__ == "__main__":
    main()
