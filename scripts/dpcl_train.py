#!/usr/bin/env python
"""Rule `dpcl_train`: DPCL releases (seed 004). For every variant (naive DP-SGD, DPCL) and every
target ε: the public SimCLR encoder is fine-tuned contrastively on the private set d by DP-SGD
(privssl.training.dpcl), then a linear head is trained on its features of d by DP-SGD (privssl.training.private_sgd);
one noise multiplier σ for every mechanism, calibrated so that the RDP accountant for sampling
without replacement gives (ε, δ) for the whole release (encoder and head). The attacker's
adaptive shadow is trained the same way, at the same ε, on its own shadow records.

σ for every (variant, ε, role) is calibrated before any training; an ε the accountant cannot
reach stops the job with nothing written."""

import argparse
import math
import time
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from privssl.accounting.dpcl import calibrate, epsilon, poisson_epsilon
from privssl.accounting.dpcl_spec import (
    SSE_SENSITIVITY,
    dpcl_phases,
    gradient_sensitivity,
    mean_sensitivity,
    mechanisms,
    similarity_sensitivity,
)
from privssl.artefacts.image import load_encoder, load_private_sets
from privssl.cli import device_argument, json_object, positive_float, thread_count
from privssl.io import Progress, atomic_torch_save, atomic_write_csv, pick_device, script_logger
from privssl.release.methods import DPCL_METHOD_OF_VARIANT, release_method
from privssl.release.training_time import EVALUATED, draw_seed, release_record, utility_rows
from privssl.training.dpcl import DPCLSpec, knn_accuracy, train_dpcl
from privssl.training.encoders import encode, projection_head, split_for_training, unit_float
from privssl.training.private_sgd import PrivateSGDSpec, predict_proba, train_private_classifier
from privssl.training.simclr import SimCLRSpec

ROLES = ("target", "shadow")  # trained on d / on the attacker's shadow records


def sensitivity_statement(section: dict, variant: str) -> str:
    """The sensitivities behind the claim, in the paper's words."""
    enc, head = section["encoder"], section["head"]
    parts = [f"gradient Δ = {gradient_sensitivity(variant, enc['batch_size'], enc['clip_norm']):g} "
             f"({'4|B|C' if variant == 'naive' else '4C, heuristic'}, per-view C = {enc['clip_norm']:g})"]
    if variant == "dpcl" and section["objective"] == "simclr":
        parts.append(f"similarity matrix Δ_S = {similarity_sensitivity(2 * enc['batch_size']):.4g} (4√(2|B|−1))")
    if variant == "dpcl" and section["objective"] == "barlow_twins":
        parts.append(f"means Δ = {mean_sensitivity(enc['batch_size']):.4g} (2/N), SSEs Δ = {SSE_SENSITIVITY:g}")
    parts.append(f"head gradient Δ = {2 * head['clip_norm']:g} (2C)")
    return ", ".join(parts)


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--splits", required=True)
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--encoder", required=True, help="the public SimCLR encoder (.pt)")
    parser.add_argument("--attacker", required=True, help="the shadow rule's attacker file: its shadow records")
    parser.add_argument("--clean-accuracy", required=True, type=float, help="test accuracy of the clean release")
    parser.add_argument("--dpcl", required=True, type=json_object, help="the config section `dpcl`")
    parser.add_argument("--simclr", required=True, type=json_object, help="the config section `simclr` (augmentation)")
    parser.add_argument("--delta", required=True, type=positive_float)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-utility", required=True, nargs="+", help="one CSV per variant, in the section's order")
    parser.add_argument("--out-releases", required=True, nargs="+", help="one release file per variant")
    parser.add_argument("--out-history", required=True)
    parser.add_argument("--out-accounting", required=True)
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    args = parser.parse_args()
    if not 0 < args.clean_accuracy <= 1:
        parser.error(f"--clean-accuracy {args.clean_accuracy} is not allowed; allowed: (0, 1], the clean head's "
                     "accuracy")
    if not len(args.out_utility) == len(args.out_releases) == len(args.dpcl["variants"]):
        parser.error(f"--out-utility and --out-releases need one path per variant ({len(args.dpcl['variants'])})")
    return args


def calibrated_noise(section: dict, targets: list, delta: float, sizes: dict[str, int], log) -> tuple[dict, dict]:
    """σ and the accountant's ε of every (variant, ε index, role), for the role's `sizes` records,
    before any training: an unreachable ε fails here."""
    sigma, spent = {}, {}
    # a few seconds per search, most of a minute in all
    calibrations = Progress(log.info, "σ calibrations", len(section["variants"]) * len(targets) * len(ROLES))
    for variant in section["variants"]:
        for e, eps in enumerate(targets):
            for role in ROLES:
                n, key = sizes[role], (variant, e, role)
                if eps is None:
                    sigma[key] = section["noise_multiplier"]
                else:
                    sigma[key] = calibrate(eps, delta, dpcl_phases(section, variant, n)).scale
                spent[key] = epsilon(dpcl_phases(section, variant, n, sigma[key]), delta)
                log.info("%s ε target %s %s (n = %d): σ = %.4g, accountant ε = %.4g", variant, eps, role, n,
                         sigma[key], spent[key])
                calibrations.advance()
    return sigma, spent


