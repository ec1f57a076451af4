#!/usr/bin/env python
"""Rule `semileak_attack`: every membership attack of thesis Ch. 3 against every target of the
semi-supervised branch, each fitted on the shadow trained its way, at every checkpoint step:
A_NN, the four metric attacks and A_DA (K views, JS), for all, labelled and unlabelled members;
at the last step also A_DA over the views and similarity grids and the top-1 defence. Beside each
row the model's test and train accuracy (95 % Clopper–Pearson), its over-fitting and the JS
distance between the members' and non-members' prediction-entropy histograms (§3.4.4). The
trainings' histories are merged into one file, as they are: not private (statistics of the
training batches without noise), kept under diagnostics/not_private/."""

import argparse
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch

from privssl.artefacts.semileak import SCORE_KEY, SEMILEAK_HISTORY, load_semileak_models, load_semileak_splits
from privssl.artefacts.tables import load_csv_files
from privssl.attacks.mia import AttackSpec
from privssl.attacks.semi_leak import Case, Observed, Records, entropy_js_distance, run_attacks
from privssl.attacks.statistics import accuracy_interval
from privssl.cli import device_argument, expect_argument, json_object, nonnegative_int, thread_count
from privssl.data.images import load_pool
from privssl.io import (
    InputError,
    Progress,
    atomic_write_csv,
    atomic_write_parquet,
    pack_decisions,
    pick_device,
    script_logger,
)
from privssl.training.augment import AugmentSpec, strong, weak
from privssl.training.encoders import unit_float
from privssl.training.semi_supervised import posteriors
from privssl.training.semi_supervised_spec import ALGORITHMS, MEMBER_KINDS, SUPERVISED
from privssl.training.wide_resnet import build_network


