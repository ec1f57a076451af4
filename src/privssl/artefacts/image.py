"""The image track's artefacts: the schemas of features, heads, releases, sensitivities, the LiRA
heads and the attacker; the utility, MIA, LiRA and reference-sweep tables and the MIA and LiRA
per-record scores (their writers `mia_score_table`, `lira_score_table`), each declared with the
rows the config asks of it (the audit tables: privssl.artefacts.audits); and the loaders
with cross-field checks (splits, sensitivity, release, LiRA heads, attacker, encoder, tuning
folds, and the private sets a training-time release trains on)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np
import pandas as pd

from privssl.artefacts.record_scores import (
    attach_decisions,
    called_by_a_threshold,
    score_key,
    score_lines,
    score_schema,
    split_records,
    tiled,
    with_calls,
)
from privssl.artefacts.specs import (
    COUNT,
    POSITIVE,
    PROBABILITY,
    Decisions,
    Each,
    Flag,
    Names,
    Num,
    Params,
    Shapes,
    Tensor,
    Text,
    _label,
    check_fields,
    fail,
)
from privssl.artefacts.splits import _check_disjoint, _check_pool, _check_reader
from privssl.artefacts.tables import (
    _METHOD,
    _METRICS,
    Table,
    _first_line,
    load_csv_file,
    load_csv_files,
    load_json_file,
    load_tensor_file,
)
from privssl.attacks.mia_spec import ATTACKS as MIA_ATTACKS
from privssl.attacks.mia_spec import METRIC_ATTACKS, REFERENCE_ATTACKS, RMIA_ATTACKS, reference_counts
from privssl.data.splits import DATASETS, LABELLED_SPLITS, SPLITS
from privssl.grids import NONE, audited, lira_keys, noise_free_draws, release_grid, release_methods
from privssl.release.methods import GUARANTEE_KINDS, METHODS
from privssl.training.encoder_names import ENCODERS

if TYPE_CHECKING:
    import torch

    from privssl.release.training_time import PrivateSets
    from privssl.release.tuning import TuningFolds


# --------------------------------------------------------------------------------- relations

def noise_free_limits(path, frame: pd.DataFrame) -> None:
    """A utility row at ε = ∞ is its method's noise-free limit (privssl.release.tuning: the same
    training, no noise) and claims nothing; a row at a finite ε is a release, whose noise is never 0."""
    limit = np.isinf(frame.eps.to_numpy())
    _first_line(path, "noise_scale", limit & (frame.noise_scale != 0).to_numpy(), frame.noise_scale,
                "0 at eps = inf (the noise-free limit)")
    _first_line(path, "noise_scale", ~limit & (frame.noise_scale <= 0).to_numpy(), frame.noise_scale,
                "> 0 at a finite eps (a release adds noise)")
    bad_kind = limit & (frame.guarantee_kind != "none").to_numpy()
    if bad_kind.any():
        i = int(np.flatnonzero(bad_kind)[0])
        fail(path, "guarantee_kind", f"{frame.guarantee_kind.iloc[i]!r} on line {i + 2}",
             "none at eps = inf (the noise-free limit is not a release)")


# --------------------------------------------------------------------------------- schemas

OPTIONAL_CLIP = Num(0, low_open=True, optional=True)  # the certified head's input clipping; None: none


def features(*splits: str) -> dict:
    """A features file (encode, graph_encode rules) with the splits a script reads: rows of one
    width, one label below n_classes per row."""
    return {"n_classes": Num(2, integer=True),
            **{k: v for s in splits for k, v in ((s, Tensor((f"|{s}|", "width"))), (f"{s}_labels", _label(f"|{s}|")))}}


FEATURES = features(*LABELLED_SPLITS)  # every split; the graph track's NODE_SPLITS are the same names
# finetune/metrics.json: the released head's accuracy on d and on the test split
HEAD_METRICS = {"train_accuracy": PROBABILITY, "test_accuracy": PROBABILITY, "finetune_size": Num(1, integer=True)}
HEAD = {"n_classes": Num(2, integer=True), "shapes": Shapes(), "params": Params(), "clip_norm": OPTIONAL_CLIP}
RELEASE = {"method": Text(METHODS), "shapes": Shapes(), "eps": Tensor(("E",), values=POSITIVE),
           # σ, b or θ at a finite ε of a positive sensitivity: never 0 (0 would release the head as it is)
           "noise_scale": Tensor(("E",), values=POSITIVE), "flat": Tensor(("E", "draws", "P")),
           "clip_norm": OPTIONAL_CLIP}
LIRA_HEADS = {"shadows": Num(2, integer=True), "targets": Num(1, integer=True), "pool_size": Num(2, integer=True),
              "pool": Names(LABELLED_SPLITS), "head_kind": Text(("finetune", "certified")), "shapes": Shapes(),
              "flat": Tensor(("heads", "P")),
              "sets": Tensor(("heads", "|d|"), "int", Num(0, "pool_size", high_open=True, integer=True)),
              "clip_norm": OPTIONAL_CLIP, "seed": COUNT}
ATTACKER = {"in_dim": Num(2, integer=True), "spec": Each(POSITIVE), "mlp": Each(Tensor(None)),
            "shadow_shapes": Shapes(), "shadow_flat": Tensor(("P",)),
            "inside": Tensor(("in",), "int", Num(0, "|shadow|", high_open=True, integer=True)),
            "pairs": Tensor(("K",), "int", Num(0, "|shadow|", high_open=True, integer=True)),
            "pair_is_member": Tensor(("K",), values=Num(0, 1, integer=True)), "seed": COUNT,
            "thresholds": Each(Num(finite=False))}  # a threshold may be ±inf (always / never "member")
ENCODER = {"encoder": Text(ENCODERS), "width": Num(1, integer=True),
           "in_channels": Num(1, integer=True), "image_size": Num(1, integer=True),
           "state": Each(Tensor(None, "number"))}  # a state dict may hold integer buffers (batch-norm counts)

_SENSITIVITY = {"finetune_size": Num(1, integer=True), "statement": Text(), "delta2": POSITIVE}
SAMPLED_SENSITIVITY = {  # sensitivity rule: Δ̂ = the k-th smallest of m sampled distances
    **_SENSITIVITY, "sampling": Text(("population", "paper")), "guarantee_kind": Text(GUARANTEE_KINDS),
    "m": Num(1, integer=True), "k": Num(1, "m", integer=True), "delta1": POSITIVE,
    "distances_l1": Tensor(("m",), values=Num(0)), "distances_l2": Tensor(("m",), values=Num(0)),
    "pretrain_size": Num(1, integer=True, optional=True)}
POPULATION = {"rho": Num(0, 1, low_open=True, high_open=True),
              "gamma": Num("rho", 1, low_open=True, high_open=True)}
CERTIFIED_SENSITIVITY = {**_SENSITIVITY, "sampling": Text(("certified",)), "lipschitz": POSITIVE,
                         "clip_norm": POSITIVE, "l2": POSITIVE, "tolerance": Num(0),
                         "beta": POSITIVE, "iterations": COUNT}  # the solver's data-independent step count

_KEY = {"dataset": Text(), "attack": Text(), "adaptive": Flag()}
# the lira rule's attacks other than RMIA: their rows leave RMIA's a empty, and only theirs may
_NOT_RMIA = tuple(a for a in (*REFERENCE_ATTACKS, *METRIC_ATTACKS) if a not in RMIA_ATTACKS)
# eps = inf: the method's noise-free limit (noise_scale 0, no claim; relation noise_free_limits)
UTILITY = {"dataset": Text(), "mechanism": Text(METHODS), "eps": Num(0, low_open=True, finite=False),
           "delta": Num(0, 1, high_open=True), "repeat": COUNT, "noise_scale": Num(0),
           "sensitivity_norm": Text(("l1", "l2")), "sensitivity": POSITIVE,
           "guarantee_kind": Text(GUARANTEE_KINDS), "guarantee": Text(), "clean_accuracy": Num(0, 1, low_open=True),
           "accuracy": PROBABILITY, "utility_loss": Num(None, 1), "n_test": Num(2, integer=True),
           "decisions": Decisions(("n_test",)), "clean_decisions": Decisions(("n_test",), optional=True),
           # the tuning grid's best noise-free head on the same records (rule finetune's best_head.pt)
           "best_clean_decisions": Decisions(("n_test",), optional=True),
           "grid": (("dataset", "mechanism"), ("eps", "repeat")),
           "relations": noise_free_limits}
# its per-record decisions are in its scores' called_member column (MIA_SCORES; load_mia)
MIA = {**_KEY, "mechanism": _METHOD, "eps": Num(0, low_open=True, nan_where=("mechanism", "none")), "repeat": COUNT,
       **_METRICS,
       "grid": (("dataset", "mechanism", "attack", "adaptive"), ("eps", "repeat"))}
LIRA = {**_KEY, "method": _METHOD, "eps": Num(0, low_open=True, nan_where=("method", "none")),
        "guarantee_kind": Text(GUARANTEE_KINDS), "targets": Num(1, integer=True), **_METRICS,
        "records": Num(2, integer=True), "draws": Num(1, integer=True),
        "rmia_a": Num(0, 1, nan_where=("attack", _NOT_RMIA)),  # RMIA's offline a, chosen on the shadows
        "grid": (("dataset", "method", "attack", "adaptive"), ("eps",))}
# lira_references rule: the clean heads attacked with 1, 2, 4, … shadows as references
LIRA_REFERENCES = {"dataset": Text(), "attack": Text(REFERENCE_ATTACKS), "references": Num(1, integer=True),
                   "targets": Num(1, integer=True), **_METRICS, "records": Num(2, integer=True),
                   "draws": Num(1, integer=True),
                   "rmia_a": Num(0, 1, nan_where=("attack", _NOT_RMIA)),
                   "grid": (("dataset", "attack"), ("references",))}
# lira rule's per-record scores (attack/lira/scores_<method>.parquet, lira_score_table): per lira.csv
# row, a line per (target head, candidate); `split` the pool split the candidate was drawn from
LIRA_SCORE_KEY = score_key(LIRA)
LIRA_SCORES = score_schema(LIRA, {"target": COUNT, "split": Text(LABELLED_SPLITS), "record": COUNT, "member": Flag()})
# attack and attack_training_time rules' per-record scores (attack/scores_<target>.parquet): per
# attack/<target>.csv row, a line per evaluated record (balanced_evaluation's members of d, then
# its non-members), with the attack's decision (called_member: score >= the row's threshold)
MIA_KEY = score_key(MIA)
MIA_SCORES = {**score_schema(MIA, {"split": Text(("finetune", "nonmember")), "record": COUNT, "member": Flag(),
                                   "called_member": Flag()}),
              "relations": lambda path, frame: called_by_a_threshold(path, frame, MIA_KEY)}


def mia_score_table(scored: list[tuple[dict, np.ndarray, np.ndarray]], records: dict) -> pd.DataFrame:
    """MIA_SCORES' lines of one target's attack/<target>.csv rows: each (row, its scores over
    `records`, whether the attack called each a member), `records` split_records' columns of the
    evaluated records."""
    return with_calls(score_lines([row for row, *_ in scored], MIA_KEY, [s for _, s, _ in scored], records),
                      [called for *_, called in scored])


def load_mia(paths, score_paths, expect: dict[str, list[dict]] | None = None) -> pd.DataFrame:
    """mia.csv of each dataset (MIA, each file its `expect` grid), each row with its per-record
    decisions (a `decisions` cell: right or wrong per record, as privssl.reports.decisions reads
    it) from its attack's calls (`score_paths`: every attack/scores_<target>.parquet of those
    datasets), as record_scores.attach_decisions pairs them."""
    mia = load_csv_files(paths, MIA, expect)
    return attach_decisions(mia, paths, [(path, load_csv_file(path, MIA_SCORES)) for path in score_paths], MIA_KEY)


def lira_score_table(rows: list[dict], scores: list[np.ndarray], target_in: np.ndarray, pool: list[str],
                     splits: dict) -> pd.DataFrame:
    """LIRA_SCORES' lines of one lira job: for each lira.csv row of `rows`, its (T × N, target-major)
    `scores` with, per line, the target head, the candidate's split and its image's pool index
    (`splits`: splits.json's, the candidates being `pool`'s splits in order), and whether that head
    trained on it (`target_in`, (T, N))."""
    n_targets, n = target_in.shape
    sizes = [len(splits[s]) for s in pool]
    if sum(sizes) != n:
        raise ValueError(f"{n} candidates per target, but {dict(zip(pool, sizes))} in the splits")
    candidates = split_records(splits, {s: (np.arange(size), False) for s, size in zip(pool, sizes)})
    return score_lines(rows, LIRA_SCORE_KEY, scores,
                       {"target": np.repeat(np.arange(n_targets), n), "split": tiled(candidates["split"], n_targets),
                        "record": tiled(candidates["record"], n_targets), "member": target_in.reshape(-1)})


# --------------------------------------------------------------------------------- the tables, declared

def utility_rows(config: dict, dataset: str, target: str | None = None) -> list[dict]:
    """utility.csv (and each method's protect/<method>.csv): every (ε, draw) of every method, and
    its noise-free limit at ε = ∞."""
    blocks = []
    for method in [target] if target is not None else release_methods(config, dataset):
        eps, repeats = release_grid(config, method)
        blocks.append({"dataset": [dataset], "mechanism": [method], "eps": eps, "repeat": repeats})
        if noise_free_draws(config, method):
            blocks.append({"dataset": [dataset], "mechanism": [method], "eps": [float("inf")],
                           "repeat": noise_free_draws(config, method)})
    return blocks


def mia_rows(config: dict, dataset: str, target: str | None = None) -> list[dict]:
    """mia.csv (and each target's attack/<target>.csv): every attack on the clean head (its one
    attack counts as adaptive) and, non-adaptive and adaptive, on every release of every method."""
    blocks = []
    for t in [target] if target is not None else ["none", *release_methods(config, dataset)]:
        key = {"dataset": [dataset], "mechanism": [t], "attack": list(MIA_ATTACKS)}
        if t == "none":
            blocks.append(key | {"adaptive": [True], "eps": NONE, "repeat": [0]})
        else:
            eps, repeats = release_grid(config, t)
            blocks.append(key | {"adaptive": [False, True], "eps": eps, "repeat": repeats})
    return blocks


def lira_rows(config: dict, dataset: str, target: str | None = None) -> list[dict]:
    """lira.csv (and attack/lira/<target>.csv, attack/lira/scores_<target>.parquet: per key T × pool
    scores): every LiRA variant on every target."""
    return [lira_keys(config, dataset, t) | {"attack": list(config["attack"]["lira"]["attacks"])}
            for t in ([target] if target is not None else audited(config))]


def lira_reference_rows(config: dict, dataset: str) -> list[dict]:
    """attack/lira/references.csv: every LiRA and RMIA attack of the config on the clean heads at
    1, 2, 4, … of the shadow heads."""
    lira = config["attack"]["lira"]
    return [{"dataset": [dataset], "attack": [a for a in lira["attacks"] if a in REFERENCE_ATTACKS],
             "references": reference_counts(lira["shadows"])}]


# the pretrain rule's (SimCLR, with its contrastive accuracy) and graph_pretrain's (DGI) history:
# the loss of every epoch; not private (computed on the public data or the graph, without noise)
PRETRAIN_HISTORY = {"epoch": Num(1, integer=True), "loss": Num(0), "contrastive_*": PROBABILITY}


def pretrain_history_rows(config: dict, dataset: str) -> list[dict]:
    """pretrain/history.csv: one row per epoch of the dataset's encoder (a graph's: DGI's)."""
    section = config["dgi"] if dataset in config.get("graphs", {}) else config["simclr"]
    return [{"epoch": list(range(1, section["epochs"] + 1))}]


UTILITY_TABLE = Table("utility.csv", UTILITY, utility_rows, part="protect/{target}.csv")
PRETRAIN_HISTORY_TABLE = Table("pretrain/history.csv", PRETRAIN_HISTORY, pretrain_history_rows)
MIA_TABLE = Table("mia.csv", MIA, mia_rows, part="attack/{target}.csv")
MIA_SCORE_TABLE = Table(None, MIA_SCORES, mia_rows, part="attack/scores_{target}.parquet")
LIRA_TABLE = Table("lira.csv", LIRA, lira_rows, part="attack/lira/{target}.csv")
LIRA_SCORE_TABLE = Table(None, LIRA_SCORES, lira_rows, part="attack/lira/scores_{target}.parquet")
LIRA_REFERENCES_TABLE = Table("attack/lira/references.csv", LIRA_REFERENCES, lira_reference_rows)


# --------------------------------------------------------------------------------- loaders with cross-field checks

def load_image_splits(path, dataset: str | None = None, sizes: dict | None = None) -> dict:
    """The data rule's splits.json: every split a list of indices into its dataset's pool, no index
    twice; of `dataset` with the split `sizes` when given (splits._check_reader)."""
    record = load_json_file(path, {"dataset": Text(tuple(DATASETS)), "splits": Each(Tensor(None, "int", None))})
    info = DATASETS[record["dataset"]]
    index = Tensor(None, "int", Num(0, "pool", high_open=True, integer=True))
    check_fields(path, record["splits"], {s: index for s in SPLITS}, {"pool": info.labelled + info.unlabelled},
                 "splits.")
    _check_disjoint(path, record["splits"])
    _check_pool(path, record)
    _check_reader(path, record, dataset, sizes)
    return record


def load_sensitivity(path, recorded: dict | None = None) -> dict:
    """A sensitivity record: the sensitivity rule's (Δ̂1, Δ̂2 the k-th smallest of the m sampled
    distances; population sampling also ρ < γ) or the certified head's (proven Δ2). Every Δ the
    release calibrates on is finite and > 0; `recorded`: the settings the reading rule expects."""
    record = load_json_file(path, {"sampling": Text(("population", "paper", "certified"))}, recorded)
    if record["sampling"] == "certified":
        return check_fields(path, record, CERTIFIED_SENSITIVITY)
    schema = SAMPLED_SENSITIVITY | (POPULATION if record["sampling"] == "population" else {})
    check_fields(path, record, schema)
    for norm in ("l1", "l2"):
        kth = sorted(record[f"distances_{norm}"])[record["k"] - 1]
        if record[f"delta{norm[1]}"] != kth:
            fail(path, f"delta{norm[1]}", f"{record[f'delta{norm[1]}']:g}",
                 f"the k = {record['k']}-th smallest of distances_{norm}, {kth:g}")
    return record


def load_release(path, method: str, recorded: dict | None = None) -> dict:
    """A protect rule's release file of `method`: one positive noise scale per ε of a positive
    grid, the released heads (ε, draw, parameter) of the length its shapes give. A DP-SGD
    release also records each ε's training settings (`specs`, the tune rule's choice), returned
    as DPSGDSpecs: the attacks train their shadow heads with them."""
    from privssl.release.dpsgd_spec import DPSGDSpec

    release = load_tensor_file(path, RELEASE, recorded={"method": method} | (recorded or {}))
    if method == "dpsgd":
        specs = release.get("specs")
        if not isinstance(specs, list) or len(specs) != len(release["eps"]):
            fail(path, "specs", f"{type(specs).__name__} of {len(specs) if isinstance(specs, list) else 0} entries",
                 f"a list of {len(release['eps'])} DP-SGD settings, one per ε")
        try:
            release["specs"] = [DPSGDSpec.from_config(spec) for spec in specs]
        except (TypeError, ValueError) as err:
            fail(path, "specs", str(err), "DP-SGD settings (privssl.release.dpsgd_spec.DPSGDSpec)")
    return release


def load_lira_heads(path, set_size: int, recorded: dict | None = None) -> dict:
    """The lira_heads rule's file: finite heads, and per head the training set the rule drew, a
    uniform random subset of |d| = `set_size` pool records by the recorded seed. The sets are
    redrawn and compared: the attack's membership labels come from them, and a set that is not
    the head's (identical rows, a half-balanced design, another seed) inflates or deflates every AUC."""
    from privssl.attacks.lira import draw_training_sets  # the attack's own draw, imported only here

    heads = load_tensor_file(path, LIRA_HEADS, {"|d|": set_size}, recorded)
    if heads["flat"].shape[0] != heads["shadows"] + heads["targets"]:
        fail(path, "flat", f"{heads['flat'].shape[0]} heads",
             f"shadows + targets = {heads['shadows'] + heads['targets']}")
    drawn = draw_training_sets(heads["pool_size"], set_size, heads["flat"].shape[0], heads["seed"])
    differ = (heads["sets"] != drawn).any(1)
    if differ.any():
        h = int(differ.nonzero()[0, 0])
        fail(path, f"sets[{h}]", f"{heads['sets'][h, :8].tolist()}... ({int(differ.sum())} of {len(differ)} heads' "
                                 f"sets differ)", f"the draw of seed {heads['seed']}: {drawn[h, :8].tolist()}...")
    return heads


def load_attacker(path, shadow_size: int) -> dict:
    """The shadow rule's file; its indices point into the shadow split of `shadow_size` records."""
    return load_tensor_file(path, ATTACKER, {"|shadow|": shadow_size})


def load_encoder(path, device: torch.device) -> torch.nn.Module:
    """Rebuild the encoder saved by scripts/pretrain.py."""
    from privssl.training.encoders import build_encoder

    saved = load_tensor_file(path, ENCODER)
    encoder = build_encoder(saved["encoder"], saved["in_channels"], saved["image_size"], saved["width"])
    encoder.load_state_dict(saved["state"])
    return encoder.to(device)


def load_tuning_folds(path, config: dict, seed: int, log: Callable[[str], None]) -> TuningFolds:
    """What rule `tune` scores on: the reference split's features (float64, the heads' dtype) and
    labels, the class count and the folds (privssl.release.tuning.folds, `tuning.folds` of them,
    each training on |d| records, drawn from `seed`), said in `log`."""
    import torch

    from privssl.release.tuning import TuningFolds, folds  # here only: its accountants' imports would slow every reader

    feats = load_tensor_file(path, features("finetune", "reference"))
    x, y, n = feats["reference"].to(torch.float64), feats["reference_labels"], len(feats["finetune_labels"])
    splits = folds(len(y), n, config.get("tuning", {}).get("folds", 2), seed)
    log(f"{len(splits)} folds, each trains on |d| = {n} of {len(y)} reference records")
    return TuningFolds(x, y, int(feats["n_classes"]), splits)


def load_private_sets(splits_path: str, data_root: str, attacker_path: str) -> PrivateSets:
    """What a training-time release trains on and is queried on: the images and labels of d, of
    the evaluated splits and of the attacker's shadow records (those `inside` its shadow model and
    its balanced pairs), from the splits file, the data set and the shadow rule's attacker file."""
    import torch

    from privssl.data.images import load_pool
    from privssl.release.training_time import EVALUATED, PrivateSets

    splits = load_image_splits(splits_path)
    pool = load_pool(splits["dataset"], data_root, recorded=splits["pool"])
    index = {name: torch.tensor(splits["splits"][name], dtype=torch.long)
             for name in (*EVALUATED, "shadow", "pretrain")}
    attacker = load_attacker(attacker_path, len(index["shadow"]))
    index["shadow_inside"] = index["shadow"][attacker["inside"].long()]
    index["shadow_pairs"] = index["shadow"][attacker["pairs"].long()]
    del index["shadow"]
    return PrivateSets({k: pool.images[v] for k, v in index.items()}, {k: pool.labels[v] for k, v in index.items()},
                       pool.n_classes, attacker)
