"""What the config asks of every track's tables and files: the release grid they share.

A rule passes its reader the grid of each input table (`--expect`, JSON), computed from the
config by the table's declaration (privssl.artefacts.tables.Table, beside the track that writes
it: its `rows`), so that a table cut at a line end, or copied from a run of another config, is
refused by the first rule that reads it (privssl.artefacts.tables.check_expected), naming the
first missing row, instead of becoming a table or figure of the rows that remain. What several
tracks' grids share is here: the release methods of a dataset and the (ε, draw) grid of each, the
targets of LiRA and the audits, and the fields a release, sensitivity or LiRA heads file records
about itself.

A grid is a list of blocks; a block maps every key column of the table to the values it takes
(None: any value, for a column the config does not fix, such as the ε the accountant reports
for a fixed noise multiplier); the grid is the union of the blocks' products. A value None in a
list is an empty cell (NaN): the ε of the clean head `none`, the λ of a supervised model.
"""

from __future__ import annotations

from privssl.release.methods import DPCL_METHOD_OF_VARIANT, release_method
from privssl.release.tuning_spec import varied_fields

NONE = [None]  # an empty cell: the clean head's ε, a supervised model's λ


def training_time_methods(config: dict) -> list[str]:
    """The training-time release methods a config runs on its image datasets (DPCL's variants, DPAdapter)."""
    if not config["datasets"]:
        return []
    dpcl = [DPCL_METHOD_OF_VARIANT[v] for v in config["dpcl"]["variants"]] if "dpcl" in config else []
    return dpcl + (["dpadapter"] if "dpadapter" in config else [])


def release_methods(config: dict, dataset: str) -> list[str]:
    """Every release method of a dataset: the protect rule's and, on images, the training-time ones."""
    return list(config["protect"]["mechanisms"]) + (training_time_methods(config) if dataset in config["datasets"]
                                                    else [])


def release_grid(config: dict, method: str) -> tuple[list | None, list[int]]:
    """(ε values, draws) of a method's releases: the protect grid, DP-SGD's own repeats, the
    training-time branches' own ε targets and repeats (None: DPCL at a fixed noise multiplier,
    whose ε is the accountant's)."""
    branch = release_method(method).head
    if branch == "dpcl":
        return config["dpcl"]["eps"], list(range(config["dpcl"]["repeats"]))
    if branch == "dpadapter":
        return config["dpadapter"]["eps"], list(range(config["dpadapter"]["repeats"]))
    repeats = config["dpsgd"]["repeats"] if method == "dpsgd" else config["protect"]["repeats"]
    return config["protect"]["eps"], list(range(repeats))


def release_record(config: dict, method: str) -> dict:
    """What a release file of `method` records about itself: the method, its ε grid (unless an
    accountant reports it) and, for a training-time release, its repeats."""
    eps, repeats = release_grid(config, method)
    record = {"method": method} | ({} if eps is None else {"eps": eps})
    return record | ({"repeats": len(repeats)} if release_method(method).release == "training_time" else {})


def lira_heads_record(config: dict, head_kind: str, seed: int) -> dict:
    """What a lira_heads file records about itself: its head counts, pool, head kind and seed."""
    lira = config["attack"]["lira"]
    return {"shadows": lira["shadows"], "targets": lira["targets"], "pool": list(lira["pool"]), "head_kind": head_kind,
            "seed": seed}


def sensitivity_record(config: dict, dataset: str, head: str) -> dict:
    """What the sensitivity record of a head records about itself: the sampler's settings (the
    sensitivity rule's) or the certified learner's, and |d|. The certified settings the tuning
    grid varies are the tune rule's choice, known only once it ran: not fixed here."""
    section = config["datasets"].get(dataset) or config["graphs"][dataset]
    record = {"finetune_size": section["splits"]["finetune"]}
    if head == "certified":
        certified, tuned = config["certified"], set(varied_fields(config, "certified"))
        return record | {"sampling": "certified"} | {k: certified[k] for k in ("clip_norm", "l2", "tolerance")
                                                     if k not in tuned}
    sampler = config["sensitivity"]
    record |= {"sampling": sampler["sampling"], "m": sampler["m"]}
    return record | ({"rho": sampler["rho"], "gamma": sampler["gamma"]} if sampler["sampling"] == "population" else {})


def noise_free_draws(config: dict, method: str) -> list[int]:
    """The draws of a method's noise-free limit (ε = ∞): the method's own draws, so that every
    method's rows stay a full ε × draw grid (an output-perturbation method's head without noise is
    the same in each of its draws; DP-SGD's σ = 0 trainings still sample their own batches, and so
    do the training-time branches' σ = 0 trainings, one per repeat)."""
    return release_grid(config, method)[1]


def audited(config: dict) -> list[str]:
    """The targets of LiRA and both audits: the clean head and every method of the protect rule."""
    return ["none", *config["protect"]["mechanisms"]]


def lira_keys(config: dict, dataset: str, target: str) -> dict:
    """The key columns of a LiRA or audit row of `target`: the clean head once (its one attack counts
    as adaptive), a release non-adaptive and adaptive at every ε of the protect grid."""
    if target == "none":
        return {"dataset": [dataset], "method": [target], "adaptive": [True], "eps": NONE}
    return {"dataset": [dataset], "method": [target], "adaptive": [False, True], "eps": config["protect"]["eps"]}


def certified_methods(config: dict) -> list[str]:
    """The releases of the certified head among protect.mechanisms."""
    return [m for m in config["protect"]["mechanisms"] if release_method(m).head == "certified"]
