"""The completeness checks of privssl.artefacts, on a table schema of their own (so that they do
not move with the columns of the workflow's tables): a table must hold every row of the config's
grid (`check_expected`, every block of it, not only the first) and, per `schema['grid']`, every
combination of its axes within each group (`check_grid`, every group, NaN keys included). The
expected outcome of each case is stated by hand: which row is missing, on which line, of how
many."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privssl.artefacts.specs import ArtefactError, Num, Text
from privssl.artefacts.tables import (
    Table,
    check_expected,
    check_grid,
    expected_of,
    key_value,
    load_csv_file,
    load_csv_files,
)
from privssl.io import atomic_write_csv

# a results table: per (method, attack) a grid of (eps, repeat); `none` (the clean head) has no ε
SCHEMA = {"method": Text(("alm", "laplace", "none")), "attack": Text(("loss", "lira")),
          "eps": Num(0, low_open=True, nan_where=("method", "none")), "repeat": Num(0, integer=True),
          "auc": Num(0, 1), "fp_at_*": Num(0, integer=True),
          "grid": (("method", "attack"), ("eps", "repeat"))}
# the config asks for two blocks: the releases at two ε, and the clean head at none
BLOCKS = [{"method": ["alm", "laplace"], "attack": ["loss"], "eps": [1, 10], "repeat": [0, 1]},
          {"method": ["none"], "attack": ["loss", "lira"], "eps": [None], "repeat": [0, 1]}]
COLUMNS = "method, attack, eps, repeat"


def rows(blocks=BLOCKS) -> pd.DataFrame:
    out = []
    for block in blocks:
        for method in block["method"]:
            for attack in block["attack"]:
                for eps in block["eps"]:
                    for repeat in block["repeat"]:
                        out.append({"method": method, "attack": attack, "eps": math.nan if eps is None else eps,
                                    "repeat": repeat, "auc": 0.5, "fp_at_0.01": 3.0, "fp_at_0.1": 30.0})
    return pd.DataFrame(out)


def write(frame: pd.DataFrame, path: Path) -> Path:
    atomic_write_csv(frame, path)
    return path


def refusal(path: Path, field: str | None, call, *args) -> str:
    with pytest.raises(ArtefactError) as error:
        call(path, *args)
    message = str(error.value)
    assert message.startswith(f"{path}: " + (f"field '{field}': " if field else "")), message
    return message


def test_a_table_with_every_row_of_both_blocks_is_accepted_as_written(tmp_path):
    frame = rows()
    assert len(frame) == 2 * 1 * 2 * 2 + 1 * 2 * 1 * 2  # 8 releases + 4 clean rows
    loaded = load_csv_file(write(frame, tmp_path / "t.csv"), SCHEMA, BLOCKS)
    pd.testing.assert_frame_equal(loaded, frame, check_dtype=False)
    # load_csv_files: the tables of several paths, each against its own grid, concatenated in order
    second = write(rows(BLOCKS[:1]), tmp_path / "u.csv")
    both = load_csv_files([tmp_path / "t.csv", second], SCHEMA,
                          {str(tmp_path / "t.csv"): BLOCKS, str(second): BLOCKS[:1]})
    assert list(both.index) == list(range(12 + 8))
    pd.testing.assert_frame_equal(both, pd.concat([frame, rows(BLOCKS[:1])], ignore_index=True), check_dtype=False)


@pytest.mark.parametrize("lost, key", [
    (0, "{method: alm, attack: loss, eps: 1, repeat: 0}"),  # the first block's first row
    (7, "{method: laplace, attack: loss, eps: 10, repeat: 1}"),  # the first block's last row
    (11, "{method: none, attack: lira, eps: NaN, repeat: 1}"),  # the second block's last row
])
def test_a_row_lost_from_any_block_is_refused_by_the_configs_grid(tmp_path, lost, key):
    frame = rows().drop(index=lost)
    path = write(frame, tmp_path / "t.csv")
    message = refusal(path, COLUMNS, check_expected, frame, BLOCKS)
    assert f"the row {key} is missing (11 rows of the 12 the config asks for: a truncated file?)" in message
    assert "(expected every row of the grid {method: ['alm', 'laplace'], attack: ['loss'], eps: [1, 10], " \
           "repeat: [0, 1]} + {method: ['none'], attack: ['loss', 'lira'], eps: [None], repeat: [0, 1]})" in message


def test_the_second_block_is_checked_when_the_first_is_complete(tmp_path):
    # the whole clean head is gone: the first block alone is complete, and so is the file's own grid
    frame = rows(BLOCKS[:1])
    path = write(frame, tmp_path / "t.csv")
    load_csv_file(path, SCHEMA)
    message = refusal(path, COLUMNS, load_csv_file, SCHEMA, BLOCKS)
    assert "the row {method: none, attack: loss, eps: NaN, repeat: 0} is missing (8 rows of the 12" in message


def test_a_row_of_no_block_is_refused_naming_its_line(tmp_path):
    frame = rows()
    frame.loc[11, "attack"] = "loss"  # (none, lira, NaN, 1) -> (none, loss, NaN, 1): repeats line 11
    path = write(frame, tmp_path / "t.csv")
    assert "the row {method: none, attack: loss, eps: NaN, repeat: 1} on line 13 repeats line 11 (expected each key " \
           "of the config's grid once)" in refusal(path, COLUMNS, check_expected, frame, BLOCKS)
    frame = rows()
    frame.loc[5, "eps"] = 100.0  # a row of another config's ε
    message = refusal(path, COLUMNS, check_expected, frame, BLOCKS)
    assert "the row {method: laplace, attack: loss, eps: 100, repeat: 1} on line 7 is not in the config's grid" \
        in message
    assert "is the file from another run or config?" in message
    frame = rows()
    frame.loc[9, "method"] = "alm"  # a clean-head key with a release's method: in no block
    assert "the row {method: alm, attack: loss, eps: NaN, repeat: 1} on line 11 is not in the config's grid" in \
        refusal(path, COLUMNS, check_expected, frame, BLOCKS)


def test_a_curve_table_names_the_key_without_a_line(tmp_path):
    frame = rows().drop(index=3)[["method", "attack", "eps", "repeat"]]
    message = refusal(tmp_path, COLUMNS, check_expected, frame, BLOCKS, False)
    assert "the row {method: alm, attack: loss, eps: 10, repeat: 1} is missing" in message
    repeated = pd.concat([rows(), rows()[4:5]])
    message = refusal(tmp_path, COLUMNS, check_expected, repeated, BLOCKS, False)
    assert "the row {method: laplace, attack: loss, eps: 1, repeat: 0} repeats line 6" in message


def test_a_curve_table_is_checked_by_its_keys(tmp_path):
    # many rows per key (points of a curve): each key's rows together are one row of the grid
    curves = pd.concat([rows().assign(auc=a) for a in (0.0, 0.5, 1.0)], ignore_index=True)
    schema = {**SCHEMA, "many_rows_per_key": True}
    schema.pop("grid")
    load_csv_file(write(curves, tmp_path / "c.csv"), schema, BLOCKS)
    short = curves[~((curves.method == "none") & (curves.attack == "lira") & (curves.repeat == 0))]
    message = refusal(write(short, tmp_path / "s.csv"), COLUMNS, load_csv_file, schema, BLOCKS)
    assert "the row {method: none, attack: lira, eps: NaN, repeat: 0} is missing (11 rows of the 12" in message
    schema.pop("many_rows_per_key")
    with pytest.raises(ArtefactError, match="on line 14 repeats line 2"):  # one row per key: a curve repeats its key
        load_csv_file(tmp_path / "c.csv", schema, BLOCKS)


def test_grid_values_compare_as_numbers_and_booleans_as_booleans(tmp_path):
    # the config writes eps 1 and 10 (ints), the table 1.0 and 10.0; adaptive is a bool column
    assert key_value(1) == key_value(1.0) == key_value(np.float32(1.0)) == 1.0
    assert key_value(np.int64(10)) == 10.0 and isinstance(key_value(np.int64(10)), float)
    assert key_value(True) is True and key_value(np.bool_(False)) is False
    assert key_value(None) is None and key_value(math.nan) is None
    assert key_value("") is None  # a Parquet file's empty text is a CSV's empty cell, read as NaN
    assert key_value("alm") == "alm" and key_value(3) is not None
    grid = [{"attack": ["loss"], "adaptive": [True, False]}]
    table = pd.DataFrame({"attack": ["loss", "loss"], "adaptive": [True, False]})
    check_expected(tmp_path, table, grid)
    message = refusal(tmp_path, "attack, adaptive", check_expected, table[:1], grid)
    assert "the row {attack: loss, adaptive: False} is missing (1 rows of the 2" in message
    # text that reads like a number is text: "1" is no row of eps 1
    text = pd.DataFrame({"eps": ["1"]})
    assert "the row {eps: 1} on line 2 is not in the config's grid" in refusal(
        tmp_path, "eps", check_expected, text, [{"eps": [1]}])


def test_a_free_column_takes_any_value_while_the_others_stay_complete(tmp_path):
    blocks = [{"method": ["alm"], "attack": ["loss"], "eps": None, "repeat": [0, 1]}]  # ε: the accountant's
    frame = pd.DataFrame({"method": "alm", "attack": "loss", "eps": [3.7, 4.2], "repeat": [0, 1]})
    check_expected(tmp_path, frame, blocks)
    message = refusal(tmp_path, COLUMNS, check_expected, frame[:1], blocks)
    assert "the row {method: alm, attack: loss, eps: NaN, repeat: 1} is missing (1 rows of the 2" in message
    assert "eps: any" in message
    # a free column is free in its own block only
    blocks = blocks + [{"method": ["laplace"], "attack": ["loss"], "eps": [1], "repeat": [0]}]
    other = pd.concat([frame, pd.DataFrame({"method": ["laplace"], "attack": "loss", "eps": 2.0, "repeat": 0})])
    assert "{method: laplace, attack: loss, eps: 2, repeat: 0} on line 4 is not in the config's grid" in refusal(
        tmp_path, COLUMNS, check_expected, other, blocks)


def test_the_grid_needs_its_columns_in_the_table(tmp_path):
    frame = rows().drop(columns="attack")
    assert "attack': missing (expected columns method, attack, eps, repeat; the file has method, eps, repeat, auc" in \
        refusal(tmp_path, "attack", check_expected, frame, BLOCKS)


# --------------------------------------------------------------------------------- the file's own grid

def test_a_hole_in_any_group_of_the_files_own_grid_is_refused(tmp_path):
    frame = rows()
    check_grid(tmp_path, frame, ("method", "attack"), ("eps", "repeat"))
    for lost, where, lack in [(0, "method = alm, attack = loss", "{'eps': '1.0', 'repeat': '0'}"),
                              (6, "method = laplace, attack = loss", "{'eps': '10.0', 'repeat': '0'}")]:
        message = refusal(tmp_path, "eps, repeat", check_grid, frame.drop(index=lost), ("method", "attack"),
                          ("eps", "repeat"))
        assert f"the rows with {where} lack {lack} (1 of the grid of their values missing" in message
        assert "(expected every combination of the eps, repeat values present)" in message


def test_a_hole_in_a_group_whose_key_is_nan_is_refused(tmp_path):
    # the clean head's ε is NaN: grouped by ε too, its group must not be dropped
    frame = pd.DataFrame({"method": ["none"] * 3 + ["alm"] * 4, "eps": [math.nan] * 3 + [1.0] * 4,
                          "attack": ["loss", "loss", "lira", "loss", "loss", "lira", "lira"],
                          "repeat": [0, 1, 0, 0, 1, 0, 1]})
    message = refusal(tmp_path, "attack, repeat", check_grid, frame, ("method", "eps"), ("attack", "repeat"))
    assert "the rows with method = none, eps = nan lack {'attack': 'lira', 'repeat': '1'}" in message


def test_a_repeated_combination_in_the_files_own_grid_is_refused(tmp_path):
    frame = pd.concat([rows(), rows()[9:10]], ignore_index=True)
    message = refusal(tmp_path, "eps, repeat", check_grid, frame, ("method", "attack"), ("eps", "repeat"))
    assert "the rows with method = none, attack = loss repeat {'eps': nan, 'repeat': 1.0}" in message
    assert "(expected each combination once)" in message


def test_the_grid_is_the_product_of_every_axis_seen_in_the_group(tmp_path):
    # 2 ε × 3 repeats in the group, 5 rows: the lost (10, 2) is found whichever axis lists it last
    frame = pd.DataFrame({"method": "alm", "attack": "loss", "eps": [1, 1, 1, 10, 10], "repeat": [0, 1, 2, 0, 1]})
    assert "lack {'eps': '10', 'repeat': '2'} (1 of the grid" in refusal(
        tmp_path, "eps, repeat", check_grid, frame, ("method", "attack"), ("eps", "repeat"))
    frame = pd.DataFrame({"method": "alm", "attack": "loss", "eps": [1, 10, 1, 10], "repeat": [0, 0, 1, 2]})
    assert "lack {'eps': '1', 'repeat': '2'} (2 of the grid" in refusal(
        tmp_path, "eps, repeat", check_grid, frame, ("method", "attack"), ("eps", "repeat"))


# --------------------------------------------------------------------------------- load_csv_file's own checks

def test_the_schemas_grid_and_relations_are_applied_by_the_loader(tmp_path):
    frame = rows().drop(index=6)
    path = write(frame, tmp_path / "t.csv")
    assert "the rows with method = laplace, attack = loss lack" in refusal(path, "eps, repeat", load_csv_file,
                                                                          SCHEMA)
    seen = []
    schema = {**SCHEMA, "relations": lambda p, f: seen.append((p, len(f)))}
    schema.pop("grid")
    load_csv_file(path, schema)
    assert seen == [(path, 11)]


def test_every_column_a_prefix_names_is_checked_and_the_prefix_is_no_column(tmp_path):
    frame = rows()
    frame.loc[2, "fp_at_0.1"] = 2.5
    message = refusal(write(frame, tmp_path / "t.csv"), "fp_at_0.1", load_csv_file, SCHEMA)
    assert "2.5 on line 4" in message
    frame = rows().drop(columns=["fp_at_0.01", "fp_at_0.1"]).assign(other=1.5)  # no column of the prefix: none checked
    load_csv_file(write(frame, tmp_path / "u.csv"), SCHEMA)
    frame = rows()
    frame.loc[1, "auc"] = 1.5
    assert "1.5 on line 3" in refusal(write(frame, tmp_path / "v.csv"), "auc", load_csv_file, SCHEMA)
    message = refusal(write(rows().drop(columns="auc"), tmp_path / "w.csv"), "auc", load_csv_file, SCHEMA)
    assert "missing (expected columns method, attack, eps, repeat, auc;" in message


def test_a_reader_refuses_a_file_it_was_given_no_grid_for_before_reading_any(tmp_path):
    first = tmp_path / "cut.csv"
    first.write_text("method,attack\nalm,lo")  # unreadable: cut mid-line
    second = write(rows(), tmp_path / "t.csv")
    assert expected_of(None, second) is None
    assert expected_of({str(second): BLOCKS}, second) is BLOCKS
    message = refusal(second, None, lambda p: load_csv_files([p], SCHEMA, {str(first): BLOCKS,
                                                                            "other.csv": BLOCKS}))
    assert "nothing expected of this file was given by the reading rule (expected one of the files it gave " \
           f"expectations for: {first}, other.csv)" in message
    with pytest.raises(ArtefactError, match="nothing expected of this file"):  # the grids before any file is read
        load_csv_files([first, second], SCHEMA, {str(first): BLOCKS})
    assert len(load_csv_files([second], SCHEMA)) == 12  # no grids given (a script run by hand)


def test_a_curve_outside_the_grid_is_named_without_a_line(tmp_path):
    curves = pd.concat([rows().assign(auc=a) for a in (0.0, 1.0)], ignore_index=True)
    curves.loc[curves.repeat == 1, "attack"] = "lira"  # (alm, lira) is in no block
    schema = {name: spec for name, spec in SCHEMA.items() if name != "grid"} | {"many_rows_per_key": True}
    message = refusal(write(curves, tmp_path / "c.csv"), COLUMNS, load_csv_file, schema, BLOCKS)
    assert "the row {method: alm, attack: lira, eps: 1, repeat: 1} is not in the config's grid (expected" in message


def test_a_column_sharing_only_the_stem_of_a_prefix_is_not_checked(tmp_path):
    frame = rows().assign(fp_atlas="text", fp_a=-1.0)  # neither starts with 'fp_at_'
    load_csv_file(write(frame, tmp_path / "t.csv"), SCHEMA)


def test_the_first_group_and_the_first_repeat_in_the_files_order_are_named(tmp_path):
    # both groups have a hole; 'laplace' comes first in the file, 'alm' first alphabetically
    frame = pd.concat([rows()[4:8].drop(index=5), rows()[0:4].drop(index=2)])
    assert "the rows with method = laplace, attack = loss lack" in refusal(
        tmp_path, "eps, repeat", check_grid, frame, ("method", "attack"), ("eps", "repeat"))
    # two combinations repeat, (1, 0) on lines 2 and 7, (10, 1) on lines 5 and 6: the first line is named
    frame = pd.concat([rows()[0:4], rows()[3:4], rows()[0:1]])
    assert "repeat {'eps': 1.0, 'repeat': 0.0}" in refusal(
        tmp_path, "eps, repeat", check_grid, frame, ("method", "attack"), ("eps", "repeat"))


def test_each_of_several_tables_is_checked_against_its_own_grid(tmp_path):
    complete = write(rows(), tmp_path / "t.csv")
    short = write(rows().drop(index=10), tmp_path / "u.csv")  # (none, lira, NaN, 0) lost
    with pytest.raises(ArtefactError) as error:
        load_csv_files([complete, short], SCHEMA, {str(complete): BLOCKS, str(short): BLOCKS})
    message = str(error.value)
    assert message.startswith(f"{short}: field '{COLUMNS}': the row {{method: none, attack: lira, eps: NaN, repeat: 0}} "
                              "is missing (11 rows of the 12")


def test_two_rows_of_one_combination_are_a_repeat_whatever_their_other_columns(tmp_path):
    frame = pd.concat([rows(), rows()[2:3].assign(auc=0.9)], ignore_index=True)  # (alm, loss, 10, 0) twice
    message = refusal(tmp_path, "eps, repeat", check_grid, frame, ("method", "attack"), ("eps", "repeat"))
    assert "the rows with method = alm, attack = loss repeat {'eps': 10.0, 'repeat': 0" in message


def _rows(config, dataset, value=None):
    """A toy table's rows: the config's methods (one part: its own), recording what was asked."""
    methods = config["methods"] if value is None else [value]
    return [{"dataset": [dataset], "method": methods}]


def test_a_tables_declaration_gives_each_file_and_part_its_path_and_rows():
    config = {"methods": ["alm", "laplace"]}
    table = Table("mia.csv", SCHEMA, _rows, part="attack/{target}.csv")
    assert table.name == "mia"
    assert table.expected(config, "results", ["a", "b"]) == {
        "results/a/mia.csv": [{"dataset": ["a"], "method": ["alm", "laplace"]}],
        "results/b/mia.csv": [{"dataset": ["b"], "method": ["alm", "laplace"]}]}
    assert table.expected(config, "results", ["a"], ["alm", "none"]) == {
        "results/a/attack/alm.csv": [{"dataset": ["a"], "method": ["alm"]}],
        "results/a/attack/none.csv": [{"dataset": ["a"], "method": ["none"]}]}
    assert table.expected(config, "results", ["a"], []) == {}  # no parts asked: no files expected
    # a rule's wildcards pass through, so outputs are declared by the same pattern
    assert table.path("results", "{dataset}", "{target}") == "results/{dataset}/attack/{target}.csv"
    several = Table(None, SCHEMA, _rows, part="x/repeat{repeat}/{role}_history.csv")
    with pytest.raises(ValueError, match="has no merged file"):  # parts only: nothing to merge them by
        several.name
    assert several.path("r", "d", {"repeat": 1, "role": "shadow"}) == "r/d/x/repeat1/shadow_history.csv"
    # a falsy value (repeat 0) names a part, not the merged file
    assert Table(None, SCHEMA, _rows, part="s/repeat{repeat}/m.csv").path("r", "d", 0) == "r/d/s/repeat0/m.csv"


def test_a_path_the_declaration_does_not_have_is_refused():
    with pytest.raises(ValueError, match="the table of parts 'attack/{target}.csv' has no merged file"):
        Table(None, SCHEMA, _rows, part="attack/{target}.csv").path("results", "a")
    with pytest.raises(ValueError, match="the table 'mia.csv' has no parts: 'alm' names none"):
        Table("mia.csv", SCHEMA, _rows).path("results", "a", "alm")
    several = Table(None, SCHEMA, _rows, part="x/repeat{repeat}/{role}_history.csv")
    with pytest.raises(ValueError, match=r"has the wildcards \['repeat', 'role'\]: name each in a dict, got 0"):
        several.path("r", "d", 0)
    with pytest.raises(ValueError, match=r"has the wildcards \['repeat', 'role'\], got \['repeat'\]"):
        several.path("r", "d", {"repeat": 0})


def test_a_table_declared_without_a_file_or_with_a_part_without_a_wildcard_is_refused():
    with pytest.raises(ValueError, match="a table has a file, a part pattern or both"):
        Table(None, SCHEMA, _rows)
    with pytest.raises(ValueError, match="a table's part pattern needs a wildcard, got 'attack/all.csv'"):
        Table("mia.csv", SCHEMA, _rows, part="attack/all.csv")
    with pytest.raises(ValueError, match="a table's merged file has no wildcard"):
        Table("mia_{dataset}.csv", SCHEMA, _rows)


def test_dpcl_history_takes_the_target_eps_or_at_a_fixed_noise_multiplier_the_spent_one(tmp_path):
    """diagnostics/not_private/dpcl_history.csv names each encoder by its ε: the config's target,
    or at a fixed noise multiplier (no target) the ε the accountant gave, whatever it is."""
    from privssl.artefacts.training_time import DPCL_HISTORY, dpcl_history_rows

    def history(eps: list[float]) -> Path:
        return write(pd.DataFrame([{"dataset": "digits", "method": method, "objective": "simclr", "eps": e,
                                    "repeat": repeat, "epoch": epoch, "loss": 1.0, "clipped_fraction": 0.5,
                                    "knn_accuracy": 0.5, "eps_spent": 2.5}
                                   for method in ("dpcl_naive", "dpcl") for e in eps for repeat in (0, 1)
                                   for epoch in (1, 2)]), tmp_path / "history.csv")

    section = {"variants": ["naive", "dpcl"], "repeats": 2, "encoder": {"epochs": 2}}
    fixed = dpcl_history_rows({"dpcl": {**section, "eps": None, "noise_multiplier": 1.0}}, "digits")
    load_csv_file(history([2.5]), DPCL_HISTORY, fixed)  # the spent ε
    targets = dpcl_history_rows({"dpcl": {**section, "eps": [1, 10], "noise_multiplier": None}}, "digits")
    load_csv_file(history([1.0, 10.0]), DPCL_HISTORY, targets)
    assert "eps: 2.5" in refusal(history([1.0, 2.5]), "dataset, method, eps, repeat, epoch", load_csv_file,
                                 DPCL_HISTORY, targets)