def accounting_row(args, spec: DPCLSpec, method: str, eps, role: str, n: int, noise: float, spent: float) -> dict:
    """One (variant, ε, role)'s accounting: the claim's accountant, and the PLD accountant on the
    Poisson analogue (rate |B|/n, same steps): what Poisson sampling would cost."""
    section, variant = args.dpcl, spec.variant
    phases = dpcl_phases(section, variant, n, noise)
    return {"dataset": args.dataset, "method": method, "objective": section["objective"], "variant": variant,
            "role": role, "n": n, "eps_target": eps, "delta": args.delta, "noise_multiplier": noise,
            "mechanisms": ", ".join(mechanisms(spec.objective, variant)),
            "encoder_batch": phases[0].batch_size, "encoder_steps": phases[0].steps,
            "head_batch": phases[1].batch_size, "head_steps": phases[1].steps,
            "sensitivities": sensitivity_statement(section, variant),
            "eps_rdp_without_replacement": spent, "eps_pld_poisson": poisson_epsilon(phases, args.delta),
            "guarantee_kind": release_method(method).dp_kind}


@dataclass
class Releases:
    """What every training of a variant shares: the records of each role, the public encoder, the
    head's spec and the augmentation."""

    args: argparse.Namespace
    sets: object
    device: torch.device
    trained_on = {"target": "finetune", "shadow": "shadow_inside"}

    def train(self, spec: DPCLSpec, role: str, noise: float, keys: tuple, on_epoch) -> tuple[nn.Module, list[dict]]:
        """One training of the variant's encoder and head on the role's records at σ = noise (0: the
        noise-free limit, clipping kept), seeded by `keys`; the released network and its history."""
        args, sets, device, section = self.args, self.sets, self.device, self.args.dpcl
        images, labels = sets.images[self.trained_on[role]], sets.labels[self.trained_on[role]]
        generator = torch.Generator().manual_seed(draw_seed(args.seed, *keys))
        torch.manual_seed(draw_seed(args.seed, *keys, 1))  # projector and head initialisation
        encoder = load_encoder(args.encoder, device)
        trunk, top = split_for_training(encoder, section["trainable"])
        model = nn.Sequential(top, projection_head(encoder.out_dim, args.simclr.get("width", 128))).to(device)
        monitor = (lambda epoch: {}) if on_epoch is None else (lambda epoch: on_epoch(encoder, epoch))
        rows = train_dpcl(trunk, model, images, spec, noise, SimCLRSpec.from_config(args.simclr).augmentation,
                          generator, monitor)
        features = encode(encoder, images, device)
        head = nn.Linear(encoder.out_dim, sets.n_classes).to(device)
        train_private_classifier(head, features, labels, PrivateSGDSpec.from_config(section["head"], "dpcl.head"),
                                 noise, generator)
        return nn.Sequential(encoder, head), rows

    def knn_monitor(self, variant: str, noise: float):
        """Per encoder epoch: the k-NN accuracy of its features and the privacy spent so far."""
        sets, section, n = self.sets, self.args.dpcl, len(self.sets.labels["finetune"])

        def on_epoch(encoder: nn.Module, epoch: int) -> dict:
            train = encode(encoder, sets.images["finetune"], self.device)
            test = encode(encoder, sets.images["test"], self.device)
            spent = epsilon(dpcl_phases(section, variant, n, noise, encoder_epochs=epoch), self.args.delta)
            return {"knn_accuracy": knn_accuracy(train, sets.labels["finetune"], test, sets.labels["test"],
                                                 section["knn_k"]),
                    "eps_spent": spent}
        return on_epoch


def variant_spec(section: dict, variant: str) -> DPCLSpec:
    """The contrastive fine-tuning of `variant` with the section's settings."""
    return DPCLSpec(objective=section["objective"], variant=variant, temperature=section["temperature"],
                    barlow_lambda=section["barlow_lambda"],
                    **{k: section["encoder"][k] for k in ("epochs", "batch_size", "clip_norm", "lr", "momentum")},
                    weight_decay=section["encoder"].get("weight_decay", 0.0))


def about_variant(section: dict, spec: DPCLSpec, n: int) -> dict:
    """What every utility row of the variant says of its mechanisms, trained on n records."""
    variant = spec.variant
    return {"sensitivity": gradient_sensitivity(variant, spec.batch_size, spec.clip_norm),
            "sensitivity_statement": sensitivity_statement(section, variant),
            "mechanisms": ", ".join(mechanisms(spec.objective, variant)) + " and the head's gradient",
            "sample_rate": spec.batch_size / n, "steps": sum(p.steps for p in dpcl_phases(section, variant, n))}


