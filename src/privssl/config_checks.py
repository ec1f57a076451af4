"""The checks of a config that its JSON schema cannot express: split sizes against the dataset's
or graph's size, attack pairs against the shadow split, the sensitivity sampler's m, ρ, γ and its
reference pool, batch sizes against the sets they batch, the contrastive branch's label maps and
split sizes, the limits the jobs' code sets (k-NN's k, the label-only translation, training the
convnet's top only, the one-run audit's guesses, the link-stealing graphs); and the advisories, what
a valid config asks for that the run will not do. privssl.config.validate_config runs them after the
schema, before the DAG is built."""

from __future__ import annotations

import math

from privssl.audit.one_run_spec import check_guesses
from privssl.data.label_maps import CLASS_MAP, LABEL_MAPS, label_map
from privssl.data.splits import (
    DATASETS,
    check_contrastive_sizes,
    check_semileak_sizes,
    labelled_public,
)
from privssl.graphs.splits import graph_nodes
from privssl.release.random_dp import order_statistic_index
from privssl.release.tuning_spec import SECTIONS, section_grids, tuned_sections


class ConfigError(ValueError):
    """A config value outside what is allowed; the message names the key."""


MAX_GRID_POINTS = 200  # a tuning section's points: the presets' largest grid has 16


def check_contrastive(config: dict) -> None:
    """The contrastive-privacy branch runs on image datasets of the config, with a label map of
    that dataset, and its four parts and auxiliary set fit beside the public pre-training split
    (the public encoder must not have seen a member or non-member)."""
    section = config.get("contrastive")
    if section is None:
        return
    for name, entry in section["datasets"].items():
        key = f"contrastive.datasets.{name}"
        if name not in config["datasets"]:
            raise ConfigError(f"config key '{key}': {name} is not among the image datasets "
                              f"(allowed: {', '.join(config['datasets']) or 'none'}: the branch starts from their "
                              f"public encoder)")
        for field in ("task", "membership_task"):
            if field in entry:
                try:
                    label_map(name, entry[field])
                except ValueError as err:
                    raise ConfigError(f"config key '{key}.{field}': {err}") from err
        if entry["task"] == CLASS_MAP:
            raise ConfigError(f"config key '{key}.task': {CLASS_MAP!r} is the attribute itself, so a model of it "
                              f"reveals the attribute by construction; the attribute claims need a coarser task "
                              f"(allowed: {', '.join(m for m in LABEL_MAPS[name] if m != CLASS_MAP)}); set "
                              f"membership_task: {CLASS_MAP} for the membership claims")
        try:
            check_contrastive_sizes(name, config["datasets"][name]["splits"], entry["part"], entry["aux"])
        except ValueError as err:
            raise ConfigError(f"config key '{key}': {err}") from err
        for stage, smallest in (("fine_tune", 2), ("supervised", 1)):  # a contrastive batch needs a negative
            batch = section[stage]["batch_size"]
            if not smallest <= batch <= entry["part"]:
                raise ConfigError(f"config key 'contrastive.{stage}.batch_size': {batch} does not fit the training "
                                  f"set, {key}.part = {entry['part']} (allowed: {smallest}..{entry['part']})")
        shift, side = section["attacks"]["label_only"]["translation"], DATASETS[name].image_size
        if shift >= side:  # the label-only attack's shifted copies must keep a pixel of the image
            raise ConfigError(f"config key 'contrastive.attacks.label_only.translation': {shift} pixels do not fit the "
                              f"{side}×{side} images of {name} (allowed: 1..{side - 1})")


