"""The graph track's artefacts: graphs, node embeddings, the link-stealing target file, the
link-stealing and link-protection tables with their per-pair scores (and the scores' writer),
and the loaders of the splits and target files."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privssl.artefacts.record_scores import called_by_a_threshold, score_key, score_lines, score_schema, with_calls
from privssl.artefacts.specs import COUNT, PROBABILITY, Each, Flag, Num, Tensor, Text, _label, check_fields
from privssl.artefacts.splits import _check_disjoint, _check_reader
from privssl.artefacts.tables import _METHOD, Table, load_json_file, load_tensor_file
from privssl.graphs.link_spec import ALL_INFORMATION, ATTACK_2_INFORMATION, DISTANCES
from privssl.graphs.splits import NODE_SPLITS
from privssl.grids import NONE, release_grid


GRAPH = {"name": Text(), "n_classes": Num(2, integer=True), "x": Tensor(("N", "features")),
         "edge_index": Tensor((2, "edges"), "int", Num(0, "N", high_open=True, integer=True)), "y": _label("N")}
EMBEDDINGS = {"n_classes": Num(2, integer=True), "embeddings": Tensor(("N", "width")), "labels": _label("N")}
LINK_TARGET = {"labelled": Tensor(("runs", "N"), "bool", None),
               "posteriors": Tensor(("runs", "N", "classes"), values=PROBABILITY),
               "reference": Tensor(("runs", "N", "classes"), values=PROBABILITY),
               "pairs": Tensor(("runs", "K", 2), "int", Num(0, "N", high_open=True, integer=True)),
               "is_edge": Tensor(("runs", "K"), "bool", None), "train": Tensor(("runs", "K"), "bool", None)}
_LINK = {"dataset": Text(), "attack": Text(), "feature_set": Text(), "distance": Text(empty=True),  # supervised: none
         "auc": PROBABILITY, "precision": PROBABILITY, "recall": PROBABILITY, "f1": PROBABILITY}
LINK_ROWS = {**_LINK, "shadow": Text(empty=True), "run": COUNT,  # shadow: empty for the attacks without one
             "grid": (("dataset", "shadow", "attack", "feature_set", "distance"), ("run",))}
LINK_PROTECTION = {**_LINK, "mechanism": _METHOD, "eps": Num(0, low_open=True, nan_where=("mechanism", "none")),
                   "repeat": COUNT, "grid": (("dataset", "mechanism", "attack", "feature_set", "distance"),
                                             ("eps", "repeat"))}


# the per-pair scores of a link-stealing table's rows (link/*scores*.parquet): per row, a line per
# attack-test pair (its two nodes, by index in graph.pt; whether it is an edge), the attack's score
# (higher = edge) and its call (`called_edge`: the distance attacks' 2-means split, the MLP
# attacks' posterior >= 0.5), which give the row's AUC, precision and recall
_PAIR = {"node_u": COUNT, "node_v": COUNT, "is_edge": Flag(), "called_edge": Flag()}
# one name per statement: the code-aware DAG follows a name, and a tuple assignment would tie the
# graph rules' code to the release methods that LINK_PROTECTION names
LINK_KEY = score_key(LINK_ROWS)
LINK_PROTECTION_KEY = score_key(LINK_PROTECTION)
LINK_SCORES = {**score_schema(LINK_ROWS, _PAIR),
               "relations": lambda path, frame: called_by_a_threshold(path, frame, LINK_KEY, "called_edge")}
LINK_PROTECTION_SCORES = {
    **score_schema(LINK_PROTECTION, _PAIR),
    "relations": lambda path, frame: called_by_a_threshold(path, frame, LINK_PROTECTION_KEY, "called_edge")}


def link_score_lines(rows: list[dict], key: tuple[str, ...], pairs, is_edge) -> pd.DataFrame:
    """The per-pair lines of link-stealing `rows` (each as the attack wrote it, with its `scores`
    and `called_edge` per pair, which are popped: the rows stay the table's) on the attack-test
    `pairs` ((P, 2) node indices) with their `is_edge`, the same pairs for every row."""
    scored = [(row, row.pop("scores"), row.pop("called_edge")) for row in rows]
    pairs, is_edge = np.asarray(pairs, dtype=np.int64), np.asarray(is_edge, dtype=bool)
    lines = score_lines([row for row, *_ in scored], key, [s for _, s, _ in scored],
                        {"node_u": pairs[:, 0], "node_v": pairs[:, 1], "is_edge": is_edge})
    return with_calls(lines, [c for *_, c in scored], "called_edge")


def load_graph_splits(path, dataset: str | None = None, sizes: dict | None = None) -> dict:
    """The graph_data rule's splits.json: node index lists below num_nodes, pairwise disjoint; of
    `dataset` with the split `sizes` when given (splits._check_reader)."""
    record = load_json_file(path, {"dataset": Text(), "num_nodes": Num(1, integer=True),
                                   "splits": Each(Tensor(None, "int", None))})
    index = Tensor(None, "int", Num(0, "num_nodes", high_open=True, integer=True))
    check_fields(path, record["splits"], {s: index for s in NODE_SPLITS}, {"num_nodes": record["num_nodes"]},
                 "splits.")
    _check_disjoint(path, record["splits"])
    _check_reader(path, record, dataset, sizes)
    return record


def load_link_target(path, num_nodes: int) -> dict:
    """The link_target rule's file for a graph of `num_nodes` nodes."""
    return load_tensor_file(path, LINK_TARGET, {"N": num_nodes})



# --------------------------------------------------------------------------------- the tables, declared

def link_protection_rows(config: dict, graph: str, target: str | None = None) -> list[dict]:
    """link_protection.csv (and link/protected_<target>.csv): Attack-0 with every distance and
    Attack-3 on the posteriors of the clean GCN head and of every release."""
    blocks = []
    for t in [target] if target is not None else ["none", *config["protect"]["mechanisms"]]:
        eps, repeats = (NONE, [0]) if t == "none" else release_grid(config, t)
        key = {"dataset": [graph], "mechanism": [t], "eps": eps, "repeat": repeats, "feature_set": ["posteriors"]}
        blocks += [key | {"attack": ["attack-0"], "distance": list(DISTANCES)}, key | {"attack": ["attack-3"],
                                                                                      "distance": NONE}]
    return blocks


def link_attack_rows(config: dict, graph: str) -> list[dict]:
    """link/attacks.csv: Attack-0 and Attack-2 (each information with every distance), Attack-3
    and Attack-6 on the graph's own target, in every run (the workflow's adversary knows F and g)."""
    key = {"dataset": [graph], "shadow": NONE, "run": list(range(config["link_stealing"]["runs"]))}
    return [key | {"attack": ["attack-0"], "feature_set": ["posteriors"], "distance": list(DISTANCES)},
            key | {"attack": ["attack-2"], "feature_set": list(ATTACK_2_INFORMATION), "distance": list(DISTANCES)},
            key | {"attack": ["attack-3"], "feature_set": ["posteriors"], "distance": NONE},
            key | {"attack": ["attack-6"], "feature_set": [ALL_INFORMATION], "distance": NONE}]


def link_transfer_rows(config: dict, graph: str, shadow: str) -> list[dict]:
    """link/transfer_<shadow>.csv: Attack-1, 4 (posteriors) and 5, 7 (with F and g) trained on `shadow`."""
    key = {"dataset": [graph], "shadow": [shadow], "run": list(range(config["link_stealing"]["runs"])),
           "distance": NONE}
    return [key | {"attack": ["attack-1", "attack-4"], "feature_set": ["posteriors"]},
            key | {"attack": ["attack-5", "attack-7"], "feature_set": [ALL_INFORMATION]}]


LINK_PROTECTION_TABLE = Table("link_protection.csv", LINK_PROTECTION, link_protection_rows,
                              part="link/protected_{target}.csv")
LINK_ATTACKS_TABLE = Table("link/attacks.csv", LINK_ROWS, link_attack_rows)
LINK_TRANSFER_TABLE = Table(None, LINK_ROWS, link_transfer_rows, part="link/transfer_{shadow}.csv")
LINK_PROTECTION_SCORE_TABLE = Table(None, LINK_PROTECTION_SCORES, link_protection_rows,
                                    part="link/protected_scores_{target}.parquet")
LINK_ATTACK_SCORE_TABLE = Table("link/attack_scores.parquet", LINK_SCORES, link_attack_rows)
LINK_TRANSFER_SCORE_TABLE = Table(None, LINK_SCORES, link_transfer_rows, part="link/transfer_scores_{shadow}.parquet")