def view_bank(images: torch.Tensor, views: int, augment: AugmentSpec, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`views` weak and `views` strong views of every image (n, K, C, H, W), drawn from `seed`."""
    generator = torch.Generator().manual_seed(seed)
    repeated = images.repeat_interleave(views, 0)
    shape = (len(images), views, *images.shape[1:])
    return weak(repeated, augment, generator).reshape(shape), strong(repeated, augment, generator).reshape(shape)


def view_posteriors(nets: dict, needed: dict, images: torch.Tensor, augment: AugmentSpec, seed: int,
                    device: torch.device, log: Callable[[str], None], chunk: int = 512) -> dict:
    """The posteriors (n, K, C) of the weak and of the strong views of `images` for every net, K =
    needed[key] (the first K of the views drawn). The views are drawn once per chunk of images
    (seeded by the chunk, so every net is queried with the same views and a chunk size changes
    nothing but memory) and never held for all images at once: 100 views of 30,000 CIFAR images
    would take 37 GB. `log` gets the progress, per chunk and net (a few chunks only)."""
    most = max(needed.values())
    out = {key: ([], []) for key in nets}
    starts = range(0, len(images), chunk)
    progress = Progress(log, f"views of {len(images)} records through {len(nets)} models, (chunk, model) pairs",
                        len(starts) * len(nets))
    for start in starts:
        weak_views, strong_views = view_bank(images[start:start + chunk], most, augment, seed * 1_000_003 + start)
        for key, net in nets.items():
            # float32: A_DA's distances need no more, and CIFAR-100's views take half the memory
            out[key][0].append(posteriors(net, weak_views[:, :needed[key]], device).float())
            out[key][1].append(posteriors(net, strong_views[:, :needed[key]], device).float())
            progress.advance()
    return {key: (torch.cat(w), torch.cat(s)) for key, (w, s) in out.items()}


def accuracy_columns(prefix: str, probs: torch.Tensor, labels: torch.Tensor) -> dict:
    """Accuracy with its interval and records, and each record's decision (the report pairs two
    models' accuracies on the same records)."""
    right = probs.argmax(-1) == labels
    value, lo, hi = accuracy_interval(int(right.sum()), len(labels))
    return {f"{prefix}_accuracy": value, f"{prefix}_accuracy_lo": lo, f"{prefix}_accuracy_hi": hi,
            f"n_{prefix}": len(labels), f"{prefix}_decisions": pack_decisions(right.numpy())}


def score_table(scored: list, pool_index, member) -> pd.DataFrame:
    """One line per (metrics row, record): the row's key, the record's index in the data set's
    pool, its membership and the attack's score, so that a metric can be recomputed, a score
    distribution plotted or the records joined with pandas."""
    parts = [pd.DataFrame({**{column: row[column] for column in SCORE_KEY}, "record": pool_index[s.records],
                           "member": member[s.records], "score": s.scores}) for row, s in scored]
    return pd.concat(parts, ignore_index=True)


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--splits", required=True)
    parser.add_argument("--data-root", required=True)
    parser.add_argument("--targets", nargs="+", required=True, help="semileak_train files of the role target")
    parser.add_argument("--shadows", nargs="+", required=True, help="... and of the role shadow, in the same order")
    parser.add_argument("--histories", nargs="+", required=True, help="every semileak_train history (not private)")
    parser.add_argument("--semileak", type=json_object, required=True,
                        help="the `semileak` section's augmentation, attack and defences (JSON)")
    parser.add_argument("--fpr", type=float, nargs="+", required=True)
    parser.add_argument("--bootstrap", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--repeat", type=nonnegative_int, required=True,
                        help="the repeat (independent training) of the targets and shadows, written in every row")
    parser.add_argument("--out", required=True, help="output: metrics.csv")
    parser.add_argument("--scores", required=True,
                        help="output: scores.parquet, every metrics row's per-record scores "
                             "(artefacts.semileak.SEMILEAK_SCORES)")
    parser.add_argument("--history", required=True,
                        help="output: every training's history in one file; not private (computed on the training "
                             "sets without noise)")
    parser.add_argument("--threads", type=thread_count, default=None)
    device_argument(parser)
    expect_argument(parser)
    return parser.parse_args()


def membership_records(splits: dict, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Records]:
    """(the target's records: members then non-members, as pool indices; the shadow's; what the
    attacks know of them: labels, membership and the member kinds all, labelled, unlabelled)."""
    parts = {name: torch.tensor(index) for name, index in splits["splits"].items()}
    target_index = torch.cat([parts["target_train"], parts["target_test"]])
    shadow_index = torch.cat([parts["shadow_train"], parts["shadow_test"]])
    target_member = torch.arange(len(target_index)) < len(parts["target_train"])
    labelled = torch.isin(target_index, torch.tensor(splits["labelled"]["target_train"]))
    records = Records(labels[shadow_index], torch.arange(len(shadow_index)) < len(parts["shadow_train"]),
                      labels[target_index], target_member,
                      {"all": target_member, "labelled": target_member & labelled,
                       "unlabelled": target_member & ~labelled})
    return target_index, shadow_index, records


def attack_plan(targets: list[str], shadows: list[str], dataset: str, attack: dict,
                device: torch.device) -> tuple[list, dict]:
    """Every released model (kind, ε, step) to attack, with its steps, its record and the A_DA
    settings (views, similarity) it is attacked with; and the target's and shadow's networks of
    each. A file's recorded kind must be the one its path names (…/target/<kind>.pt), and its
    shadow's too, with the same ε in the same order."""
    grid_views, grid_similarities = attack["views_grid"], attack["similarities"]
    default = (attack["views"], attack["similarity"])
    plan, nets = [], {"target": {}, "shadow": {}}
    for target_path, shadow_path in zip(targets, shadows):
        bundle = load_semileak_models(target_path, "target", Path(target_path).stem, dataset)
        shadow_bundle = load_semileak_models(shadow_path, "shadow", Path(target_path).stem, dataset)
        kind, steps = bundle["target"], bundle["steps"]
        if [m["eps"] for m in bundle["models"]] != [m["eps"] for m in shadow_bundle["models"]]:
            shadow_eps = [m["eps"] for m in shadow_bundle["models"]]
            raise InputError(f"{shadow_path}: the shadow models' ε {shadow_eps} differ "
                             f"from the targets' {[m['eps'] for m in bundle['models']]} in {target_path} (allowed: the "
                             "same ε, in the same order: each target is attacked with the shadow trained its way)")
        for model, shadow_model in zip(bundle["models"], shadow_bundle["models"]):
            for step in sorted(model["states"]):
                last = step == steps
                if kind not in ALGORITHMS and not last:
                    continue  # the supervised reference and DP-SGD: their released (last) model only
                settings = [default]
                if last and kind in ALGORITHMS:
                    settings = sorted({default, *((k, default[1]) for k in grid_views),
                                       *((default[0], s) for s in grid_similarities)})
                key = (kind, model["eps"], step)
                for role, states in (("target", model["states"]), ("shadow", shadow_model["states"])):
                    net = build_network(bundle["architecture"], bundle["in_channels"], bundle["n_classes"],
                                        bundle["width"], private=model["eps"] is not None).to(device)
                    net.load_state_dict(states[step])
                    nets[role][key] = net.eval()
                plan.append((key, steps, model, settings))
    return plan, nets


def observe(nets: dict, needed: dict, images: torch.Tensor, indices: dict, augment: AugmentSpec, seed: int,
            device: torch.device, log: Callable[[str], None]) -> dict:
    """(role, model key) -> what the attacks observe of the role's records: the clean posteriors
    and those of up to needed[key] weak and strong views (the shadow's views from seed + 1)."""
    observed = {}
    for role, index in indices.items():
        views = view_posteriors(nets[role], needed, images[index], augment, seed + (role == "shadow"), device, log)
        log(f"{role}: {len(nets[role])} models queried with up to {max(needed.values())} weak and "
            f"{max(needed.values())} strong views of {len(index)} records")
        for key, net in nets[role].items():
            observed[role, key] = Observed(posteriors(net, images[index], device), *views[key])
    return observed


def model_columns(model: dict, steps: int, clean: torch.Tensor, records: Records, seed: int) -> dict:
    """The columns of every row of one model: its steps, test and train accuracy, over-fitting, the
    JS distance of the entropy histograms and, for DP-SGD, its guarantee."""
    member, labels = records.target_member, records.target_labels
    columns = {"steps": steps, **accuracy_columns("test", clean[~member], labels[~member]),
               **accuracy_columns("train", clean[member], labels[member])}
    columns["overfitting"] = columns["train_accuracy"] - columns["test_accuracy"]
    columns["js_entropy"], columns["js_entropy_lo"], columns["js_entropy_hi"] = entropy_js_distance(
        clean[member], clean[~member], seed=seed)
    for extra in ("noise_multiplier", "eps_spent", "delta"):
        columns[extra] = model.get(extra, np.nan)
    columns["accountant"] = model.get("accountant", "")
    return columns


def attack_cases(plan: list, observed: dict, records: Records, dataset: str, repeat: int, cfg: dict, seed: int,
                 log: Callable[[str], None]) -> list[Case]:
    """One Case per (model, defence): its row key, the defended observations of target and shadow,
    its A_DA settings, member kinds and model columns."""
    default = (cfg["attack"]["views"], cfg["attack"]["similarity"])
    cases = []
    for key, steps, model, settings in plan:
        kind, eps, step = key
        last = step == steps
        columns = model_columns(model, steps, observed["target", key].clean, records, seed)
        defences = ["none", "top1"] if last and cfg["defences"]["top1"] and kind in ALGORITHMS else ["none"]
        kinds = ("all",) if kind == SUPERVISED else MEMBER_KINDS
        for defence in defences:
            row_key = {"dataset": dataset, "repeat": repeat, "target": kind,
                       "eps": np.nan if eps is None else float(eps), "step": step,
                       "defence": defence}
            cases.append(Case(row_key, observed["target", key].defended(defence),
                              observed["shadow", key].defended(defence),
                              settings if defence == "none" else [default], kinds, columns))
        early = " (early stopping)" if step == cfg["defences"]["early_stopping"] else ""
        log(f"{kind} eps {eps} step {step}: test accuracy {columns['test_accuracy']:.3f}, over-fitting "
            f"{columns['overfitting']:.3f}, JS (entropy) {columns['js_entropy']:.3f}{early}")
    return cases


def main() -> None:
    args = parse_arguments()
    log = script_logger("semileak_attack")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    cfg, attack = args.semileak, args.semileak["attack"]
    # every input checked before the attacks (minutes per job on the preset): the histories this job
    # only copies, and each model file's recorded kind against its path (results/…/<kind>.pt)
    history = load_csv_files(args.histories, SEMILEAK_HISTORY, args.expect)
    splits = load_semileak_splits(args.splits)
    dataset = splits["dataset"]
    pool = load_pool(dataset, args.data_root, recorded=splits["pool"])
    target_index, shadow_index, records = membership_records(splits, pool.labels)
    plan, nets = attack_plan(args.targets, args.shadows, dataset, attack, device)
    needed = {key: max(k for k, _ in settings) for key, _, _, settings in plan}
    observed = observe(nets, needed, unit_float(pool.images), {"target": target_index, "shadow": shadow_index},
                       AugmentSpec.from_config(cfg["augmentation"]), args.seed, device, log.info)
    cases = attack_cases(plan, observed, records, dataset, args.repeat, cfg, args.seed, log.info)
    scored = run_attacks(cases, records, AttackSpec.from_config(attack), tuple(args.fpr), args.bootstrap, args.seed,
                         attack["views"], attack["similarity"], log=log.info)
    frame = pd.DataFrame([row for row, _ in scored])
    atomic_write_csv(frame, args.out)
    atomic_write_parquet(score_table(scored, target_index.numpy(), records.target_member.numpy()), args.scores)
    atomic_write_csv(history.assign(dataset=dataset, repeat=args.repeat), args.history)
    log.info("%d rows", len(frame))


if __name__ == "__main__":
    main()
