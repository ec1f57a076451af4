"""Config validation beyond the schema's own keywords: integers and finite numbers, messages that
say what to write, nested --config overrides, batch sizes against their sets, and the data files
a run without download needs (tests/test_workflow.py runs the bad configs through Snakemake)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import privssl.config
from privssl.config import (
    FILELESS_DATASETS,
    GRAPH_FILES,
    IMAGE_FILES,
    ConfigError,
    apply_nested_overrides,
    load_config_file,
    validate_config,
)
from privssl.config_checks import advisories
from privssl.data.splits import DATASETS

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schemas" / "config.schema.yaml"
TINY = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
SPLITS = {"pretrain": 200, "finetune": 60, "nonmember": 60, "shadow": 120, "test": 100, "reference": 120}
NODE_SPLITS = {"finetune": 40, "nonmember": 40, "shadow": 60, "test": 40, "reference": 80}


def tiny(**sections) -> dict:
    config = copy.deepcopy(TINY)
    config.update(sections)
    return config


def refused(config: dict) -> str:
    with pytest.raises(ConfigError) as error:
        validate_config(config, SCHEMA)
    return str(error.value)


@pytest.mark.parametrize("key, value, expected", [
    (("sensitivity", "m"), 6.0, "config key 'sensitivity.m': 6.0 is not an integer (write 6)"),
    (("attack", "lira", "shadows"), 4.5, "config key 'attack.lira.shadows': 4.5 is not of type 'integer'"),
    (("seed",), True, "config key 'seed': True is not of type 'integer'"),
    (("protect", "delta"), float("nan"), "config key 'protect.delta': nan is not a finite number"),
    (("certified", "l2"), float("inf"), "config key 'certified.l2': inf is not a finite number"),
    (("head", "lr"), float("-inf"), "config key 'head.lr': -inf is not a finite number"),
    (("protect", "delta"), "1e-5", "config key 'protect.delta': '1e-5' is a string, not a number "
                                   "(write 1.0e-5: YAML 1.1 reads 1e-5 as a string)"),
    (("dpsgd", "lr"), "2E+3", "write 2.0e+3"),
    (("protect", "delta"), "0.5", "'0.5' is a string, not a number (write it without quotes)"),
    (("head", "batch_size"), 0, "config key 'head.batch_size': 0 is less than the minimum of 1 (or null)"),
    (("head", "batch_size"), "all", "config key 'head.batch_size': 'all' is not of type 'null' or 'integer'"),
    (("head", "precision"), "float16", "config key 'head.precision': 'float16' is not one of ['float64', 'float32'] "
                                       "(allowed: float64, float32)"),
    (("link_stealing", "gcn", "weight_decay_layers"), "second",
     "config key 'link_stealing.gcn.weight_decay_layers': 'second' is not one of ['first', 'all'] "
     "(allowed: first, all)"),
    (("link_stealing", "gcn", "normalize_features"), "yes",
     "config key 'link_stealing.gcn.normalize_features': 'yes' is not a boolean (allowed: true, false)"),
])
def test_schema_messages_say_what_to_write(key, value, expected):
    config = tiny()
    section = config
    for part in key[:-1]:
        section = section[part]
    section[key[-1]] = value
    assert expected in refused(config)


def test_a_list_of_head_grids_is_checked_grid_by_grid():
    config = tiny()
    config["tuning"]["head"] = [{}, {"architecture": ["linear"], "optimizer": ["sgd"], "lr": [0.5]}]
    validate_config(config, SCHEMA)  # {}: the configured head; the second grid: linear heads by SGD
    config["tuning"]["head"][1]["optimizer"] = ["lbfgs"]
    message = refused(config)
    assert "config key 'tuning.head'" in message and "lbfgs" in message
    config["tuning"]["head"][1]["optimizer"] = ["sgd"]
    config["tuning"]["head"][1]["batch_size"] = [26]  # above the smallest |d| (25), in the second grid
    assert "config key 'tuning.head.batch_size': 26 is larger than the smallest |d| = 25" in refused(config)


def test_a_nan_in_a_list_is_named_by_its_index():
    config = tiny()
    config["protect"]["eps"] = [1, float("nan")]
    assert "config key 'protect.eps[1]': nan is not a finite number" in refused(config)


def test_an_unknown_graph_lists_the_allowed_names_not_the_regex():
    config = tiny()
    config["graphs"]["reddit"] = config["graphs"].pop("sbm_shadow")
    message = refused(config)
    assert "config key 'graphs': 'reddit' is not allowed (allowed: cora, citeseer, pubmed, cox2, or sbm" in message
    assert "^(" not in message


def test_generator_errors_name_the_generator_key():
    config = tiny()
    del config["graphs"]["sbm"]["generator"]
    assert "config key 'graphs.sbm.generator': missing" in refused(config)
    config = tiny(graphs={"cora": {"generator": TINY["graphs"]["sbm"]["generator"], "splits": NODE_SPLITS}})
    assert "config key 'graphs.cora.generator': graph 'cora' is read from graph_data_root and takes no" \
        in refused(config)


@pytest.mark.parametrize("key, largest, message", [
    ("simclr", 200, "config key 'simclr.batch_size': 201 is larger than |D| = datasets.digits.splits.pretrain = 200 "
                    "(allowed: 2..200)"),
    # the smallest |d| of the tiny config is a graph's: the shared rules train the heads of both tracks
    ("head", 25, "config key 'head.batch_size': 26 is larger than |d| = graphs.sbm_shadow.splits.finetune = 25 "
                 "(allowed: 1..25, or null: full batch)"),
    ("dpsgd", 25, "config key 'dpsgd.batch_size': 26 is larger than |d| = graphs.sbm_shadow.splits.finetune = 25"),
])
def test_a_batch_larger_than_its_set_is_refused(key, largest, message):
    config = tiny()
    config[key]["batch_size"] = largest + 1
    assert message in refused(config)
    config[key]["batch_size"] = largest  # the whole set in one batch is allowed
    validate_config(config, SCHEMA)


def test_tuning_needs_more_reference_records_than_d_and_batches_within_d():
    config = tiny()
    config["datasets"]["digits"]["splits"]["reference"] = config["datasets"]["digits"]["splits"]["finetune"]
    assert ("config key 'datasets.digits.splits.reference': 60 records leave none to score the tuning rule's points, "
            "which train on |d| = finetune = 60 of them (allowed: reference > 60") in refused(config)
    config = tiny()
    config["tuning"] = {"dpsgd": {"batch_size": [10, 26]}}
    assert "config key 'tuning.dpsgd.batch_size': 26 is larger than the smallest |d| = 25 (allowed: 1..25)" \
        in refused(config)
    config["tuning"] = {"dpsgd": {"max_grad": [1.0]}}
    assert "config key 'tuning.dpsgd'" in refused(config)  # not a field DP-SGD tuning may vary


# --------------------------------------------------------------------------------- data on disk

def image_config(dataset: str, root: Path) -> dict:
    # the contrastive branch names the datasets it runs on: none here; DPAdapter needs labelled
    # public images, which STL-10's unlabelled-first public split of 200 lacks
    config = tiny(datasets={dataset: {"splits": SPLITS}}, data_root=str(root),
                  contrastive={**TINY["contrastive"], "datasets": {}}, semileak={**TINY["semileak"], "datasets": {}})
    config.pop("dpadapter")
    return config


def graph_config(graph: str, root: Path) -> dict:
    return tiny(graphs={graph: {"splits": NODE_SPLITS}, "sbm": TINY["graphs"]["sbm"]}, graph_data_root=str(root))


def place(root: Path, folder: str, files: list[str]) -> None:
    (root / folder).mkdir(parents=True, exist_ok=True)
    for name in files:
        (root / folder / name).write_bytes(b"")


def test_a_dataset_registered_as_reading_no_file_is_refused_by_the_file_loader(tmp_path, monkeypatch):
    # an entry of privssl.data.splits.DATASETS without its files would pass the offline check
    # unchecked and fail minutes into the run: the loader that reads files refuses it first
    import dataclasses

    from privssl.data import images

    monkeypatch.setitem(DATASETS, "cifar10", dataclasses.replace(DATASETS["cifar10"], files=None))
    with pytest.raises(ValueError, match="'cifar10' is registered as reading no file"):
        images.load_pool("cifar10", tmp_path / "data", download=False)
    assert not (tmp_path / "data").exists()  # refused before any folder is made


def test_only_the_bundled_and_the_generated_dataset_read_no_file():
    assert set(FILELESS_DATASETS) == {"digits", "synthetic_cifar"}  # the two loaders that build from no file


def test_every_schema_enum_of_image_datasets_is_the_registry(tmp_path):
    # the schema uses the image datasets' enum three times (datasets, contrastive.datasets,
    # semileak.datasets; one YAML anchor); a dataset registered in DATASETS but missing from it could
    # not be configured, and one left in it after leaving DATASETS would pass the schema
    def enums(node):
        if isinstance(node, dict):
            if "propertyNames" in node and "digits" in node["propertyNames"].get("enum", []):
                yield node["propertyNames"]["enum"]
            for value in node.values():
                yield from enums(value)
        elif isinstance(node, list):
            for value in node:
                yield from enums(value)

    found = list(enums(yaml.safe_load(SCHEMA.read_text())))
    assert len(found) == 3
    assert all(sorted(enum) == sorted(DATASETS) for enum in found), found


@pytest.mark.parametrize("dataset", sorted(IMAGE_FILES))
def test_an_image_dataset_without_its_files_is_refused_unless_downloaded(tmp_path, monkeypatch, dataset):
    # not the package this machine may have installed (tests/test_fashion_mnist.py tests that source)
    monkeypatch.setattr(privssl.config, "DEBIAN_FASHION_MNIST", tmp_path / "no-package")
    folder, files = IMAGE_FILES[dataset]
    message = refused(image_config(dataset, tmp_path))
    assert f"config key 'data_root': {dataset} is not under data_root = {tmp_path}" in message
    assert f"{files[0]}" in message and "download is false" in message
    validate_config({**image_config(dataset, tmp_path), "download": True}, SCHEMA)
    place(tmp_path, folder, files[:-1])
    assert f"missing {tmp_path / folder}/{{{files[-1]}}}" in refused(image_config(dataset, tmp_path))
    place(tmp_path, folder, files[-1:])
    validate_config(image_config(dataset, tmp_path), SCHEMA)


@pytest.mark.parametrize("graph", sorted(GRAPH_FILES))
def test_a_pyg_graph_without_its_raw_files_is_refused_unless_downloaded(tmp_path, graph):
    folder, files = GRAPH_FILES[graph]
    assert f"config key 'graph_data_root': {graph} is not under graph_data_root" \
        in refused(graph_config(graph, tmp_path))
    validate_config({**graph_config(graph, tmp_path), "graph_download": True}, SCHEMA)
    place(tmp_path, folder, files)
    validate_config(graph_config(graph, tmp_path), SCHEMA)


def test_a_relative_data_root_is_read_from_the_working_directory(tmp_path, monkeypatch):
    folder, files = IMAGE_FILES["cifar10"]
    place(tmp_path / "images", folder, files)
    monkeypatch.chdir(tmp_path)
    validate_config(image_config("cifar10", Path("images")), SCHEMA)
    assert f"working directory, {tmp_path}" in refused(image_config("cifar10", Path("elsewhere")))


def test_digits_and_generated_graphs_need_no_files(tmp_path):
    validate_config(tiny(data_root=str(tmp_path / "none"), graph_data_root=str(tmp_path / "none")), SCHEMA)


def test_the_image_file_lists_are_torchvisions():
    from torchvision import datasets

    for name, cls in (("cifar10", datasets.CIFAR10), ("cifar100", datasets.CIFAR100), ("stl10", datasets.STL10)):
        meta = [cls.meta["filename"]] if hasattr(cls, "meta") else []  # CIFAR's class names, checked too
        opened = [f for f, _ in cls.train_list + cls.test_list] + meta
        folder, files = IMAGE_FILES[name]
        assert (folder, sorted(files)) == (cls.base_folder, sorted(opened)), name
    # FashionMNIST opens the uncompressed files of its .gz resources, in its raw folder
    fashion = datasets.FashionMNIST.__new__(datasets.FashionMNIST)
    fashion.root = "ROOT"
    folder, files = IMAGE_FILES["fashion_mnist"]
    assert Path("ROOT", folder) == Path(fashion.raw_folder)
    assert sorted(files) == sorted(name.removesuffix(".gz") for name, _ in datasets.FashionMNIST.resources)


def test_the_graph_file_lists_hold_what_pyg_reads():
    from torch_geometric.datasets import Planetoid, TUDataset

    for name, (family, pyg_name) in {"cora": ("planetoid", "Cora"), "citeseer": ("planetoid", "CiteSeer"),
                                     "pubmed": ("planetoid", "PubMed"), "cox2": ("tu", "COX2")}.items():
        cls = Planetoid if family == "planetoid" else TUDataset
        folder, files = GRAPH_FILES[name]
        assert folder == f"{family}/{pyg_name}/raw"
        assert set(cls.raw_file_names.fget(SimpleNamespace(name=pyg_name))) <= set(files), name
    # COX2 is read with use_node_attr=True: its features and classes are in these two files
    assert {"COX2_node_attributes.txt", "COX2_node_labels.txt"} <= set(GRAPH_FILES["cox2"][1])


# --------------------------------------------------------------------------------- nested --config overrides

def overridden(overrides: dict) -> dict:
    """The config Snakemake hands the Snakefile for `--config` values: merged into the config file's
    values, every nested scalar a string (its BaseLoader), then re-typed by validate_config."""
    from snakemake.cli import parse_config
    from snakemake.utils import update_config

    parsed = parse_config([f"{key}={value}" for key, value in overrides.items()])
    config = tiny()
    update_config(config, parsed)
    validate_config(config, SCHEMA, overrides=parsed)
    return config


def test_snakemake_reads_nested_override_values_as_strings():
    # the behaviour the re-typing works around; if Snakemake changes it, the re-typing is moot
    from snakemake.cli import parse_config

    assert parse_config(["protect={eps: [1, 10]}"]) == {"protect": {"eps": ["1", "10"]}}


def test_nested_overrides_are_read_as_a_config_file_would_be():
    config = overridden({"protect": "{eps: [1, 10], delta: 1.0e-5}", "head": "{batch_size: null, lr: 0.1}",
                         "simclr": '{"augmentation": {"horizontal_flip": true}}'})
    assert config["protect"]["eps"] == [1, 10] and config["protect"]["delta"] == 1e-5
    assert config["protect"]["mechanisms"] == TINY["protect"]["mechanisms"]  # merged, not replaced
    assert config["head"]["batch_size"] is None and config["head"]["lr"] == 0.1
    assert config["simclr"]["augmentation"]["horizontal_flip"] is True


def test_nested_overrides_keep_text_as_text():
    config = overridden({"protect": "{mechanisms: [alm, laplace]}", "attack": "{lira: {pool: [finetune, test]}}"})
    assert config["protect"]["mechanisms"] == ["alm", "laplace"]
    assert config["attack"]["lira"]["pool"] == ["finetune", "test"]
    with pytest.raises(ConfigError, match=r"'protect.eps\[0\]': 'one' is not of type 'number'"):
        overridden({"protect": "{eps: [one]}"})
    with pytest.raises(ConfigError, match=r"'protect.delta': '1e-5' is a string, not a number \(write 1.0e-5"):
        overridden({"protect": "{delta: 1e-5}"})


def test_rmia_population_inside_the_candidate_pool_is_refused():
    # the tiny config's population is `shadow`: a pool that holds it would give z that some heads trained on
    with pytest.raises(ConfigError, match=r"'attack.lira.rmia.population': 'shadow' is a split of the candidate pool "
                                          r"\['finetune', 'shadow'\]; allowed: a split outside it"):
        overridden({"attack": "{lira: {pool: [finetune, shadow]}}"})
    assert overridden({"attack": "{lira: {pool: [finetune, shadow], rmia: {population: test}}}"})


def test_top_level_values_are_left_as_snakemake_typed_them():
    config = {"data_root": "2024", "protect": {"eps": ["1"]}}
    apply_nested_overrides(config, {"data_root": "2024", "protect": {"eps": ["1"]}})
    assert config == {"data_root": "2024", "protect": {"eps": [1]}}


# --------------------------------------------------------------------------------- limits the jobs' code sets

def with_value(key: str, value) -> dict:
    config = tiny()
    *parents, last = key.split(".")
    section = config
    for part in parents:
        section = section[part]
    section[last] = value
    return config


@pytest.mark.parametrize("key, largest_or_smallest, past_it, message", [
    # dpcl_train's k-NN evaluation takes its neighbours among the |d| = 60 records of d
    ("dpcl.knn_k", 60, 61, ("config key 'dpcl.knn_k': 61 neighbours are more than the k-NN's labelled set, |d| = "
                            "datasets.digits.splits.finetune = 60 (allowed: 1..60)")),
    # contrastive_attack's label-only attack shifts the 8×8 digits by up to `translation` pixels
    ("contrastive.attacks.label_only.translation", 7, 8,
     ("config key 'contrastive.attacks.label_only.translation': 8 pixels do not fit the 8×8 images of digits "
      "(allowed: 1..7)")),
    # audit_one_run guesses on round(fraction × 20 canaries / 2) per side, and would silently make one of 0
    ("audit.one_run.guess_fraction", 0.051, 0.05,
     ("config key 'audit.one_run.guess_fraction': 0.05 of 20 canaries gives 0 guesses on each side (allowed: > "
      "1/canaries = 0.05, for at least one guess \"in\" and one \"out\")")),
    # link_target's GCN trains on round(label_rate × N) nodes; the tiny config's smaller graph has 170
    ("link_stealing.gcn.label_rate", 0.003, 0.0029,
     ("config key 'link_stealing.gcn.label_rate': 0.0029 of the 170 nodes of graphs.sbm_shadow labels no node for "
      "the target GCN (allowed: > 0.00294)")),
])
def test_a_value_a_job_would_fail_on_is_refused_before_any_job(key, largest_or_smallest, past_it, message):
    assert message in refused(with_value(key, past_it))
    validate_config(with_value(key, largest_or_smallest), SCHEMA)


def test_the_one_run_guesses_fit_the_canaries():
    # round(1 × 3 / 2) = 2 guesses on each side of 3 canaries: one_run_guesses would refuse them
    config = with_value("audit.one_run.guess_fraction", 1)
    config["audit"]["one_run"]["canaries"] = 3
    assert ("config key 'audit.one_run.guess_fraction': 1 of 3 canaries gives 2 guesses on each side (allowed: > "
            "1/canaries = 0.3333, for at least one guess \"in\" and one \"out\", and < 1, for at most as many guesses "
            "as canaries)") in refused(config)
    config["audit"]["one_run"]["guess_fraction"] = 0.99
    validate_config(config, SCHEMA)
    config["audit"]["one_run"]["canaries"] = 1  # no fraction gives one guess on each side
    assert "config key 'audit.one_run.canaries': 1 is less than the minimum of 2" in refused(config)


def test_training_the_top_only_needs_the_convnet():
    config = tiny(simclr={**TINY["simclr"], "encoder": "resnet18"})
    assert ("config key 'dpcl.trainable': top trains the convnet's dense layer, but simclr.encoder = resnet18 "
            "(allowed: all, or simclr.encoder: convnet)") in refused(config)
    config["dpcl"]["trainable"] = "all"
    assert "config key 'dpadapter.trainable': top trains the convnet's dense layer" in refused(config)
    config["dpadapter"]["trainable"] = "all"
    validate_config(config, SCHEMA)


@pytest.mark.parametrize("p_in, p_out, message", [
    (0.6, 0.6, "p_in = 0.6 and p_out = 0.6 give 8619 ± 59 edges of the 14365 node pairs"),
    (0.0, 0.0, "p_in = 0.0 and p_out = 0.0 give 0 ± 0 edges of the 14365 node pairs"),
])
def test_a_generated_graph_needs_edges_and_as_many_non_edges(p_in, p_out, message):
    # the attack dataset pairs every edge with a non-edge (link_pairs.sample_non_edges), and has no pair without edges
    config = tiny()
    config["graphs"]["sbm_shadow"]["generator"].update(p_in=p_in, p_out=p_out)
    assert (f"config key 'graphs.sbm_shadow.generator': {message}, but the link-stealing attacks pair every edge "
            "with a non-edge (allowed: some edges, and fewer than half the pairs by 4 standard deviations") \
        in refused(config)
    config["graphs"]["sbm_shadow"]["generator"].update(p_in=0.4, p_out=0.4)
    validate_config(config, SCHEMA)


# --------------------------------------------------------------------------------- infinite numbers

@pytest.mark.parametrize("written, message", [
    (".inf", ("inf is not a finite number (allowed: a finite number > 0; ε = ∞, no noise, is the unprotected head, "
              "attacked and audited as method none in every run)")),
    ("inf", "inf is not a finite number (allowed: a finite number > 0; ε = ∞, no noise"),  # YAML 1.1: the string 'inf'
    ("nan", "nan is not a finite number (allowed: a finite number > 0)"),
    ('"1e5"', "'1e5' is a string, not a number (write 1.0e5: YAML 1.1 reads 1e5 as a string)"),
])
def test_an_infinite_eps_is_refused_with_what_is_allowed(tmp_path, written, message):
    path = tmp_path / "eps.yaml"
    path.write_text(f"protect:\n  eps: [{written}]\n")
    from_file = tiny()
    from_file["protect"].update(load_config_file(path)["protect"])
    with pytest.raises(ConfigError) as from_override:
        overridden({"protect": f"{{eps: [{written}]}}"})
    for shown in (refused(from_file), str(from_override.value)):
        assert f"config key 'protect.eps[0]': {message}" in shown and "without quotes" not in shown
        assert ("no noise" in shown) == ("inf" in written)


def test_an_infinite_number_in_a_one_of_names_its_range_not_the_types():
    config = tiny()
    config["dpcl"]["eps"] = [float("inf")]
    assert "config key 'dpcl.eps': inf is not a finite number (allowed: a finite number > 0; ε = ∞" in refused(config)
    config["protect"]["delta"] = float("-inf")
    assert "config key 'protect.delta': -inf is not a finite number (allowed: a finite number > 0 and < 1)" \
        in refused(config)


def test_dpadapter_needs_labelled_public_images():
    # STL-10's public split is unlabelled: DPAdapter's pre-trained classifier has no label to learn
    config = tiny(download=True, datasets={"stl10": {"splits": {
        "pretrain": 100000, "finetune": 500, "nonmember": 500, "shadow": 1000, "test": 500, "reference": 600}}})
    config.pop("contrastive")
    config.pop("semileak")
    assert re.search(r"dpadapter.pretrain.perturb_batch': \d+ is larger than the labelled images of stl10's public "
                     r"split it samples, 0 \(allowed: 1..0", refused(config)), refused(config)
    config["datasets"]["stl10"]["splits"]["pretrain"] = 100000 + 1000  # 1000 labelled images beside them
    validate_config(config, SCHEMA)


def test_a_tuning_grid_no_method_uses_is_said_not_refused():
    config = tiny(protect={**TINY["protect"], "mechanisms": ["alm", "dpsgd"]})  # still tunes the certified head
    validate_config(config, SCHEMA)
    assert advisories(config) == ["config key 'tuning.certified' is not used: no method of protect.mechanisms "
                                  "(alm, dpsgd) trains with the certified section, so its grid is not searched"]
    assert advisories(tiny()) == []


@pytest.mark.parametrize("key, largest, past_it", [
    ("seed", 2 ** 31 - 1, 2 ** 62),  # 2**62 overflowed torch.manual_seed when stage seeds were seed · 100 + stage
    ("attack.lira.rmia.gamma", 10, 1e6),  # no likelihood ratio reaches it: every RMIA score 0, AUC 0.5
    ("audit.canary.runs", 20000, 10 ** 12),  # (2 runs + 1) × steps traces: 7 TiB
    ("audit.canary.draws", 10 ** 6, 10 ** 12),
    ("tuning.folds", 20, 10 ** 9),
    ("head.epochs", 10 ** 7, 10 ** 12),
])
def test_a_size_no_job_could_hold_is_refused_before_any_job(key, largest, past_it):
    message = refused(with_value(key, past_it))
    assert f"config key '{key}': {past_it} is greater than the maximum of {largest}" in message
    validate_config(with_value(key, largest), SCHEMA)


def test_a_tuning_grid_of_too_many_points_is_refused_naming_its_size():
    config = tiny()
    config["tuning"]["dpsgd"] = {"lr": [0.01 * (i + 1) for i in range(199)], "epochs": [1, 2]}
    assert "config key 'tuning.dpsgd': 398 grid points (allowed: at most 200" in refused(config)
    config["tuning"]["dpsgd"] = {"lr": [0.01 * (i + 1) for i in range(100)], "epochs": [1, 2]}
    validate_config(config, SCHEMA)
