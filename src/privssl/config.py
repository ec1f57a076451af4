"""Config validation: each config file read strictly (a YAML error names its file and line, a key
given twice is refused), the JSON schema, then the checks a schema cannot express
(privssl.config_checks) and the data files a run without download needs. Runs in the Snakefile
before the DAG is built, so a bad config fails before any job starts and writes nothing."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path

import jsonschema
import yaml

from privssl.config_checks import (
    ConfigError,
    check_batch_sizes,
    check_contrastive,
    check_graph_generator,
    check_link_stealing,
    check_membership_evaluation,
    check_semileak,
    check_sensitivity,
    check_training_time,
    check_tuning,
)
from privssl.data.splits import (
    DATASETS,
    DEBIAN_FASHION_MNIST,
    check_split_sizes,
)
from privssl.graphs.splits import check_node_split_sizes

# libyaml's loader where PyYAML was built with it: the schema (~2,300 nodes) takes 0.1 s in pure
# Python, paid by every Snakemake start and every validation
try:
    from yaml import CSafeLoader as SchemaLoader
except ImportError:
    from yaml import SafeLoader as SchemaLoader

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
    schema = yaml.load(Path(schema_path).read_text(), Loader=SchemaLoader)
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
