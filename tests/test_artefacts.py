"""The validated loaders of privssl.artefacts: what the producers write is accepted, and a
corrupted, truncated or out-of-range file is refused with an error naming the file and the field
(the issue: a sensitivity.json with Δ = 0 was released as "1-DP" with noise scale 0, and a
truncated utility.csv gave figures with exit code 0)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats
from warm_scripts import script_python

from privssl.artefacts.claims import PAPER_CLAIMS, THESIS_CLAIMS, THESIS_SEMILEAK
from privssl.artefacts.audits import AUDIT
from privssl.artefacts.graphs import GRAPH, load_graph_splits, load_link_target
from privssl.artefacts.graphs import LINK_KEY, LINK_SCORES, link_score_lines
from privssl.artefacts.image import (
    FEATURES,
    HEAD,
    LIRA_SCORES,
    MIA,
    MIA_SCORES,
    UTILITY,
    lira_score_table,
    load_image_splits,
    load_lira_heads,
    load_release,
    load_sensitivity,
    mia_score_table,
)
from privssl.artefacts.record_scores import split_records
from privssl.artefacts.semileak import SEMILEAK_SCORES, attach_score_ranks
from privssl.artefacts.splits import load_labelled_splits
from privssl.artefacts.specs import ArtefactError
from privssl.artefacts.tables import check_expected, load_csv_file, load_csv_files, load_tensor_file
from privssl.artefacts.training_time import DPCL_ACCOUNTING
from privssl.artefacts.tuning import best_noise_free_point, check_tuning_choice, parse_checking_choices
from privssl.audit.bounds import hypothesis_test_ceiling, one_run_ceiling
from privssl.data.splits import LABELLED_SPLITS, SPLITS
from privssl.io import atomic_write_csv, atomic_write_parquet, pack_decisions
from privssl.release.certified import CertifiedSpec, certified_sensitivity
from privssl.release.sensitivity import PopulationSampler, paper_sensitivity, population_sensitivity
from privssl.training.heads import HeadSpec

REPO = Path(__file__).resolve().parents[1]
SHAPES = {"weight": (4, 3), "bias": (3,)}  # a linear head: 4 features, 3 classes, 15 parameters


def refused(path: Path, field: str | None, load, *args) -> str:
    """Call the loader on `path`; it must raise ArtefactError naming the file (and the field)."""
    with pytest.raises(ArtefactError) as error:
        load(path, *args)
    message = str(error.value)
    assert message.startswith(f"{path}: " + (f"field '{field}': " if field else "")), message
    assert "(expected " in message, message
    return message


def save(obj, path: Path) -> Path:
    torch.save(obj, path)
    return path


def features(n_classes: int = 3, dim: int = 4, n: int = 6) -> dict:
    generator = torch.Generator().manual_seed(0)
    out = {"n_classes": n_classes}
    for split in LABELLED_SPLITS:
        out[split] = torch.randn(n, dim, generator=generator)
        out[f"{split}_labels"] = torch.arange(n) % n_classes
    return out


def head() -> dict:
    return {"params": {k: torch.randn(1, *s, dtype=torch.float64) for k, s in SHAPES.items()}, "shapes": SHAPES,
            "spec": {"architecture": "linear"}, "n_classes": 3}


def release(method: str = "laplace") -> dict:
    return {"method": method, "flat": torch.randn(2, 3, 15, dtype=torch.float64),
            "eps": torch.tensor([1.0, 10.0], dtype=torch.float64), "noise_scale": torch.tensor([2.0, 0.2]),
            "shapes": SHAPES, "clip_norm": None}


# --------------------------------------------------------------------------------- sensitivity records

@pytest.fixture(scope="module")
def sampled_records() -> dict:
    """Records as the sensitivity rule writes them (both samplers, on 24 random records)."""
    generator = torch.Generator().manual_seed(1)
    x, y = torch.randn(24, 4, generator=generator, dtype=torch.float64), torch.arange(24) % 3
    spec = HeadSpec(architecture="linear", epochs=20)
    population = population_sensitivity(spec, x, y, 3, n=8,
                                        sampler=PopulationSampler(20, 0.3, 0.5, seed=0, chunk_size=8))
    paper = paper_sensitivity(spec, x[:8], y[:8], 3, m=6, seed=0, chunk_size=8)
    return {"population": {**population, "pretrain_size": 100}, "paper": {**paper, "pretrain_size": None}}


def write_json(record: dict, path: Path) -> Path:
    path.write_text(json.dumps(record))
    return path


@pytest.mark.parametrize("sampling", ["population", "paper"])
def test_the_sensitivity_rules_records_are_accepted(tmp_path, sampled_records, sampling):
    record = sampled_records[sampling]
    assert load_sensitivity(write_json(record, tmp_path / "s.json")) == record


@pytest.mark.parametrize("field", ["delta1", "delta2"])
@pytest.mark.parametrize("value", [0.0, -0.5, float("nan"), float("inf")])
def test_a_sensitivity_that_is_not_finite_and_positive_is_refused(tmp_path, sampled_records, field, value):
    path = write_json({**sampled_records["population"], field: value}, tmp_path / "sensitivity.json")
    message = refused(path, field, load_sensitivity)
    assert "expected finite numbers in (0, inf)" in message


def test_a_sensitivity_other_than_the_kth_distance_is_refused(tmp_path, sampled_records):
    record = sampled_records["population"]
    kth = sorted(record["distances_l1"])[record["k"] - 1]
    path = write_json({**record, "delta1": kth / 2}, tmp_path / "sensitivity.json")
    assert f"the k = {record['k']}-th smallest of distances_l1" in refused(path, "delta1", load_sensitivity)


@pytest.mark.parametrize("change, field", [
    ({"gamma": 0.2}, "gamma"),  # must exceed rho = 0.3
    ({"k": 21}, "k"),  # k <= m = 20
    ({"distances_l2": [1.0] * 19}, "distances_l2"),  # one distance per pair
    ({"m": 20.5}, "m"),
    ({"guarantee_kind": "dp"}, "guarantee_kind"),
])
def test_a_sampled_record_must_be_consistent(tmp_path, sampled_records, change, field):
    path = write_json({**sampled_records["population"], **change}, tmp_path / "sensitivity.json")
    refused(path, field, load_sensitivity)


def test_the_certified_record_needs_a_positive_proven_bound(tmp_path):
    record = certified_sensitivity(150, 10, CertifiedSpec(clip_norm=1.0, l2=0.01, tolerance=1e-6))
    assert load_sensitivity(write_json(record, tmp_path / "ok.json")) == record  # delta1 is None
    refused(write_json({**record, "delta2": 0.0}, tmp_path / "zero.json"), "delta2", load_sensitivity)
    refused(write_json({k: v for k, v in record.items() if k != "delta2"}, tmp_path / "no.json"), "delta2",
            load_sensitivity)


def test_a_truncated_json_file_is_refused(tmp_path, sampled_records):
    path = tmp_path / "sensitivity.json"
    path.write_text(json.dumps(sampled_records["paper"])[:100])
    assert "not readable (JSONDecodeError" in refused(path, None, load_sensitivity)


# --------------------------------------------------------------------------------- tensor files

def test_a_release_file_as_protect_writes_it_is_accepted(tmp_path):
    loaded = load_release(save(release(), tmp_path / "laplace.pt"), "laplace")
    assert torch.equal(loaded["noise_scale"], release()["noise_scale"].to(loaded["noise_scale"].dtype))


@pytest.mark.parametrize("change, field", [
    ({"noise_scale": torch.tensor([2.0, float("nan")])}, "noise_scale"),
    ({"noise_scale": torch.tensor([2.0, 0.0])}, "noise_scale"),  # no noise at a finite ε
    ({"noise_scale": torch.tensor([2.0, -0.2])}, "noise_scale"),
    ({"noise_scale": torch.tensor([2.0])}, "noise_scale"),  # one per ε
    ({"eps": torch.tensor([0.0, 10.0], dtype=torch.float64)}, "eps"),
    ({"flat": torch.randn(2, 3, 14, dtype=torch.float64)}, "flat"),  # the shapes give 15 parameters
    ({"flat": torch.full((2, 3, 15), float("inf"), dtype=torch.float64)}, "flat"),
    ({"method": "foo"}, "method"),
    ({"clip_norm": 0.0}, "clip_norm"),
])
def test_a_broken_release_file_is_refused(tmp_path, change, field):
    refused(save({**release(), **change}, tmp_path / "laplace.pt"), field, load_release, "laplace")


def test_a_release_of_another_method_or_without_a_key_is_refused(tmp_path):
    assert "'laplace' (expected 'alm', as the reading rule's config asks" in refused(
        save(release(), tmp_path / "alm.pt"), "method", load_release, "alm")
    incomplete = {k: v for k, v in release().items() if k != "noise_scale"}
    assert "missing" in refused(save(incomplete, tmp_path / "r.pt"), "noise_scale", load_release, "laplace")


def test_a_release_of_another_eps_grid_is_refused(tmp_path):
    # a release file copied from a run of another config: well-formed, of the right method
    path = save(release(), tmp_path / "laplace.pt")
    grid = release()["eps"].tolist()
    assert load_release(path, "laplace", {"eps": grid})["method"] == "laplace"
    assert load_release(path, "laplace", {"eps": [int(e) if e.is_integer() else e for e in grid]})
    message = refused(path, "eps", load_release, "laplace", {"eps": [*grid, 100.0]})
    assert f"{grid!r} (expected {[*grid, 100.0]!r}" in message


def test_a_dpsgd_release_carries_the_settings_of_each_eps(tmp_path):
    spec = {"clip_norm": 1.0, "batch_size": 10, "epochs": 2, "lr": 0.5, "momentum": 0.5, "repeats": 3,
            "accountant": "pld"}
    ok = release("dpsgd") | {"specs": [spec, spec | {"epochs": 5}]}
    loaded = load_release(save(ok, tmp_path / "dpsgd.pt"), "dpsgd")
    assert [s.epochs for s in loaded["specs"]] == [2, 5]  # as DPSGDSpecs, one per ε
    assert "a list of 2 DP-SGD settings, one per ε" in refused(
        save(release("dpsgd"), tmp_path / "none.pt"), "specs", load_release, "dpsgd")
    assert "a list of 2 DP-SGD settings" in refused(
        save(ok | {"specs": [spec]}, tmp_path / "one.pt"), "specs", load_release, "dpsgd")
    assert "dpsgd.lr = -1" in refused(
        save(ok | {"specs": [spec, spec | {"lr": -1}]}, tmp_path / "bad.pt"), "specs", load_release, "dpsgd")


def test_a_truncated_tensor_file_is_refused(tmp_path):
    path = save(release(), tmp_path / "laplace.pt")
    path.write_bytes(path.read_bytes()[:200])
    assert "not readable" in refused(path, None, load_release, "laplace")


def test_features_must_agree_with_their_labels_and_each_other(tmp_path):
    load = lambda path: load_tensor_file(path, FEATURES)  # noqa: E731
    assert load(save(features(), tmp_path / "ok.pt"))["n_classes"] == 3
    cases = {"test_labels": {"test_labels": torch.tensor([0, 1, 2, 3, 0, 1])},  # 3 is no class of 3
             "finetune": {"finetune": torch.full((6, 4), float("nan"))},
             "shadow": {"shadow": torch.zeros(6, 5)},  # another feature width than finetune's 4
             "nonmember_labels": {"nonmember_labels": torch.zeros(5, dtype=torch.long)},  # 6 rows, 5 labels
             "reference_labels": {"reference_labels": torch.zeros(6)},  # float labels
             "n_classes": {"n_classes": 1}}
    for field, change in cases.items():
        refused(save({**features(), **change}, tmp_path / f"{field}.pt"), field, load)
    no_test = {k: v for k, v in features().items() if k != "test"}
    refused(save(no_test, tmp_path / "no_test.pt"), "test", load)


def test_a_heads_parameters_must_match_its_shapes(tmp_path):
    load = lambda path: load_tensor_file(path, HEAD)  # noqa: E731
    load(save(head(), tmp_path / "ok.pt"))
    wrong = head()
    wrong["params"]["bias"] = torch.zeros(1, 4, dtype=torch.float64)
    refused(save(wrong, tmp_path / "shape.pt"), "params.bias", load)
    wrong["params"]["bias"] = torch.full((1, 3), float("nan"), dtype=torch.float64)
    refused(save(wrong, tmp_path / "nan.pt"), "params.bias", load)
    del wrong["params"]["bias"]
    refused(save(wrong, tmp_path / "missing.pt"), "params", load)


def lira_heads(seed: int = 7) -> dict:
    from privssl.attacks.lira import draw_training_sets

    return {"flat": torch.zeros(5, 15, dtype=torch.float64), "sets": draw_training_sets(8, 4, 5, seed),
            "pool": ["finetune", "nonmember"], "pool_size": 8, "shapes": SHAPES, "clip_norm": None, "shadows": 3,
            "targets": 2, "head_kind": "finetune", "seed": seed}


def test_lira_heads_one_set_of_pool_indices_per_head(tmp_path):
    good = lira_heads()
    load_lira_heads(save(good, tmp_path / "ok.pt"), 4)
    assert "where |d| = 3" in refused(tmp_path / "ok.pt", "sets", load_lira_heads, 3)
    for change, field in (({"shadows": 4}, "flat"), ({"sets": torch.full((5, 4), 8)}, "sets"),
                          ({"sets": torch.zeros(4, 4, dtype=torch.long)}, "sets"), ({"pool": ["private"]}, "pool")):
        refused(save({**good, **change}, tmp_path / "heads.pt"), field, load_lira_heads, 4)


def test_lira_heads_whose_sets_are_not_the_recorded_draw_are_refused(tmp_path):
    # identical rows (every head on the same records) are well-formed, but every candidate is then
    # in all or none of the shadows, and LiRA's AUC is inflated (the issue: 0.85 against 0.77)
    good = lira_heads()
    same = good["sets"][0].expand(5, 4).clone()
    message = refused(save({**good, "sets": same}, tmp_path / "heads.pt"), "sets[1]", load_lira_heads, 4)
    assert "4 of 5 heads' sets differ" in message and "the draw of seed 7" in message
    refused(save({**good, "seed": 8}, tmp_path / "heads.pt"), "sets[0]", load_lira_heads, 4)
    # provenance: the seed, counts and head kind the reading rule's config gives
    path = save(good, tmp_path / "heads.pt")
    assert "8, as the reading rule's config asks" in refused(path, "seed", load_lira_heads, 4, {"seed": 8})
    refused(path, "head_kind", load_lira_heads, 4, {"head_kind": "certified"})


def test_graph_files_index_their_own_nodes(tmp_path):
    graph = {"name": "sbm", "x": torch.randn(5, 2), "edge_index": torch.tensor([[0, 1], [1, 0]]),
             "y": torch.tensor([0, 1, 0, 1, 0]), "n_classes": 2}
    load = lambda path: load_tensor_file(path, GRAPH)  # noqa: E731
    load(save(graph, tmp_path / "ok.pt"))
    refused(save({**graph, "edge_index": torch.tensor([[0, 5], [5, 0]])}, tmp_path / "edges.pt"), "edge_index", load)
    target = {"labelled": torch.zeros(2, 5, dtype=torch.bool), "posteriors": torch.full((2, 5, 2), 0.5),
              "reference": torch.full((2, 5, 2), 0.5), "pairs": torch.zeros(2, 3, 2, dtype=torch.long),
              "is_edge": torch.zeros(2, 3, dtype=torch.bool), "train": torch.zeros(2, 3, dtype=torch.bool)}
    load_link_target(save(target, tmp_path / "target.pt"), 5)
    assert "where N = 6" in refused(tmp_path / "target.pt", "labelled", load_link_target, 6)
    refused(save({**target, "posteriors": torch.full((2, 5, 2), 1.5)}, tmp_path / "p.pt"), "posteriors",
            load_link_target, 5)


def test_split_files_hold_disjoint_indices_into_the_pool(tmp_path):
    splits = {name: list(range(10 * i, 10 * i + 5)) for i, name in enumerate(SPLITS)}
    pool = {"size": 1797, "sha256": "0" * 64}  # scikit-learn's 1797 digits
    record = {"dataset": "digits", "seed": 0, "n_classes": 10, "pool": pool, "splits": splits}
    assert load_image_splits(write_json(record, tmp_path / "ok.json"))["splits"] == splits
    for other in (None, {**pool, "size": 1796}, {**pool, "sha256": "0" * 63}, {"size": 1797}):
        refused(write_json({**record, "pool": other}, tmp_path / "splits.json"), "pool", load_image_splits)
    for name, index, problem in (("test", [1, 2], "index 1 is also in splits.pretrain"),
                                 ("test", [-1], "-1 at index 0"), ("test", [1797], "1797 at index 0"),
                                 ("test", [1.5], "a list holding 1.5")):
        path = write_json({**record, "splits": {**splits, name: index}}, tmp_path / "splits.json")
        assert problem in refused(path, f"splits.{name}", load_image_splits)
    # a reader names the data set and the sizes of the splits its features were encoded from
    ok = write_json(record, tmp_path / "ok.json")
    assert load_image_splits(ok, "digits", {"finetune": 5, "nonmember": 5})["splits"] == splits
    assert "'cifar10', the data set of the reading rule" in refused(ok, "dataset", load_image_splits, "cifar10")
    assert "split sizes finetune 5 (expected those of the features encoded from it: finetune 6)" in refused(
        ok, "splits", load_image_splits, "digits", {"finetune": 6, "nonmember": 5})
    graph = {"dataset": "sbm", "num_nodes": 60, "splits": {name: splits[name] for name in LABELLED_SPLITS}}
    load_graph_splits(write_json(graph, tmp_path / "graph.json"))
    refused(write_json({**graph, "num_nodes": 50}, tmp_path / "graph.json"), "splits.reference",
            load_graph_splits)
    # the attack rule reads either kind by its data set's name
    graph_path = write_json(graph, tmp_path / "graph.json")
    assert load_labelled_splits(graph_path, "sbm", {"finetune": 5})["num_nodes"] == 60
    assert load_labelled_splits(ok, "digits", {"finetune": 5})["pool"] == pool
    refused(graph_path, "splits", load_labelled_splits, "sbm", {"finetune": 4})
    refused(graph_path, "dataset", load_labelled_splits, "cora")


# --------------------------------------------------------------------------------- tables

N_TEST = 100


def right_of(count: int, records: int = N_TEST) -> str:
    """A decisions cell: the first `count` of `records` right."""
    return pack_decisions(np.arange(records) < count)


def utility_rows(methods=("alm", "laplace"), eps=(1.0, 10.0), repeats=2) -> pd.DataFrame:
    return pd.DataFrame([{"dataset": "digits", "mechanism": m, "eps": e, "delta": 0.0, "repeat": r,
                          "noise_scale": 2.0 / e, "sensitivity_norm": "l1", "sensitivity": 2.0,
                          "guarantee_kind": "random_dp", "guarantee": "(1, γ=0.2)-random DP", "clean_accuracy": 0.9,
                          "accuracy": 0.5 + 0.01 * r, "utility_loss": 1 - (0.5 + 0.01 * r) / 0.9,
                          "n_test": N_TEST, "decisions": right_of(50 + r), "clean_decisions": right_of(90),
                          "best_clean_decisions": right_of(92)}
                         for m in methods for e in eps for r in range(repeats)])


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    atomic_write_csv(frame, path)
    return path


def test_a_complete_table_is_accepted(tmp_path):
    frame = load_csv_file(write_csv(utility_rows(), tmp_path / "utility.csv"), UTILITY)
    pd.testing.assert_frame_equal(frame, utility_rows(), check_dtype=False)


def test_a_table_cut_mid_line_is_refused(tmp_path):
    path = write_csv(utility_rows(), tmp_path / "utility.csv")
    path.write_bytes(path.read_bytes()[:-30])
    assert "the last line ends without a newline" in refused(path, None, load_csv_file, UTILITY)


def test_a_table_that_lost_its_last_rows_is_refused(tmp_path):
    path = write_csv(utility_rows()[:-1], tmp_path / "utility.csv")  # cut at a line end: still a valid CSV
    message = refused(path, "eps, repeat", load_csv_file, UTILITY)
    assert "the rows with dataset = digits, mechanism = laplace lack {'eps': '10.0', 'repeat': '1'}" in message


@pytest.mark.parametrize("column, value, problem", [
    ("accuracy", 1.2, "1.2 on line 4"),  # line 1 is the header: row 2 is on line 4
    ("accuracy", math.nan, "missing (NaN) on line 4"),
    ("noise_scale", 0.0, "0 on line 4"),
    ("mechanism", "magic", "'magic' on line 4"),
    ("guarantee", math.nan, "nan on line 4"),
    ("eps", "ten", "'ten' on line 4 is not a number"),
])
def test_a_bad_value_in_a_table_is_named_by_column_and_line(tmp_path, column, value, problem):
    frame = utility_rows()
    frame[column] = frame[column].astype(object)
    frame.loc[2, column] = value
    assert problem in refused(write_csv(frame, tmp_path / "utility.csv"), column, load_csv_file,
                              UTILITY)


def test_a_table_without_a_column_or_rows_is_refused(tmp_path):
    refused(write_csv(utility_rows().drop(columns="utility_loss"), tmp_path / "u.csv"), "utility_loss",
            load_csv_file, UTILITY)
    assert "a header without rows" in refused(write_csv(utility_rows()[:0], tmp_path / "u.csv"), None,
                                              load_csv_file, UTILITY)


def mia_rows() -> pd.DataFrame:
    rows = [{"dataset": "digits", "mechanism": m, "eps": e, "repeat": r, "attack": "shadow_mlp", "adaptive": True,
             "n_members": 50, "n_nonmembers": 50, "accuracy": 0.6, "accuracy_lo": 0.5, "accuracy_hi": 0.7,
             "auc": 0.6, "auc_lo": 0.5, "auc_hi": 0.7, "tpr_at_1pct_fpr": 0.02, "tpr_at_1pct_fpr_lo": 0.0,
             "tpr_at_1pct_fpr_hi": 0.1, "fp_at_1pct_fpr": 0}
            for m, e in (("none", math.nan), ("alm", 1.0), ("alm", 10.0)) for r in range(1 if m == "none" else 2)]
    return pd.DataFrame(rows)


def test_only_the_clean_head_has_no_epsilon(tmp_path):
    load_csv_file(write_csv(mia_rows(), tmp_path / "mia.csv"), MIA)
    frame = mia_rows()
    frame.loc[1, "eps"] = math.nan
    assert "missing (NaN) on line 3" in refused(write_csv(frame, tmp_path / "mia.csv"), "eps", load_csv_file,
                                                MIA)
    frame = mia_rows()
    frame.loc[3, "tpr_at_1pct_fpr_hi"] = 1.5  # a column matched by the prefix tpr_at_*
    refused(write_csv(frame, tmp_path / "mia.csv"), "tpr_at_1pct_fpr_hi", load_csv_file, MIA)


def test_a_truncated_gzip_table_is_refused(tmp_path):
    frame = mia_rows()
    path = write_csv(frame, tmp_path / "mia.csv.gz")
    assert len(load_csv_file(path, MIA)) == len(frame)
    path.write_bytes(path.read_bytes()[:-12])  # a gzip stream cut short
    assert "not readable" in refused(path, None, load_csv_file, MIA)


def lira_scores(attacks=("loss", "lira_online")) -> pd.DataFrame:
    """Per-record scores as the lira rule writes them: 2 target heads × 4 candidates per attack."""
    return pd.concat([pd.DataFrame({"dataset": "digits", "method": "none", "eps": math.nan, "attack": attack,
                                    "adaptive": True, "target": np.repeat([0, 1], 4),
                                    "split": np.tile(["finetune", "finetune", "nonmember", "nonmember"], 2),
                                    "record": np.tile([8, 3, 5, 0], 2), "member": [True, False] * 4,
                                    "score": np.linspace(-1, 1, 8)}) for attack in attacks], ignore_index=True)


def test_a_truncated_parquet_table_is_refused(tmp_path):
    path = tmp_path / "scores.parquet"
    atomic_write_parquet(lira_scores(), path)
    pd.testing.assert_frame_equal(load_csv_file(path, LIRA_SCORES), lira_scores())
    path.write_bytes(path.read_bytes()[:-12])  # the footer, where Parquet keeps its schema, lost
    assert "not readable" in refused(path, None, load_csv_file, LIRA_SCORES)


# --------------------------------------------------------------------------------- the scripts

def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    python = script_python()  # first: its server's socket goes into os.environ
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([python, str(REPO / "scripts" / name), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_figures_script_fails_on_a_truncated_utility_table(tmp_path):
    utility = write_csv(utility_rows(), tmp_path / "utility.csv")
    utility.write_bytes(utility.read_bytes()[:-30])
    mia = write_csv(mia_rows(), tmp_path / "mia.csv")
    figures = [tmp_path / f"fig{i}.png" for i in (1, 2, 3)]
    proc = run_script("plot_figures.py", "--utility", utility, "--mia", mia, "--mia-scores",
                      tmp_path / "scores_none.parquet", "--fig1", figures[0], "--fig2", figures[1], "--fig3",
                      figures[2])
    assert proc.returncode == 1
    assert proc.stderr == f"plot_figures.py: error: {utility}: the last line ends without a newline: the file is cut " \
                          "short (expected a complete CSV file, ending with a newline)\n"
    assert not any(f.exists() for f in figures)


def test_table1_refuses_a_zero_sensitivity(tmp_path, sampled_records):
    path = write_json({**sampled_records["population"], "delta2": 0.0}, tmp_path / "sensitivity.json")
    proc = run_script("make_table1.py", "--datasets", "digits", "--sensitivity", path, "--csv", tmp_path / "t.csv",
                      "--md", tmp_path / "t.md")
    assert proc.returncode == 1 and proc.stderr.startswith(f"make_table1.py: error: {path}: field 'delta2': 0 ")
    assert not (tmp_path / "t.csv").exists() and not (tmp_path / "t.md").exists()


def test_no_script_reads_an_artefact_past_the_validated_loaders():
    raw = re.compile(r"json\.loads?\(|torch\.load\(|load_tensors\(|pd\.read_csv\(|read_csvs\(")
    bypass = {p.name: raw.findall(p.read_text()) for p in (REPO / "scripts").glob("*.py")}
    assert {name: found for name, found in bypass.items() if found} == {}


# --------------------------------------------------------------------------------- the config's grid of rows

UTILITY_GRID = [{"dataset": ["digits"], "mechanism": ["alm", "laplace"], "eps": [1, 10], "repeat": [0, 1]}]


def test_a_table_with_every_row_of_the_configs_grid_is_accepted(tmp_path):
    load_csv_file(write_csv(utility_rows(), tmp_path / "utility.csv"), UTILITY, UTILITY_GRID)


def test_a_table_that_lost_a_whole_method_is_refused_by_the_configs_grid(tmp_path):
    # the rows of one method are gone: the file's own grid is complete, only the config knows
    path = write_csv(utility_rows(methods=("alm",)), tmp_path / "utility.csv")
    load_csv_file(path, UTILITY)
    message = refused(path, "dataset, mechanism, eps, repeat", load_csv_file, UTILITY,
                      UTILITY_GRID)
    assert "the row {dataset: digits, mechanism: laplace, eps: 1, repeat: 0} is missing (4 rows of the 8" in message


def test_a_row_outside_the_configs_grid_or_repeated_is_refused(tmp_path):
    other_eps = write_csv(utility_rows(eps=(1.0, 100.0)), tmp_path / "utility.csv")  # a run of another config
    assert "the row {dataset: digits, mechanism: alm, eps: 100, repeat: 0} on line 4 is not in the config's grid" in \
        refused(other_eps, "dataset, mechanism, eps, repeat", load_csv_file, UTILITY, UTILITY_GRID)
    twice = write_csv(pd.concat([utility_rows(), utility_rows()[:1]]), tmp_path / "twice.csv")
    with pytest.raises(ArtefactError, match="on line 10 repeats line 2"):
        check_expected(twice, pd.read_csv(twice), UTILITY_GRID)


def test_a_free_column_of_the_grid_takes_any_value_but_the_rest_must_be_complete(tmp_path):
    # DPCL at a fixed noise multiplier: the ε of its rows is the accountant's, not the config's
    grid = [{"dataset": ["digits"], "mechanism": ["alm", "laplace"], "eps": None, "repeat": [0, 1]}]
    path = write_csv(utility_rows(eps=(3.7,)), tmp_path / "utility.csv")
    load_csv_file(path, UTILITY, grid)
    lost = write_csv(utility_rows(eps=(3.7,))[:-1], tmp_path / "lost.csv")
    assert "{dataset: digits, mechanism: laplace, eps: NaN, repeat: 1} is missing" in refused(
        lost, "dataset, mechanism, eps, repeat", load_csv_file, UTILITY, grid)


def test_lira_score_table_gives_each_score_its_row_head_record_and_membership(tmp_path):
    splits = {"finetune": [8, 3, 5], "nonmember": [0, 9], "shadow": [1, 2]}
    pool = ["finetune", "nonmember"]  # 5 candidates; the shadow split is in no head
    target_in = np.array([[1, 0, 1, 0, 1], [0, 1, 1, 1, 0]], dtype=bool)  # 2 target heads
    rows = [{"dataset": "digits", "method": "alm", "eps": eps, "attack": attack, "adaptive": adaptive}
            for eps in (1.0, 10.0) for attack in ("loss", "lira_online") for adaptive in (False, True)]
    rng = np.random.default_rng(0)
    scores = [rng.normal(size=10) for _ in rows]
    table = lira_score_table(rows, scores, target_in, pool, splits)
    candidates = [("finetune", 8), ("finetune", 3), ("finetune", 5), ("nonmember", 0), ("nonmember", 9)]
    expected = [{**row, "target": t, "split": split, "record": record, "member": bool(target_in[t, i]),
                 "score": scores[r][t * 5 + i]}
                for r, row in enumerate(rows) for t in range(2) for i, (split, record) in enumerate(candidates)]
    assert table.astype(object).to_dict("records") == expected
    path = tmp_path / "scores_alm.parquet"
    atomic_write_parquet(table, path)
    grid = [{"dataset": ["digits"], "method": ["alm"], "adaptive": [False, True], "eps": [1.0, 10.0],
             "attack": ["loss", "lira_online"]}]
    read = load_csv_file(path, LIRA_SCORES, grid)
    assert read.astype(object).to_dict("records") == expected
    with pytest.raises(ValueError, match="score vectors"):
        lira_score_table(rows, scores[:-1], target_in, pool, splits)
    with pytest.raises(ValueError, match="candidates"):
        lira_score_table(rows, scores, target_in, ["finetune"], splits)  # 3 candidates, not 5


def test_mia_score_table_gives_each_score_its_row_and_its_records_split_pool_index_and_membership(tmp_path):
    """The attack rule's lines, against a line-by-line construction: the evaluated records are
    positions in d and in the non-member split (balanced_evaluation's draw), stored by pool index."""
    splits = {"finetune": [8, 3, 5, 7], "nonmember": [0, 9, 4]}
    members, nonmembers = np.array([2, 0]), np.array([1, 2])  # positions in each split
    records = split_records(splits, {"finetune": (members, True), "nonmember": (nonmembers, False)})
    rows = [{"dataset": "digits", "mechanism": "alm", "eps": eps, "repeat": repeat, "attack": attack,
             "adaptive": adaptive, "auc": 0.5}
            for eps in (1.0, 10.0) for repeat in (0, 1) for attack in ("loss", "shadow_mlp")
            for adaptive in (False, True)]
    rng = np.random.default_rng(1)
    scored = [(row, scores, scores >= 0) for row in rows for scores in [rng.normal(size=4)]]
    table = mia_score_table(scored, records)
    evaluated = [("finetune", 5, True), ("finetune", 8, True), ("nonmember", 9, False), ("nonmember", 4, False)]
    expected = [{**{c: row[c] for c in ("dataset", "mechanism", "eps", "repeat", "attack", "adaptive")},
                 "split": split, "record": record, "member": member, "called_member": scores[i] >= 0,
                 "score": scores[i]}
                for row, scores, _ in scored for i, (split, record, member) in enumerate(evaluated)]
    assert table.astype(object).to_dict("records") == expected
    atomic_write_parquet(table, tmp_path / "scores_alm.parquet")
    grid = [{"dataset": ["digits"], "mechanism": ["alm"], "attack": ["loss", "shadow_mlp"], "adaptive": [False, True],
             "eps": [1.0, 10.0], "repeat": [0, 1]}]
    assert load_csv_file(tmp_path / "scores_alm.parquet", MIA_SCORES, grid).astype(object).to_dict("records") \
        == expected
    with pytest.raises(ValueError, match="one score per record and row"):
        mia_score_table([(row, scores[:3], called[:3]) for row, scores, called in scored], records)
    atomic_write_parquet(table.assign(split="shadow"), tmp_path / "shadow.parquet")  # no evaluated record
    refused(tmp_path / "shadow.parquet", "split", load_csv_file, MIA_SCORES)


def test_link_score_lines_give_each_pair_its_row_nodes_label_call_and_score(tmp_path):
    """link_score_lines against a line-by-line construction: per row, every attack-test pair in
    order with its nodes and label, the row's call and score on it; empty text keys (the graph's
    own attacks' shadow, the MLP's distance) are missing, as a CSV's empty cell reads."""
    pairs, is_edge = np.array([[0, 4], [1, 2], [3, 5]]), np.array([True, False, False])  # no palindrome
    rows = [{"dataset": "sbm", "shadow": "", "attack": attack, "feature_set": "posteriors", "distance": distance,
             "run": run, "auc": 0.5, "scores": np.array([0.9, 0.1, 0.5]) * (run + 1),
             "called_edge": np.array([True, False, run == 0])}
            for run in (0, 1) for attack, distance in (("attack-0", "cosine"), ("attack-3", ""))]
    expected = [{"dataset": "sbm", "shadow": None, "attack": row["attack"], "feature_set": "posteriors",
                 "distance": row["distance"] or None, "run": row["run"], "node_u": int(u), "node_v": int(v),
                 "is_edge": bool(edge), "called_edge": bool(row["called_edge"][i]), "score": row["scores"][i]}
                for row in rows for i, ((u, v), edge) in enumerate(zip(pairs, is_edge, strict=True))]
    lines = link_score_lines(rows, LINK_KEY, pairs, is_edge)
    assert all("scores" not in row and "called_edge" not in row for row in rows)  # the rows stay the table's
    read = lines.astype(object).where(lines.notna(), None).to_dict("records")
    assert read == expected
    atomic_write_parquet(lines, tmp_path / "attack_scores.parquet")
    load_csv_file(tmp_path / "attack_scores.parquet", LINK_SCORES)
    # a call that is no threshold on the row's scores: refused by the edge calls' column
    flipped = lines.assign(called_edge=lines.called_edge.where(lines.index != 0, False))  # 0.9 not called, 0.5 is
    atomic_write_parquet(flipped, tmp_path / "flipped.parquet")
    assert "called iff score >= one threshold" in refused(tmp_path / "flipped.parquet", "called_edge", load_csv_file,
                                                          LINK_SCORES)


def test_per_record_scores_have_many_lines_per_key_of_the_grid(tmp_path):
    grid = [{"dataset": ["digits"], "method": ["none"], "eps": [None], "attack": ["loss", "lira_online"],
             "adaptive": [True]}]
    atomic_write_parquet(lira_scores(), tmp_path / "scores.parquet")
    load_csv_file(tmp_path / "scores.parquet", LIRA_SCORES, grid)
    atomic_write_parquet(lira_scores(("loss",)), tmp_path / "one.parquet")
    assert "attack: lira_online, adaptive: True} is missing" in refused(
        tmp_path / "one.parquet", "dataset, method, eps, attack, adaptive", load_csv_file, LIRA_SCORES, grid)
    wrong = lira_scores().assign(split="pretrain")  # pre-training images are no LiRA candidate
    atomic_write_parquet(wrong, tmp_path / "wrong.parquet")
    refused(tmp_path / "wrong.parquet", "split", load_csv_file, LIRA_SCORES)


def test_several_tables_each_need_their_grid(tmp_path):
    path = write_csv(utility_rows(), tmp_path / "utility.csv")
    load = lambda p: load_csv_files([p], UTILITY, {"other.csv": UTILITY_GRID})  # noqa: E731
    assert "nothing expected of this file was given" in refused(path, None, load)


# --------------------------------------------------------------------------------- relations between columns

def one_run_rows(**change) -> pd.DataFrame:
    row = {"dataset": "digits", "method": "alm", "eps": 1.0, "attack": "loss", "adaptive": True, "delta": 0.0,
           "claimed_eps": 1.0, "guarantee_kind": "random_dp", "audit": "one_run_mislabelled", "threat_model": "black_box",
           "eps_lower_bound": 0.0,
           "eps_ceiling": one_run_ceiling(50, 100, 0.0), "n": 50, "canaries": 100, "correct": 30}
    return pd.DataFrame([row, {**row, "eps": 10.0, "claimed_eps": 10.0, **change}])


@pytest.mark.parametrize("change, field, problem", [
    ({"correct": 51}, "correct", "51 on line 3 (expected at most the row's n, the guesses made)"),
    ({"n": 101, "correct": 40}, "n", "101 on line 3 (expected at most the row's canaries"),
    ({"correct": 2.5}, "correct", "2.5 on line 3"),
])
def test_a_one_run_audit_with_impossible_counts_is_refused(tmp_path, change, field, problem):
    load_csv_file(write_csv(one_run_rows(), tmp_path / "ok.csv"), AUDIT)
    assert problem in refused(write_csv(one_run_rows(**change), tmp_path / "one_run.csv"), field,
                              load_csv_file, AUDIT)


def test_an_audit_bound_above_its_ceiling_is_refused(tmp_path):
    """The ceiling is the bound with every decision right, so a bound above it is impossible; one at
    it (a perfect attack) is allowed, for the hypothesis test as for the one-run audit."""
    ceiling = hypothesis_test_ceiling(1191, 1209, 1e-5, 0.975)
    hypothesis = {**one_run_rows().iloc[0].to_dict(), "audit": "hypothesis_test", "n": 2400, "canaries": math.nan,
                  "correct": math.nan, "eps_ceiling": ceiling, "eps_lower_bound": ceiling}
    perfect = pd.concat([one_run_rows(eps_lower_bound=one_run_ceiling(50, 100, 0.0), correct=50),
                         pd.DataFrame([hypothesis])], ignore_index=True)
    load_csv_file(write_csv(perfect, tmp_path / "ok.csv"), AUDIT)
    for row, bound in ((1, one_run_ceiling(50, 100, 0.0) + 0.01), (2, ceiling * 1.001)):
        above = perfect.copy()
        above.loc[row, "eps_lower_bound"] = bound
        assert f"{bound:g} on line {row + 2} (expected at most the row's eps_ceiling" in refused(
            write_csv(above, tmp_path / "above.csv"), "eps_lower_bound", load_csv_file, AUDIT)
    assert "eps_ceiling" in refused(write_csv(perfect.drop(columns="eps_ceiling"), tmp_path / "old.csv"), None,
                                    load_csv_file, AUDIT)


def accounting_rows(eps_rdp=(0.9995, 9.9949)) -> pd.DataFrame:
    return pd.DataFrame([{"dataset": "digits", "method": "dpcl", "variant": "dpcl", "role": "target", "n": 150,
                          "eps_target": target, "delta": 1e-5, "noise_multiplier": 1.0, "mechanisms": "gradient",
                          "encoder_steps": 6, "head_steps": 60, "encoder_batch": 50, "head_batch": 50,
                          "eps_rdp_without_replacement": spent, "eps_pld_poisson": 0.5 * spent,
                          "guarantee_kind": "approx_dp", "sensitivities": "Δ = 4C"}
                         for target, spent in zip((1.0, 10.0), eps_rdp)])


def test_an_accountant_epsilon_above_its_target_is_refused(tmp_path):
    load_csv_file(write_csv(accounting_rows(), tmp_path / "ok.csv"), DPCL_ACCOUNTING)
    assert "55 on line 2 (expected at most the row's eps_target" in refused(
        write_csv(accounting_rows((55.0, 9.9949)), tmp_path / "accounting.csv"), "eps_rdp_without_replacement",
        load_csv_file, DPCL_ACCOUNTING)
    fixed = accounting_rows((55.0, 9.9949)).assign(eps_target=math.nan)  # a fixed noise multiplier: no target
    load_csv_file(write_csv(fixed, tmp_path / "fixed.csv"), DPCL_ACCOUNTING)


# --------------------------------------------------------------------------------- per-record cells

def test_a_decisions_cell_of_the_wrong_length_or_padding_is_refused_naming_its_line(tmp_path):
    frame = utility_rows()
    frame.loc[1, "decisions"] = right_of(50, 99)  # 13 bytes for 100 records, but its bits past 99 are clear
    load_csv_file(write_csv(frame, tmp_path / "ok.csv"), UTILITY)
    frame.loc[1, "decisions"] = right_of(50, 92)  # 12 bytes: 96 bits for 100 records
    assert "line 3" in refused(write_csv(frame, tmp_path / "short.csv"), "decisions", load_csv_file,
                               UTILITY)
    frame = utility_rows()
    frame.loc[2, "decisions"] = "ff" * 13  # 104 bits set: four past the 100th record
    assert "past its last record" in refused(write_csv(frame, tmp_path / "padding.csv"), "decisions",
                                             load_csv_file, UTILITY)


def test_decisions_cells_of_digits_only_stay_text(tmp_path):
    """"00…" (no record right) is a hex cell, not the number 0."""
    frame = utility_rows()
    frame["decisions"] = right_of(0)
    loaded = load_csv_file(write_csv(frame, tmp_path / "zeros.csv"), UTILITY)
    assert (loaded.decisions == "00" * 13).all()


def test_a_clean_decisions_cell_may_be_empty_but_not_malformed(tmp_path):
    frame = utility_rows()
    frame["clean_decisions"] = None  # a training-time release's rows
    load_csv_file(write_csv(frame, tmp_path / "empty.csv"), UTILITY)
    frame.loc[0, "clean_decisions"] = "zz"
    refused(write_csv(frame, tmp_path / "bad.csv"), "clean_decisions", load_csv_file, UTILITY)


def score_rows() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two metrics rows of a semileak_attack job (their key, counts and AUC) and their per-record
    scores as scores.parquet holds them: 4 members then 5 non-members each, records by pool index."""
    key = {"dataset": "digits", "repeat": 0, "target": "fixmatch", "eps": np.nan, "step": 100, "defence": "none",
           "similarity": "", "views": np.nan, "member_kind": "all"}
    rng = np.random.default_rng(0)
    rows, lines = [], []
    record, member = rng.permutation(100)[:9], np.arange(9) < 4  # every row queries the same records
    for attack in ("confidence", "entropy"):
        score = rng.random(9) + member * 0.3
        auc = np.mean([float(x > y) + 0.5 * (x == y) for x in score[member] for y in score[~member]])
        rows.append({**key, "attack": attack, "n_members": 4, "n_nonmembers": 5, "auc": auc})
        lines.append(pd.DataFrame({**key, "attack": attack, "record": record, "member": member, "score": score}))
    return pd.DataFrame(rows), pd.concat(lines, ignore_index=True)


def test_a_rows_score_ranks_are_its_records_ranks_members_first_by_record(tmp_path):
    metrics, scores = score_rows()
    atomic_write_parquet(scores, tmp_path / "scores.parquet")
    attached = attach_score_ranks(tmp_path / "scores.parquet", metrics)
    for (_, line), ranks in zip(metrics.iterrows(), attached.ranks):
        own = scores[scores.attack == line.attack]
        ordered = pd.concat([own[own.member].sort_values("record"), own[~own.member].sort_values("record")])
        assert np.array_equal(ranks, stats.rankdata(ordered.score))
    # a metrics.csv as read back (empty text is NaN there) finds the same rows
    read_back = metrics.assign(similarity=np.nan)
    assert len(attach_score_ranks(tmp_path / "scores.parquet", read_back)) == 2


@pytest.mark.parametrize("edit, field", [
    (lambda m, s: (m, s[s.attack != "entropy"]), None),  # a row without scores
    (lambda m, s: (m[m.attack != "entropy"], s), None),  # scores of a row metrics.csv lacks
    (lambda m, s: (m.assign(n_members=[5, 4]), s), "record"),  # counts that disagree
    (lambda m, s: (m, s.assign(record=s.record.where(s.index != 1, s.record[0]))), "record"),  # a record twice
    (lambda m, s: (m, s.assign(score=s.score[::-1].to_numpy())), "score"),  # scores of another row order
    (lambda m, s: (m, s.assign(record=s.record.where(s.attack == "confidence", s.record + 1000))), "record"),
    (lambda m, s: (m, s.assign(member=s.member.where(~s.index.isin([12, 13]), ~s.member))  # two swapped,
                   ), "record"),  # same counts, but another row's members: not paired record by record
    (lambda m, s: (m, s.assign(score=s.score.where(s.index != 3, np.inf))), "score"),
    (lambda m, s: (m, s.assign(member=s.member.astype(int))), "member"),
    (lambda m, s: (m, s.drop(columns="record")), "record"),
])
def test_scores_that_disagree_with_their_metrics_rows_are_refused(tmp_path, edit, field):
    metrics, scores = edit(*score_rows())
    atomic_write_parquet(scores, tmp_path / "scores.parquet")
    refused(tmp_path / "scores.parquet", field, attach_score_ranks, metrics)


def test_semileak_scores_must_be_finite_where_the_other_attacks_may_be_infinite(tmp_path):
    """Every Semi-Leak score is a posterior's statistic (confidence, entropy, a similarity): an
    infinite one is a bug there, while a LiRA log-likelihood ratio may be ±inf."""
    _, scores = score_rows()
    path = tmp_path / "scores.parquet"
    atomic_write_parquet(scores.assign(score=scores.score.where(scores.index != 3, -np.inf)), path)
    assert "finite numbers" in refused(path, "score", load_csv_file, SEMILEAK_SCORES)
    assert MIA_SCORES["score"].finite is False


def test_a_scores_file_that_is_not_parquet_is_refused(tmp_path):
    (tmp_path / "scores.parquet").write_bytes(b"PAR1 cut short")
    refused(tmp_path / "scores.parquet", None, attach_score_ranks, score_rows()[0])


CATALOGUES = [("claims.csv", PAPER_CLAIMS), ("thesis_contrastive.csv", THESIS_CLAIMS),
              ("thesis_semileak.csv", THESIS_SEMILEAK)]


@pytest.mark.parametrize("name, schema", CATALOGUES, ids=[c[0] for c in CATALOGUES])
def test_a_catalogue_that_repeats_a_claim_with_another_value_is_refused(tmp_path, name, schema):
    shipped = pd.read_csv(REPO / "resources" / name, dtype=str, keep_default_na=False)
    again = shipped.iloc[[1]].assign(statement="another paper value")
    path = tmp_path / name
    pd.concat([shipped, again]).to_csv(path, index=False)
    message = refused(path, "claim", load_csv_file, schema)
    claim = shipped.claim.iloc[1]
    assert f"the claim {claim!r} on line {len(shipped) + 2} repeats line 3" in message


@pytest.mark.parametrize("name, schema", CATALOGUES, ids=[c[0] for c in CATALOGUES])
def test_a_catalogue_without_a_claim_its_report_settles_is_refused(tmp_path, name, schema):
    shipped = pd.read_csv(REPO / "resources" / name, dtype=str, keep_default_na=False)
    path = tmp_path / name
    shipped.drop(index=len(shipped) - 1).to_csv(path, index=False)
    message = refused(path, "claim", load_csv_file, schema)
    assert f"no row for {shipped.claim.iloc[-1]} " in message


# --------------------------------------------------------------------------------- tuning choices

HEAD_SECTION = {"architecture": "mlp", "hidden": 16, "epochs": 50, "lr": 0.01, "batch_size": None}
HEAD_TUNING = {"head": HEAD_SECTION, "tuning": {"head": {"epochs": [20, 50]}}}


def tuning_files(tmp_path, section: str, rows: list[dict], choice: dict) -> Path:
    """A tuning table written by hand (point, the varied field, eps, chosen) and its choice file."""
    folder = tmp_path / "results" / "digits" / "tuning"
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(folder / f"{section}.csv", index=False)
    (folder / f"{section}.json").write_text(json.dumps(choice))
    return folder / f"{section}.json"


HEAD_ROWS = [{"point": 0, "epochs": 20, "eps": math.inf, "chosen": False},
             {"point": 1, "epochs": 50, "eps": math.inf, "chosen": True}]


@pytest.mark.parametrize("edit, problem", [
    (lambda c: c.update(epochs=20), "is not the point 1 its table"),  # the other grid point, or another dataset's
    (lambda c: c.update(epochs=7), "is not the point 1 its table"),  # outside the grid
    (lambda c: c.update(epochs="50"), '"epochs": "50"'),  # a string where the config has a number
    (lambda c: c.update(lr=0.5), "is not the point 1 its table"),  # a field the grid does not vary
])
def test_an_edited_head_choice_is_refused_naming_the_file(tmp_path, edit, problem):
    choice = dict(HEAD_SECTION)
    path = tuning_files(tmp_path, "head", HEAD_ROWS, choice)
    check_tuning_choice(path, "head", choice, HEAD_TUNING)  # as written by the tuning
    edit(choice)
    message = refused(path, "head", check_tuning_choice, "head", choice, HEAD_TUNING)
    assert problem in message and "of the config's grid tuning.head" in message


def test_a_table_of_another_grid_is_refused(tmp_path):
    choice = dict(HEAD_SECTION)
    path = tuning_files(tmp_path, "head", [{**r, "epochs": r["epochs"] + 1} for r in HEAD_ROWS], choice)
    refused(path.with_suffix(".csv"), "point", check_tuning_choice, "head", choice, HEAD_TUNING)
    refused(path.with_suffix(".csv"), "point", check_tuning_choice, "head", choice,
            {**HEAD_TUNING, "tuning": {"head": {"epochs": [20]}}})  # a point index beyond the grid


def test_a_dpsgd_choice_needs_each_eps_its_table_chose_at(tmp_path):
    section = {"lr": 0.1, "epochs": 3}
    tuning = {"dpsgd": section, "protect": {"eps": [1, 10]}, "tuning": {"dpsgd": {"lr": [0.1, 0.5]}}}
    points = [{**section, "lr": 0.1}, {**section, "lr": 0.5}]
    chosen = {1.0: 0, 10.0: 1, math.inf: 1}  # the point chosen per ε (inf: the noise-free limit)
    rows = [{"point": p, "lr": points[p]["lr"], "eps": eps, "chosen": chosen[eps] == p} for p in (0, 1)
            for eps in chosen]
    choice = {"per_eps": [{"eps": 1, "spec": points[0]}, {"eps": 10, "spec": points[1]}], "noise_free": points[1]}
    path = tuning_files(tmp_path, "dpsgd", rows, choice)
    check_tuning_choice(path, "dpsgd", choice, tuning)
    removed = {**choice, "per_eps": choice["per_eps"][:1]}  # the removed ε
    assert "ε [1.0]" in refused(path, "per_eps", check_tuning_choice, "dpsgd", removed, tuning)
    swapped = {**choice, "per_eps": [{"eps": 1, "spec": points[1]}, {"eps": 10, "spec": points[0]}]}
    assert "at ε = 1 is not the point 0" in refused(path, "dpsgd", check_tuning_choice, "dpsgd", swapped,
                                                     tuning)
    other_limit = {**choice, "noise_free": points[0]}
    assert "(noise-free) is not the point 1" in refused(path, "dpsgd", check_tuning_choice, "dpsgd",
                                                        other_limit, tuning)


def test_a_reader_checks_a_choice_file_before_any_work_when_its_rule_gives_the_grid(tmp_path, monkeypatch):
    import argparse

    from privssl.cli import json_object

    path = tuning_files(tmp_path, "head", HEAD_ROWS, {**HEAD_SECTION, "epochs": 7})

    def parse(*argv):
        parser = argparse.ArgumentParser()
        parser.add_argument("--head", type=json_object)
        monkeypatch.setattr("sys.argv", ["finetune.py", *argv])
        return parse_checking_choices(parser)

    assert parse("--head", f"@{path}").head["epochs"] == 7  # by hand, without the rule's grid: as given
    with pytest.raises(ArtefactError, match=re.escape(f"{path}: field 'head':")):
        parse("--head", f"@{path}", "--choice-config", json.dumps({"head": HEAD_TUNING}))
    inline = parse("--head", json.dumps(HEAD_SECTION | {"epochs": 7}), "--choice-config", json.dumps({"head": HEAD_TUNING}))
    assert inline.head["epochs"] == 7  # an inline spec is no tuned file


@pytest.mark.parametrize("accuracies, chosen, expected", [
    ((0.8, 0.7), 1, 0), ((0.7, 0.8), 0, 1),  # the higher noise-free accuracy
    ((0.8, 0.8), 1, 1), ((0.8, 0.8), 2, 0),  # a tie: the chosen point where it ties, else the first
    ((0.8, None), 0, None), ((None, None), 0, None)])  # an unscored point is refused
def test_the_best_noise_free_point_is_the_grids_highest_noise_free_accuracy(tmp_path, accuracies, chosen, expected):
    """The second baseline of the utility loss (the referee's tie case included), mapped to the
    config grid's point; a table it cannot read is refused naming the file and field."""
    rows = [{**row, "method": "head", "accuracy": a, "chosen": row["point"] == chosen}
            for row, a in zip(HEAD_ROWS, accuracies)]
    rows.append({"point": 2 if chosen == 2 else 0, "epochs": 20, "eps": 1.0, "method": "alm", "accuracy": 0.9,
                 "chosen": chosen == 2})
    path = tuning_files(tmp_path, "head", rows, {**HEAD_SECTION, "epochs": 50})
    if expected is None:
        refused(path.with_suffix(".csv"), "accuracy", best_noise_free_point, HEAD_TUNING)
        return
    point, spec = best_noise_free_point(path, HEAD_TUNING)
    assert point == expected and spec == {**HEAD_SECTION, "epochs": (20, 50)[expected]}


def canary_audit_rows() -> pd.DataFrame:
    """The DP-SGD head's white-box and a black-box audit row, and a certified pair's, as the rules write them."""
    base = {"dataset": "digits", "adaptive": True, "delta": 1e-5, "n": 200}
    return pd.DataFrame([
        {**base, "method": "dpsgd", "eps": 10.0, "attack": "gradient_canary", "claimed_eps": 10.0,
         "guarantee_kind": "approx_dp", "audit": "white_box_gdp", "threat_model": "white_box_all_updates",
         "eps_lower_bound": 6.1, "eps_ceiling": 10.0},
        {**base, "method": "dpsgd", "eps": 10.0, "attack": "lira_online", "claimed_eps": 20.0,
         "guarantee_kind": "approx_dp", "audit": "hypothesis_test", "threat_model": "black_box",
         "eps_lower_bound": 0.5, "eps_ceiling": 4.0},
        {**base, "method": "certified_gaussian", "eps": 1.0, "attack": "crafted_pair", "claimed_eps": 1.0,
         "guarantee_kind": "approx_dp", "audit": "crafted_pair_gdp", "threat_model": "final_model",
         "eps_lower_bound": 0.5, "eps_ceiling": 1.0},
        {**base, "method": "none", "eps": math.nan, "attack": "lira_online", "claimed_eps": math.inf,
         "guarantee_kind": "none", "audit": "hypothesis_test", "threat_model": "black_box",
         "eps_lower_bound": 1.2, "eps_ceiling": 4.0},
    ])


@pytest.mark.parametrize("line, field, value, problem", [
    (0, "claimed_eps", 1.0, "field 'claimed_eps': 1 on line 2"),  # the white box's claim edited: 10 -> 1
    (1, "claimed_eps", 10.0, "field 'claimed_eps': 10 on line 3"),  # a substitution audit of DP-SGD claims 2ε
    (2, "claimed_eps", 2.0, "field 'claimed_eps': 2 on line 4"),
    (3, "claimed_eps", 5.0, "field 'claimed_eps': 5 on line 5"),  # the unprotected head claims nothing
    (0, "guarantee_kind", "heuristic_dp", "field 'guarantee_kind': 'heuristic_dp' for dpsgd on line 2"),
    (2, "eps_ceiling", 2.0, "field 'eps_ceiling': 2 on line 4"),  # a parametric audit's ceiling is its claim
])
def test_an_audit_row_whose_claim_is_not_its_releases_is_refused(tmp_path, line, field, value, problem):
    rows = canary_audit_rows()
    atomic_write_csv(rows, tmp_path / "ok.csv")
    load_csv_file(tmp_path / "ok.csv", AUDIT)
    rows.loc[line, field] = value
    atomic_write_csv(rows, tmp_path / "bad.csv")
    with pytest.raises(ArtefactError, match=re.escape(problem)):
        load_csv_file(tmp_path / "bad.csv", AUDIT)


def test_an_estimate_outside_its_own_interval_is_refused_naming_it(tmp_path):
    rows = pd.DataFrame({"auc": [0.56, 0.61], "auc_lo": [0.55, 0.58], "auc_hi": [0.57, 0.63], "other": [1, 2]})
    atomic_write_csv(rows, tmp_path / "ok.csv")
    load_csv_file(tmp_path / "ok.csv", {})
    rows.loc[1, "auc"] = 0.64
    atomic_write_csv(rows, tmp_path / "bad.csv")
    with pytest.raises(ArtefactError, match=re.escape("field 'auc': 0.64 on line 3 (expected inside its interval "
                                                      "[auc_lo, auc_hi] = [0.58, 0.63] of the same row)")):
        load_csv_file(tmp_path / "bad.csv", {})
