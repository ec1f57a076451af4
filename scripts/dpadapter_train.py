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

import pandas as pd
import torch

from privssl.accounting.dpcl import calibrate, epsilon
from privssl.accounting.dpcl_spec import fine_tune_phases
from privssl.artefacts import load_encoder, load_private_sets
from privssl.cli import device_argument, json_object, positive_float, thread_count
from privssl.io import Progress, atomic_torch_save, atomic_write_csv, pack_decisions, pick_device, script_logger
from privssl.release.training_time import EVALUATED, draw_seed, release_record, utility_rows
from privssl.training.dpadapter import downstream_model, pretrain_classifier
from privssl.training.encoders import split_for_training, unit_float
from privssl.training.private_sgd import REPLACE_ONE_FACTOR, PrivateSGDSpec, predict_proba, train_private_classifier
from privssl.training.sam import SAMSpec, robust_accuracy

METHOD = "dpadapter"
ROLES = ("target", "shadow")


def correct(model, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Whether the model classifies each image right (n,) bool."""
    return predict_proba(model, images, unit_float).argmax(1) == labels


def accuracy(model, images: torch.Tensor, labels: torch.Tensor) -> float:
    return correct(model, images, labels).double().mean().item()


def main() -> None:
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
    log = script_logger("dpadapter_train")
    if not 0 < args.clean_accuracy <= 1:
        parser.error(f"--clean-accuracy {args.clean_accuracy} is not allowed; allowed: (0, 1], the clean head's accuracy")
    section = args.dpadapter
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    sets = load_private_sets(args.splits, args.data_root, args.attacker)
    trained_on = {"target": "finetune", "shadow": "shadow_inside"}
    sam_spec = SAMSpec.from_config(section["pretrain"], prefix="dpadapter.pretrain")
    labelled = sets.labels["pretrain"] >= 0  # the classifier learns the public labels: labelled images only
    public_images, public_labels = sets.images["pretrain"][labelled], sets.labels["pretrain"][labelled]
    sam_spec.check_data_size(len(public_labels), prefix="dpadapter.pretrain")
    fine_tune = PrivateSGDSpec.from_config(section["fine_tune"], "dpadapter.fine_tune")
    if section["release_radius"] not in section["radii"]:
        parser.error(f"dpadapter.release_radius = {section['release_radius']} is not among dpadapter.radii "
                     f"{section['radii']}")

    # ---- σ of every (ε, role) before any training: an unreachable ε fails here
    sigma, spent = {}, {}
    for e, eps in enumerate(section["eps"]):
        for role in ROLES:
            n = len(sets.labels[trained_on[role]])
            sigma[e, role] = calibrate(eps, args.delta, fine_tune_phases(section, n)).scale
            spent[e, role] = epsilon(fine_tune_phases(section, n, sigma[e, role]), args.delta)
            log.info("ε target %g %s (n = %d): σ = %.4g, accountant ε = %.4g", eps, role, n, sigma[e, role],
                     spent[e, role])

    public = load_encoder(args.encoder, device)

    def fine_tuned(pretrained: torch.nn.Module, role: str, noise: float, keys: tuple) -> torch.nn.Module:
        """DP-SGD fine-tuning of a copy of `pretrained` on the role's records at σ = noise (0: the
        noise-free limit, clipping kept), its batches and head seeded by `keys`."""
        data = trained_on[role]
        generator = torch.Generator().manual_seed(draw_seed(args.seed, 1, *keys))
        model = downstream_model(pretrained, n_classes, draw_seed(args.seed, 2, *keys))
        trunk, top = split_for_training(model.encoder, section["trainable"])
        with torch.no_grad():  # the frozen trunk's output is fixed: computed once
            inputs = trunk(unit_float(sets.images[data]).to(device))
        train_private_classifier(torch.nn.Sequential(top, model.classifier), inputs, sets.labels[data],
                                 fine_tune, noise, generator)
        return model

    def about(n: int) -> dict:
        """What every utility row of the release says of its mechanism, for n training records."""
        return {"sensitivity": REPLACE_ONE_FACTOR * fine_tune.clip_norm,
                "sensitivity_statement": f"gradient Δ = {REPLACE_ONE_FACTOR * fine_tune.clip_norm:g} "
                                         f"(2C, per-example C = {fine_tune.clip_norm:g})",
                "mechanisms": "the fine-tuning gradient", "sample_rate": fine_tune.batch_size / n,
                "steps": fine_tune.steps(n)}

    pretrainings = [("standard", 0.0)] + [(kind, rho) for kind in ("sam", "dpadapter") for rho in section["radii"]]
    history, results, runs, limits = [], [], [], []
    probs = {name: [] for name in (*EVALUATED, "shadow_pairs")}
    n_classes, robust = sets.n_classes, section["robust"]
    for kind, rho in pretrainings:
        # one pre-training per repeat (a verdict about pre-training needs independent ones), each
        # repeat's initialisation and batch order shared by every kind, which then differ only in
        # the perturbation; repeat 0 keeps the seed of the single pre-training of earlier versions
        pretrained, pre_accuracy, pre_robust, pretraining_seeds = [], [], [], []
        for repeat in range(section["repeats"]):
            start = time.monotonic()
            pretraining_seeds.append(draw_seed(args.seed, 0, *((repeat,) if repeat else ())))
            model, rows = pretrain_classifier(kind, rho, sam_spec, public_images, public_labels, n_classes, public,
                                              pretraining_seeds[-1], log.info)
            pretrained.append(model.to(device))
            history += [{"dataset": args.dataset, "pretraining": kind, "rho": rho, "repeat": repeat, **row}
                        for row in rows]
            test_images, test_labels = sets.images["test"], sets.labels["test"]
            pre_accuracy.append(accuracy(model, test_images, test_labels))
            pre_robust.append(robust_accuracy(model, unit_float(test_images).to(device), test_labels.to(device),
                                              robust["noise"], robust["draws"],
                                              torch.Generator().manual_seed(args.seed))[0])
            log.info("%s ρ = %g pre-training %d pre-trained in %.1f s: accuracy %.4f, robust accuracy %.4f", kind,
                     rho, repeat, time.monotonic() - start, pre_accuracy[-1], pre_robust[-1])
        released = kind == METHOD and rho == section["release_radius"]
        fine_tunings = Progress(log.info, f"{kind} ρ = {rho:g} fine-tunings (ε × repeat)",
                                len(section["eps"]) * section["repeats"])
        for e, eps in enumerate(section["eps"]):
            for repeat in range(section["repeats"]):
                for r, role in enumerate(ROLES if released else ROLES[:1]):
                    data = trained_on[role]
                    model = fine_tuned(pretrained[repeat], role, sigma[e, role], (e, repeat, r))
                    if role == "shadow":
                        probs["shadow_pairs"].append(predict_proba(model, sets.images["shadow_pairs"], unit_float))
                        continue
                    down_correct = correct(model, test_images, test_labels)
                    down_accuracy = down_correct.double().mean().item()
                    down_robust, _ = robust_accuracy(model, unit_float(test_images).to(device), test_labels.to(device),
                                                     robust["noise"], robust["draws"],
                                                     torch.Generator().manual_seed(args.seed))
                    results.append({"dataset": args.dataset, "pretraining": kind, "rho": rho, "eps": eps,
                                    "repeat": repeat, "pretraining_seed": pretraining_seeds[repeat],
                                    "accuracy": down_accuracy, "n_test": len(test_labels),
                                    "decisions": pack_decisions(down_correct.cpu().numpy()),
                                    "robust_accuracy": down_robust, "pretrain_accuracy": pre_accuracy[repeat],
                                    "pretrain_robust_accuracy": pre_robust[repeat], "robust_noise": robust["noise"],
                                    "robust_draws": robust["draws"],
                                    "noise_multiplier": sigma[e, role], "eps_spent": spent[e, role]})
                    if released:
                        for name in EVALUATED:
                            probs[name].append(predict_proba(model, sets.images[name], unit_float))
                        runs.append({**about(len(sets.labels[data])), "eps": eps, "repeat": repeat,
                                     "correct": down_correct, "noise_multiplier": sigma[e, role],
                                     "eps_spent": spent[e, role]})
                fine_tunings.advance()
            log.info("%s ρ = %g ε = %g: downstream accuracy %s", kind, rho, eps,
                     [round(row["accuracy"], 4) for row in results[-section["repeats"]:]])
        if released:  # its noise-free limit: σ = 0, clipping kept, one per repeat, seeded apart from every ε's
            for repeat in range(section["repeats"]):
                noise = 0.0
                model = fine_tuned(pretrained[repeat], "target", noise, (len(section["eps"]), repeat, 0))
                limits.append({**about(len(sets.labels["finetune"])), "eps": math.inf, "repeat": repeat,
                               "correct": correct(model, test_images, test_labels), "noise_multiplier": noise,
                               "eps_spent": math.inf})
            log.info("%s ρ = %g noise-free limit: downstream accuracy %s", kind, rho,
                     [round(float(run["correct"].double().mean()), 4) for run in limits])
    atomic_torch_save(release_record(METHOD, list(section["eps"]), section["repeats"], n_classes, probs),
                      args.out_release)
    atomic_write_csv(utility_rows(args.dataset, METHOD, runs + limits, args.delta, args.clean_accuracy),
                     args.out_utility)
    atomic_write_csv(pd.DataFrame(results), args.out_results)
    atomic_write_csv(pd.DataFrame(history), args.out_history)


if __name__ == "__main__":
    main()
