"""Config validation: the JSON schema, then the checks a schema cannot express (split sizes
against the dataset's or graph's size, attack pairs against the shadow split, the sensitivity
sampler's m, ρ, γ and its reference pool). Runs in the Snakefile before the DAG is built, so a
bad config fails before any job starts and writes nothing."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import yaml

from privssl.graphs.splits import check_node_split_sizes
from privssl.random_dp import order_statistic_index
from privssl.splits import check_split_sizes


class ConfigError(ValueError):
    """A config value outside what is allowed; the message names the key."""


def _key(path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "<top level>"


def validate_config(config: dict, schema_path: str | Path) -> None:
    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for err in errors:
            allowed = err.schema.get("enum") if isinstance(err.schema, dict) else None
            hint = f" (allowed: {', '.join(map(str, allowed))})" if allowed else ""
            lines.append(f"config key '{_key(err.absolute_path)}': {err.message}{hint}")
        raise ConfigError("invalid config:\n  " + "\n  ".join(lines))
    if not config["datasets"] and not config.get("graphs"):
        raise ConfigError("config keys 'datasets' and 'graphs': both are empty (allowed: at least one image "
                          "dataset or graph)")
    image_check = lambda name, entry: check_split_sizes(name, entry["splits"])  # noqa: E731
    for section, check in (("datasets", image_check), ("graphs", check_graph_entry)):
        for dataset, entry in config.get(section, {}).items():
            try:
                check(dataset, entry)
            except ValueError as err:
                raise ConfigError(f"config key '{section}.{dataset}.splits': {err}") from err
            shadow, pairs = entry["splits"]["shadow"], config["attack"]["train_pairs"]
            if pairs // 2 > shadow // 2:
                raise ConfigError(
                    f"config key 'attack.train_pairs': {pairs} pairs need {pairs // 2} shadow 'in' and 'out' records "
                    f"each, but {section}.{dataset}.splits.shadow = {shadow} gives {shadow // 2} "
                    f"(allowed: <= {2 * (shadow // 2)})")
    check_sensitivity(config)
    check_membership_evaluation(config)


def check_membership_evaluation(config: dict) -> None:
    """The LiRA pool must hold 2|d| records (every shadow and target trains on |d| of them), and
    the one-run audit's canary slots and fillers must fit in it beside the fixed records."""
    lira, canaries = config["attack"]["lira"], config["audit"]["one_run"]["canaries"]
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


def check_graph_entry(name: str, entry: dict) -> None:
    """A generated graph needs its generator; a PyG graph must not have one."""
    generated = name.startswith("sbm")
    if generated != ("generator" in entry):
        raise ValueError(f"graph {name!r} {'needs' if generated else 'takes no'} 'generator' parameters "
                         f"(allowed: only for generated sbm* graphs)")
    check_node_split_sizes(name, entry)
