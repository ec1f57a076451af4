"""Config validation: each config file read strictly (a YAML error names its file and line, a key
given twice is refused), the JSON schema, then the checks a schema cannot express (split sizes
against the dataset's or graph's size, attack pairs against the shadow split, the sensitivity
sampler's m, ρ, γ and its reference pool, batch sizes against the sets they batch, the
contrastive branch's label maps and split sizes, the limits the jobs' code sets (k-NN's k, the
label-only translation, training the convnet's top only, the one-run audit's guesses, the
link-stealing graphs), the data files a run without download needs). Runs in the Snakefile
before the DAG is built, so a bad config fails before any job starts and writes nothing."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path

import jsonschema
import yaml

from privssl.audit.one_run_spec import check_guesses
from privssl.data.label_maps import CLASS_MAP, LABEL_MAPS, label_map
from privssl.data.splits import (
    DATASETS,
    DEBIAN_FASHION_MNIST,
    check_contrastive_sizes,
    check_semileak_sizes,
    check_split_sizes,
    labelled_public,
)
from privssl.graphs.splits import check_node_split_sizes, graph_nodes
from privssl.release.random_dp import order_statistic_index
from privssl.release.tuning_spec import SECTIONS, section_grids, tuned_sections


MAX_GRID_POINTS = 200  # a tuning section's points: the presets' largest grid has 16


class ConfigError(ValueError):
    """A config value outside what is allowed; the message names the key."""


# The key that makes Snakemake read a config file as a YTE template, whose `?` expressions are Python
YTE_SWITCH = "__use_yte__"


def load_config_file(path: str | Path) -> dict:
    """A config file as Snakemake reads it (YAML 1.1, of which JSON is a part), but strictly: a
    syntax error names the file, line and column (Snakemake's names neither), and a key given
    twice in one mapping, whose last value YAML lets win silently, is refused with both lines."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        _unique_keys(path, yaml.compose(text, Loader=yaml.SafeLoader), "")
        loaded = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark, start = err.problem_mark, err.context_mark  # where it went wrong, and where the open construct began
        context = f" ({err.context} at line {start.line + 1})" if err.context and start else ""
        raise ConfigError(f"config file {path}, line {mark.line + 1}, column {mark.column + 1}: {err.problem}"
                          f"{context}") from err
    if isinstance(loaded, dict) and YTE_SWITCH in loaded:
        raise ConfigError(f"config file {path} sets {YTE_SWITCH}: {loaded[YTE_SWITCH]!r}: a YTE template is "
                          "Python code, which Snakemake runs when it loads the file (for a --configfile, before this check); "
                          f"allowed: plain YAML only (docs/config.md): remove {YTE_SWITCH} and write the values")
    return loaded


def _unique_keys(path: str | Path, node: yaml.Node | None, where: str) -> None:
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _unique_keys(path, item, f"{where}[{i}]")
    if not isinstance(node, yaml.MappingNode):
        return
    seen = {}  # key -> where it was first given
    for key, value in node.value:
        if key.tag == "tag:yaml.org,2002:merge" or not isinstance(key, yaml.ScalarNode):  # `<<: *defaults` overrides
            _unique_keys(path, value, where)
            continue
        name = f"{where}.{key.value}" if where else key.value
        if name in seen:
            first, again = seen[name], key.start_mark
            at = (f"on line {again.line + 1}, columns {first.column + 1} and {again.column + 1}"
                  if first.line == again.line else f"on lines {first.line + 1} and {again.line + 1}")
            raise ConfigError(f"config file {path}: key '{name}' is given twice, {at} (allowed: each key once; YAML "
                              f"would keep the last silently)")
        seen[name] = key.start_mark
        _unique_keys(path, value, name)


def _key(path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "<top level>"


# JSON Schema's `integer` accepts 6.0 and its `number` accepts NaN and infinity (NaN even passes
# every minimum and maximum); a job would then fail on `--m 6.0` or release at ε = NaN. Here an
# integer is a Python int and a number is finite.
_TYPES = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many({
    "integer": lambda _, value: isinstance(value, int) and not isinstance(value, bool),
    "number": lambda _, value: (isinstance(value, (int, float)) and not isinstance(value, bool)
                                and math.isfinite(value)),
})
Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_TYPES)
# YAML 1.1 (PyYAML) reads a float only with a dot in its mantissa: 1e-5 is the string "1e-5".
_DOTLESS_EXPONENT = re.compile(r"^[-+]?\d+[eE][-+]?\d+$")


def _finite_message(err: jsonschema.ValidationError) -> str:
    """An infinite or NaN number (YAML's .inf, or inf and nan, which YAML 1.1 reads as strings)
    with the range the key allows; for ε, where the wish is a release without noise."""
    schema = err.schema if isinstance(err.schema, dict) else {}
    bounds = [f"{sign} {schema[bound]}" for bound, sign in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                                            ("maximum", "<="), ("exclusiveMaximum", "<"))
              if bound in schema]
    kind = "a finite number" if err.validator_value == "number" else "an integer"
    allowed = " and ".join([f"{kind} {bounds[0]}", *bounds[1:]]) if bounds else kind
    if "eps" in err.absolute_path and float(err.instance) == math.inf:
        allowed += "; ε = ∞, no noise, is the unprotected head, attacked and audited as method none in every run"
    return f"{err.instance} is not a finite number (allowed: {allowed})"