def check_semileak(config: dict) -> None:
    """The semi-supervised branch: its datasets among the image datasets (the data rule's), four
    parts with at least one labelled and one unlabelled image each, checkpoint steps that divide
    the training, an early-stopping step among them, padding that the reflect crop can do, and
    DP-SGD's Poisson sampling rates (B / labelled, μB / unlabelled) at most 1."""
    section = config.get("semileak")
    if section is None:
        return
    train = section["train"]
    for name, entry in section["datasets"].items():
        key = f"semileak.datasets.{name}"
        if name not in config["datasets"]:
            raise ConfigError(f"config key '{key}': {name} is not among the image datasets (allowed: "
                              f"{', '.join(config['datasets']) or 'none'}: the data rule provides their images)")
        try:
            check_semileak_sizes(name, entry["part"], entry["labels"])
        except ValueError as err:
            raise ConfigError(f"config key '{key}': {err}") from err
        padding, side = section["augmentation"]["padding"], DATASETS[name].image_size
        if padding >= side:  # reflect padding needs a pixel to mirror
            raise ConfigError(f"config key 'semileak.augmentation.padding': {padding} pixels do not fit the "
                              f"{side}×{side} images of {name} (allowed: 0..{side - 1})")
        dpsgd = section["defences"].get("dpsgd")
        batch, unlabelled = train["batch_size"], train["batch_size"] * train["unlabelled_ratio"]
        if dpsgd is not None and (batch > entry["labels"] or unlabelled > entry["part"] - entry["labels"]):
            raise ConfigError(f"config key 'semileak.train.batch_size': DP-SGD samples B = {batch} of {key}.labels = "
                              f"{entry['labels']} labelled and μB = {unlabelled} of {entry['part'] - entry['labels']} "
                              f"unlabelled images per step (allowed: B <= labels and μB <= part - labels, sampling "
                              f"rates <= 1)")
        if dpsgd is not None:
            rates = (batch / entry["labels"], unlabelled / (entry["part"] - entry["labels"]))
            check_semileak_budget(config, name, dpsgd, *rates)
    steps, every = train["steps"], train["checkpoint_every"]
    if steps % every:
        raise ConfigError(f"config key 'semileak.train.checkpoint_every': {every} does not divide steps = {steps} "
                          f"(allowed: a divisor of semileak.train.steps, so that the last step is a checkpoint)")
    early = section["defences"]["early_stopping"]
    if early % every or early >= steps:
        raise ConfigError(f"config key 'semileak.defences.early_stopping': {early} is not a checkpoint before the last "
                          f"(allowed: {', '.join(map(str, range(every, steps, every))) or 'none: one checkpoint'})")


def check_semileak_budget(config: dict, name: str, dpsgd: dict, rate_labelled: float, rate_unlabelled: float) -> None:
    """Every ε of the Semi-Leak DP-SGD target reachable at the largest noise multiplier the
    calibration searches, before any job (semileak_train would refuse it only after the data rule):
    the closed-form bound first (no accountant import), then the accountant where it is not certain."""
    from privssl.accounting.rdp import MAX_MULTIPLIER, Phase, reachable_by_bound

    delta, accountant, steps = config["protect"]["delta"], config["dpsgd"]["accountant"], dpsgd["steps"]
    rate = max(rate_labelled, rate_unlabelled)  # q of privssl.training.semi_supervised_private.sampling_rate
    unsubsampled = [Phase(n=1, batch_size=1, steps=steps, noise_multipliers=(1.0,))]
    uncertain = [eps for eps in dpsgd["eps"] if not reachable_by_bound(eps, delta, unsubsampled, MAX_MULTIPLIER)]
    if not uncertain:
        return
    from privssl.accounting.dpsgd import accountant_epsilon

    floor = accountant_epsilon(MAX_MULTIPLIER, rate, steps, delta, accountant)
    unreachable = [eps for eps in uncertain if eps < floor]
    if unreachable:
        raise ConfigError(f"config key 'semileak.defences.dpsgd.eps': ε = {', '.join(map(str, unreachable))} cannot be "
                          f"reached on {name}: {steps} steps at sampling rate q = {rate:.4g} cost ε = {floor:.4g} at "
                          f"δ = {delta:g} by the {accountant} accountant even at noise multiplier {MAX_MULTIPLIER:g} "
                          f"(allowed: ε >= {floor:.4g} at these settings)")