def private_trainings(releases: Releases, spec: DPCLSpec, v: int, targets: list, calibration: tuple[dict, dict],
                      about: dict, trainings: Progress, log) -> tuple[list[dict], dict, list[dict]]:
    """Every (ε, repeat, role)'s training of variant `v` at its calibrated σ: the targets' runs (their
    test decisions), the posteriors of every training (the targets' EVALUATED sets, the shadows'
    pairs) and the targets' histories."""
    args, sets, section = releases.args, releases.sets, releases.args.dpcl
    variant, method, (sigma, spent) = spec.variant, DPCL_METHOD_OF_VARIANT[spec.variant], calibration
    runs, history, probs = [], [], {"finetune": [], "nonmember": [], "test": [], "shadow_pairs": []}
    for e, eps in enumerate(targets):
        for repeat in range(section["repeats"]):
            for r, role in enumerate(ROLES):
                start, noise = time.monotonic(), sigma[variant, e, role]
                release, rows = releases.train(spec, role, noise, (v, e, repeat, r),
                                               releases.knn_monitor(variant, noise) if role == "target" else None)
                for name in EVALUATED if role == "target" else ("shadow_pairs",):
                    probs[name].append(predict_proba(release, sets.images[name], unit_float))
                log.info("%s ε %s repeat %d %s: σ = %.4g, %.1f s", variant, eps, repeat, role, noise,
                         time.monotonic() - start)
                trainings.advance()
                if role == "shadow":
                    continue
                released_eps = eps if eps is not None else spent[variant, e, role]
                history += [{"dataset": args.dataset, "method": method, "objective": section["objective"],
                             "eps": released_eps, "repeat": repeat, **row} for row in rows]
                runs.append({"eps": released_eps, "repeat": repeat,
                             "correct": probs["test"][-1].argmax(1) == sets.labels["test"],
                             "noise_multiplier": noise, "eps_spent": spent[variant, e, role], **about})
    return runs, probs, history


def noise_free_limit(releases: Releases, spec: DPCLSpec, v: int, n_targets: int, about: dict, trainings: Progress,
                     log) -> list[dict]:
    """The noise-free limit: the same training at σ = 0, clipping kept, one per repeat (seeded
    apart from every ε's), the target's only; a row of utility.csv, never released or attacked."""
    sets, limits = releases.sets, []
    for repeat in range(releases.args.dpcl["repeats"]):
        release, _ = releases.train(spec, "target", 0.0, (v, n_targets, repeat, 0), None)
        limits.append({"eps": math.inf, "repeat": repeat, "noise_multiplier": 0.0, "eps_spent": math.inf,
                       "correct": predict_proba(release, sets.images["test"], unit_float).argmax(1)
                       == sets.labels["test"], **about})
        trainings.advance()
    log.info("%s noise-free limit: test accuracy %s", spec.variant,
             [round(float(run["correct"].double().mean()), 4) for run in limits])
    return limits


def main() -> None:
    args = parse_arguments()
    log = script_logger("dpcl_train")
    section = args.dpcl
    variants = section["variants"]
    if args.threads:
        torch.set_num_threads(args.threads)
    sets = load_private_sets(args.splits, args.data_root, args.attacker)
    releases = Releases(args, sets, pick_device(args.device))
    sizes = {role: len(sets.labels[Releases.trained_on[role]]) for role in ROLES}
    targets = section["eps"] if section["eps"] is not None else [None]
    sigma, spent = calibrated_noise(section, targets, args.delta, sizes, log)
    history, accounting = [], []
    trainings = Progress(log.info, "trainings (variant × (ε × repeat × role + noise-free repeat))",
                         len(variants) * (len(targets) * len(ROLES) + 1) * section["repeats"])
    for v, variant in enumerate(variants):
        spec, method = variant_spec(section, variant), DPCL_METHOD_OF_VARIANT[variant]
        about = about_variant(section, spec, sizes["target"])
        runs, probs, trained = private_trainings(releases, spec, v, targets, (sigma, spent), about, trainings, log)
        history += trained
        accounting += [accounting_row(args, spec, method, eps, role, sizes[role], sigma[variant, e, role],
                                      spent[variant, e, role]) for e, eps in enumerate(targets) for role in ROLES]
        limits = noise_free_limit(releases, spec, v, len(targets), about, trainings, log)
        eps_axis = [run["eps"] for run in runs[::section["repeats"]]]
        atomic_torch_save(release_record(method, eps_axis, section["repeats"], sets.n_classes, probs),
                          args.out_releases[v])
        atomic_write_csv(utility_rows(args.dataset, method, runs + limits, args.delta, args.clean_accuracy),
                         args.out_utility[v])
    atomic_write_csv(pd.DataFrame(history), args.out_history)
    atomic_write_csv(pd.DataFrame(accounting), args.out_accounting)


if __name__ == "__main__":
    main()