def _type_message(err: jsonschema.ValidationError) -> str:
    """The schema's `type` error with what to write instead."""
    value, wanted = err.instance, err.validator_value
    numeric = wanted in ("number", "integer")
    if isinstance(value, float) and not math.isfinite(value) and numeric:
        return _finite_message(err)
    if isinstance(value, float) and wanted == "integer" and value.is_integer():
        return f"{value} is not an integer (write {int(value)})"
    if isinstance(value, str) and numeric:
        if _DOTLESS_EXPONENT.match(value.strip()):
            mantissa, exponent = value.strip().lower().split("e")
            return (f"{value!r} is a string, not a number (write {mantissa}.0e{exponent}: YAML 1.1 reads {value} "
                    f"as a string)")
        try:
            number = float(value)
        except ValueError:
            return err.message
        if not math.isfinite(number):
            return _finite_message(err)
        return f"{value!r} is a string, not a number (write it without quotes)"
    if wanted == "boolean":
        return f"{value!r} is not a boolean (allowed: true, false)"
    return err.message


def _message(err: jsonschema.ValidationError) -> str:
    """One schema error as 'what is wrong (allowed: ...)'. A oneOf/anyOf error reports the branch
    whose type matched (e.g. 'head.batch_size: 0 is less than the minimum of 1 (or null)') rather
    than 'not valid under any of the given schemas'."""
    if err.validator in ("oneOf", "anyOf") and err.context:
        # a branch of another type, not an error inside the branch that fits (dpcl.eps: [inf])
        mismatched = [e for e in err.context if e.validator == "type" and not e.relative_path]
        others = [e for e in err.context if e not in mismatched]
        if not others:
            wanted = " or ".join(repr(e.validator_value) for e in mismatched)
            return f"{err.instance!r} is not of type {wanted}"
        alternatives = ", ".join(str(e.validator_value) for e in mismatched)
        return _message(jsonschema.exceptions.best_match(others)) + (f" (or {alternatives})" if alternatives else "")
    if err.validator == "type":
        return _type_message(err)
    schema = err.schema if isinstance(err.schema, dict) else {}
    if schema.get("enum"):
        return f"{err.message} (allowed: {', '.join(map(str, schema['enum']))})"
    if err.validator == "pattern" and "description" in schema:  # the names a pattern allows, not the regex
        return f"{err.instance!r} is not allowed (allowed: {schema['description']})"
    return err.message