def check_training_time(config: dict) -> None:
    """The training-time branches train on d and on the attacker's shadow half, so their batches
    must fit both; DPAdapter's pre-training batches must fit the public split; every target ε must
    be reachable by the accountant at the largest noise multiplier it searches (one accountant
    evaluation per set size, not a calibration)."""
    sections = [name for name in ("dpcl", "dpadapter") if name in config]
    if not sections:
        return
    if not config["datasets"]:
        raise ConfigError(f"config key '{sections[0]}': the branch needs an image dataset (allowed: with at least "
                          f"one entry in 'datasets', or without the section)")
    from privssl.accounting.dpcl_spec import dpcl_phases, fine_tune_phases
    from privssl.accounting.rdp import MAX_MULTIPLIER, reachable_by_bound

    encoder = config["simclr"]["encoder"]
    for name in sections:  # `top` keeps the convnet's convolutions fixed; a ResNet has no such split
        if config[name]["trainable"] == "top" and encoder != "convnet":
            raise ConfigError(f"config key '{name}.trainable': top trains the convnet's dense layer, but "
                              f"simclr.encoder = {encoder} (allowed: all, or simclr.encoder: convnet)")

    delta = config["protect"]["delta"]
    private_sizes = sorted({size for entry in config["datasets"].values()
                            for size in (entry["splits"]["finetune"], entry["splits"]["shadow"] // 2)})
    plans = []  # (key of the ε list, targets, phases builder)
    if "dpcl" in config:
        section = config["dpcl"]
        if (section["eps"] is None) == (section["noise_multiplier"] is None):
            raise ConfigError(f"config keys 'dpcl.eps' and 'dpcl.noise_multiplier': {section['eps']!r} and "
                              f"{section['noise_multiplier']!r} (allowed: exactly one of them given, the other null)")
        # the k-NN evaluation's labelled neighbours are the records of d the encoder was trained on
        d, name = min((entry["splits"]["finetune"], name) for name, entry in config["datasets"].items())
        if section["knn_k"] > d:
            raise ConfigError(f"config key 'dpcl.knn_k': {section['knn_k']} neighbours are more than the k-NN's "
                              f"labelled set, |d| = datasets.{name}.splits.finetune = {d} (allowed: 1..{d})")
        for variant in section["variants"]:
            plans.append(("dpcl.eps", section["eps"] or [], lambda n, s=section, v=variant: dpcl_phases(s, v, n)))
    if "dpadapter" in config:
        section = config["dpadapter"]
        # DPAdapter pre-trains a classifier on the public split's labels: its labelled images only
        public, name = min((labelled_public(name, entry["splits"]), name) for name, entry in config["datasets"].items())
        for batch in ("perturb_batch", "update_batch"):
            if section["pretrain"][batch] > public:
                raise ConfigError(f"config key 'dpadapter.pretrain.{batch}': {section['pretrain'][batch]} is larger "
                                  f"than the labelled images of {name}'s public split it samples, {public} (allowed: "
                                  f"1..{public}; a public split of unlabelled images alone, as STL-10's, cannot "
                                  f"pre-train DPAdapter's classifier)")
        if section["release_radius"] not in section["radii"]:
            raise ConfigError(f"config key 'dpadapter.release_radius': {section['release_radius']} is not among "
                              f"dpadapter.radii (allowed: {', '.join(map(str, section['radii']))})")
        plans.append(("dpadapter.eps", section["eps"], lambda n, s=section: fine_tune_phases(s, n)))
    for key, targets, phases_of in plans:
        for n in private_sizes:
            try:
                phases = phases_of(n)
            except ValueError as err:  # a batch larger than the private set
                raise ConfigError(f"config key '{err.args[0].split(' = ')[0]}': {err} (allowed: at most {n}, the "
                                  f"smallest private set: d or the attacker's shadow half)") from err
            unreachable = [eps for eps in targets if not reachable_by_bound(eps, delta, phases, MAX_MULTIPLIER)]
            if unreachable:  # not certain by the closed form: the accountant itself decides (dp_accounting's import)
                from privssl.accounting.dpcl import reachable

                unreachable = [eps for eps in unreachable if not reachable(eps, delta, phases)]
            if unreachable:
                raise ConfigError(f"config key '{key}': ε = {', '.join(map(str, unreachable))} cannot be reached with "
                                  f"{[(p.n, p.batch_size, p.steps) for p in phases]} (n, batch, steps) at δ = {delta:g}, "
                                  f"even at noise multiplier {MAX_MULTIPLIER:g} (allowed: larger ε, or fewer steps)")


def check_membership_evaluation(config: dict) -> None:
    """The LiRA pool must hold 2|d| records (every shadow and target trains on |d| of them), RMIA's
    population must lie outside it, and
    the one-run audit's canary slots and fillers must fit in it beside the fixed records; its
    guess fraction must give at least one guess on each side and no more guesses than canaries."""
    lira, canaries = config["attack"]["lira"], config["audit"]["one_run"]["canaries"]
    unknown = [e for e in config["audit"]["canary"]["eps"] if e not in config["protect"]["eps"]]
    if unknown:
        raise ConfigError(f"config key 'audit.canary.eps': {unknown} are not ε of the releases (allowed: values of "
                          f"protect.eps, {config['protect']['eps']})")
    if lira["rmia"]["population"] in lira["pool"]:
        raise ConfigError(f"config key 'attack.lira.rmia.population': {lira['rmia']['population']!r} is a split of the "
                          f"candidate pool {lira['pool']}; allowed: a split outside it (RMIA's z are in no head)")
    problem = check_guesses(config["audit"]["one_run"]["guess_fraction"], canaries)
    if problem:
        raise ConfigError(f"config key 'audit.one_run.guess_fraction': {problem}")
    for section in ("datasets", "graphs"):
        for name, entry in config.get(section, {}).items():
            splits = entry["splits"]
            pool, finetune = sum(splits[s] for s in lira["pool"]), splits["finetune"]
            if pool < 2 * finetune:
                raise ConfigError(
                    f"config key 'attack.lira.pool': the splits {lira['pool']} of {section}.{name} hold {pool} "
                    f"records (allowed: at least 2|d| = {2 * finetune}, so that every head trains on |d| of them)")
            if canaries > finetune:
                raise ConfigError(
                    f"config key 'audit.one_run.canaries': {canaries} canary slots do not fit in the training set of "
                    f"{section}.{name} (allowed: <= |d| = {finetune})")


def check_sensitivity(config: dict) -> None:
    """Population sampling needs γ > ρ, enough pairs for the order statistic, and a reference
    pool of at least |d| records in every dataset and graph."""
    sens = config["sensitivity"]
    if sens["sampling"] != "population":
        return
    try:
        order_statistic_index(sens["m"], sens["rho"], sens["gamma"])
    except ValueError as err:
        raise ConfigError(f"config key 'sensitivity': {err}") from err
    for section in ("datasets", "graphs"):
        for name, entry in config.get(section, {}).items():
            splits = entry["splits"]
            if splits["reference"] < splits["finetune"]:
                raise ConfigError(
                    f"config key '{section}.{name}.splits.reference': {splits['reference']} records are too few for "
                    f"sensitivity.sampling: population, which draws data sets of size |d| = finetune = "
                    f"{splits['finetune']} from it (allowed: reference >= {splits['finetune']}, or sampling: paper)")


def check_batch_sizes(config: dict) -> None:
    """A batch larger than the set it batches would silently become the whole set: SimCLR's over
    |D| (pretrain), the head's and DP-SGD's expected batch over |d| (finetune); the smallest such
    set of the config bounds the batch."""
    batches = [("simclr.batch_size", config.get("simclr", {}).get("batch_size"), "pretrain", "|D|", 2, ["datasets"]),
               ("head.batch_size", config["head"]["batch_size"], "finetune", "|d|", 1, ["datasets", "graphs"]),
               ("dpsgd.batch_size", config["dpsgd"]["batch_size"], "finetune", "|d|", 1, ["datasets", "graphs"])]
    for key, batch, split, symbol, smallest, sections in batches:
        sizes = [(entry["splits"][split], f"{section}.{name}.splits.{split}")
                 for section in sections for name, entry in config.get(section, {}).items()]
        if batch is not None and sizes and batch > min(sizes)[0]:
            size, where = min(sizes)
            full = ", or null: full batch" if key == "head.batch_size" else ""
            raise ConfigError(f"config key '{key}': {batch} is larger than {symbol} = {where} = {size} "
                              f"(allowed: {smallest}..{size}{full})")


def check_tuning(config: dict) -> None:
    """The tune rule trains each point on |d| reference records and scores it on the others, so
    every dataset and graph needs more reference records than |d|; a batch of a grid point is
    bounded by |d| as the section's own batch is (check_batch_sizes)."""
    for section in ("datasets", "graphs"):
        for name, entry in config.get(section, {}).items():
            splits = entry["splits"]
            if splits["reference"] <= splits["finetune"]:
                raise ConfigError(
                    f"config key '{section}.{name}.splits.reference': {splits['reference']} records leave none to "
                    f"score the tuning rule's points, which train on |d| = finetune = {splits['finetune']} of them "
                    f"(allowed: reference > {splits['finetune']}; 2 |d| gives as many validation as training records)")
    for grid in section_grids(config, "head"):
        if "hidden" in grid and set(grid.get("architecture", [config["head"]["architecture"]])) == {"linear"}:
            raise ConfigError(f"config key 'tuning.head.hidden': {grid['hidden']} are widths of an MLP's hidden "
                              f"layer, but that grid's heads are linear and have none (allowed: architecture mlp in "
                              f"the grid or in head.architecture, or no hidden in the grid)")
    for section in SECTIONS:
        points = sum(math.prod(len(values) for values in grid.values()) for grid in section_grids(config, section))
        if points > MAX_GRID_POINTS:
            raise ConfigError(f"config key 'tuning.{section}': {points} grid points (allowed: at most "
                              f"{MAX_GRID_POINTS}; each point is trained tuning.folds times, and the head's each "
                              f"time with its sampled Δ)")
    sizes = [entry["splits"]["finetune"] for section in ("datasets", "graphs")
             for entry in config.get(section, {}).values()]
    for key in ("head", "dpsgd"):
        batches = [b for grid in section_grids(config, key) for b in grid.get("batch_size", []) if b is not None]
        if sizes and batches and max(batches) > min(sizes):
            raise ConfigError(f"config key 'tuning.{key}.batch_size': {max(batches)} is larger than the smallest "
                              f"|d| = {min(sizes)} (allowed: 1..{min(sizes)})")


def advisories(config: dict) -> list[str]:
    """What a valid config asks for that the run will not do: said before any job (the Snakefile
    logs each as a warning), not refused, because config.yaml's defaults carry them into every
    config that narrows protect.mechanisms."""
    mechanisms = config["protect"]["mechanisms"]
    tuning, tuned = config.get("tuning", {}), tuned_sections(mechanisms)
    return [f"config key 'tuning.{section}' is not used: no method of protect.mechanisms ({', '.join(mechanisms)}) "
            f"trains with the {section} section, so its grid is not searched" for section in SECTIONS
            if section in tuning and section not in tuned]


def check_link_stealing(config: dict) -> None:
    """The target GCN trains on round(label_rate · N) labelled nodes, at least one; the attack
    dataset pairs every edge with a non-edge, so a generated graph needs edges, and fewer than half
    its node pairs as edges (by 4 standard deviations of the drawn count)."""
    for name, entry in config.get("graphs", {}).items():
        nodes, rate = graph_nodes(name, entry), config["link_stealing"]["gcn"]["label_rate"]
        if round(rate * nodes) < 1:
            raise ConfigError(f"config key 'link_stealing.gcn.label_rate': {rate} of the {nodes} nodes of "
                              f"graphs.{name} labels no node for the target GCN (allowed: > {0.5 / nodes:.3g})")
        if "generator" not in entry:
            continue
        p_in, p_out, pairs = entry["generator"]["p_in"], entry["generator"]["p_out"], nodes * (nodes - 1) / 2
        inside = sum(size * (size - 1) / 2 for size in entry["generator"]["block_sizes"])  # pairs within a block
        edges = p_in * inside + p_out * (pairs - inside)
        spread = math.sqrt(p_in * (1 - p_in) * inside + p_out * (1 - p_out) * (pairs - inside))
        if not 0 < edges <= pairs / 2 - 4 * spread:
            raise ConfigError(f"config key 'graphs.{name}.generator': p_in = {p_in} and p_out = {p_out} give "
                              f"{edges:.0f} ± {spread:.0f} edges of the {pairs:.0f} node pairs, but the link-stealing "
                              f"attacks pair every edge with a non-edge (allowed: some edges, and fewer than half the "
                              f"pairs by 4 standard deviations, e.g. p_in, p_out <= 0.4, not both 0)")


def check_graph_generator(name: str, entry: dict) -> None:
    """A generated graph needs its generator; a PyG graph must not have one."""
    generated = name.startswith("sbm")
    if generated and "generator" not in entry:
        raise ConfigError(f"config key 'graphs.{name}.generator': missing: graph {name!r} needs 'generator' "
                          f"parameters (allowed: generator: {{block_sizes, p_in, p_out, features, separation}})")
    if not generated and "generator" in entry:
        raise ConfigError(f"config key 'graphs.{name}.generator': graph {name!r} is read from graph_data_root and "
                          f"takes no generator (allowed: only for generated sbm* graphs)")