def _yaml_scalar(text: str):
    """A scalar as a config file would read it (YAML 1.1): '10' -> 10, 'null' -> None; text that
    reads as anything but a number, boolean or null stays text."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if value is None or isinstance(value, (bool, int, float)) else text


def _retyped(value):
    if isinstance(value, Mapping):
        return {k: _retyped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_retyped(v) for v in value]
    return _yaml_scalar(value) if isinstance(value, str) else value


def _merge(config: dict, override: Mapping) -> None:
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            _merge(config[key], value)
        else:
            config[key] = value


def apply_nested_overrides(config: dict, overrides: Mapping) -> None:
    """Snakemake parses a nested `--config key={...}` value with YAML's BaseLoader, which reads
    every scalar as a string (`protect={eps: [1, 10]}` gives eps ['1', '10']). Re-read those
    scalars as a config file would, in place; top-level values (already typed by Snakemake) and
    text that is no number, boolean or null are left as they are."""
    nested = {key: _retyped(value) for key, value in overrides.items() if isinstance(value, (Mapping, list))}
    _merge(config, nested)


def validate_config(config: dict, schema_path: str | Path, overrides: Mapping | None = None) -> None:
    """Raise ConfigError naming the bad key. `overrides`: the `--config` values
    (workflow.config_settings.config), whose nested scalars are re-typed in `config` first."""
    if overrides:
        apply_nested_overrides(config, overrides)
    schema = yaml.safe_load(Path(schema_path).read_text())
    errors = sorted(Validator(schema).iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = [f"config key '{_key(err.absolute_path)}': {_message(err)}" for err in errors]
        raise ConfigError("invalid config:\n  " + "\n  ".join(lines))
    if not config["datasets"] and not config.get("graphs"):
        raise ConfigError("config keys 'datasets' and 'graphs': both are empty (allowed: at least one image "
                          "dataset or graph)")
    for name, entry in config.get("graphs", {}).items():
        check_graph_generator(name, entry)
    image_check = lambda name, entry: check_split_sizes(name, entry["splits"])  # noqa: E731
    for section, check in (("datasets", image_check), ("graphs", check_node_split_sizes)):
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
    check_link_stealing(config)
    check_contrastive(config)
    check_semileak(config)
    check_training_time(config)
    check_membership_evaluation(config)
    check_batch_sizes(config)
    check_tuning(config)
    check_data_present(config)


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
    rate = max(rate_labelled, rate_unlabelled)  # q of privssl.training.semi_supervised.sampling_rate
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


# The files the loaders open without downloading: the image data sets' from their registry entry
# (privssl.data.splits.DATASETS; Fashion-MNIST's may instead be .gz files in DEBIAN_FASHION_MNIST,
# which the loader lays out under data_root), PyG's under graph_data_root/<family>/<Name>/raw;
# tests/test_config.py checks these lists against torchvision's and PyG's own, which are not imported
# here: the Snakefile runs this module before any job, also where only Snakemake is installed
# (--use-conda).
IMAGE_FILES = {name: info.files for name, info in DATASETS.items() if info.files is not None}
FILELESS_DATASETS = tuple(name for name, info in DATASETS.items() if info.files is None)
_PLANETOID = ["x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"]
GRAPH_FILES = {name: (f"planetoid/{pyg}/raw", [f"ind.{name}.{part}" for part in _PLANETOID])
               for name, pyg in (("cora", "Cora"), ("citeseer", "CiteSeer"), ("pubmed", "PubMed"))}
# COX2 is read with its node attributes (features) and node labels (classes)
GRAPH_FILES["cox2"] = ("tu/COX2/raw", [f"COX2_{part}.txt" for part in ("A", "graph_indicator", "node_attributes",
                                                                        "node_labels")])


def check_data_present(config: dict) -> None:
    """Without download, every image dataset (but the bundled digits) and every PyG graph must be
    under its data root already (Fashion-MNIST: or in Debian's package); else the data job would
    fail, minutes into the run."""
    wanted = []
    if not config["download"]:
        wanted += [("data_root", "download", config["data_root"], name, *IMAGE_FILES[name])
                   for name in config["datasets"] if name not in FILELESS_DATASETS]
    if config.get("graphs") and not config["graph_download"]:
        wanted += [("graph_data_root", "graph_download", config["graph_data_root"], name, *GRAPH_FILES[name])
                   for name in config["graphs"] if name in GRAPH_FILES]
    for key, switch, root, name, folder, files in wanted:
        missing = [f for f in files if not (Path(root) / folder / f).is_file()]
        elsewhere = package = ""
        if name == "fashion_mnist":
            missing = [f for f in missing if not (DEBIAN_FASHION_MNIST / f"{f}.gz").is_file()]
            elsewhere = f", nor as .gz files in {DEBIAN_FASHION_MNIST}"
            package = (f", or Debian's package that puts them there as .gz files (`apt-get install "
                       f"dataset-fashion-mnist`, as root; the data rule lays them out under {key})")
        if missing:
            raise ConfigError(
                f"config key '{key}': {name} is not under {key} = {root} (missing {Path(root) / folder}/"
                f"{{{', '.join(missing)}}}{elsewhere}) and {switch} is false (allowed: a {key} holding {folder}/ "
                f"with these files{package}, or {switch}: true on a machine with internet; a relative {key} is "
                f"read from the working directory, {Path.cwd()})")
