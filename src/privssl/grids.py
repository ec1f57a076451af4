"""The rows the config asks of every table: the grid a reader must find, exactly.

A rule passes its reader the grid of each input table (`--expect`, JSON), computed here from the
config, so that a table cut at a line end, or copied from a run of another config, is refused by
the first rule that reads it (privssl.artefacts.tables.check_expected), naming the first missing row,
instead of becoming a table or figure of the rows that remain.

A grid is a list of blocks; a block maps every key column of the table to the values it takes
(None: any value, for a column the config does not fix, such as the ε the accountant reports
for a fixed noise multiplier); the grid is the union of the blocks' products. A value None in a
list is an empty cell (NaN): the ε of the clean head `none`, the λ of a supervised model.
"""

from __future__ import annotations

from privssl.attacks.contrastive_spec import (
    ATTRIBUTE,
    ATTRIBUTE_ATTACK,
    MEMBERSHIP,
    MEMBERSHIP_ATTACKS,
    MEMBERSHIP_TASK,
    TARGET_KINDS,
)
from privssl.attacks.mia_spec import ATTACKS as MIA_ATTACKS
from privssl.attacks.mia_spec import REFERENCE_ATTACKS, reference_counts
from privssl.attacks.semi_leak_spec import DA_ATTACK, METRIC_ATTACKS, NN_ATTACK
from privssl.audit.audit_names import CANARY_ATTACK, CANARY_AUDITS, CRAFTED_ATTACK, CRAFTED_AUDITS
from privssl.audit.one_run_spec import one_run_audit_name
from privssl.data.label_maps import membership_task_of
from privssl.graphs.link_spec import ALL_INFORMATION, ATTACK_2_INFORMATION, DISTANCES
from privssl.release.mechanisms import Gaussian
from privssl.release.methods import DPCL_METHOD_OF_VARIANT, release_method
from privssl.release.tuning_spec import varied_fields
from privssl.training.semi_supervised_spec import DPSGD_TARGET, MEMBER_KINDS, SUPERVISED

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


def utility(config: dict, dataset: str, methods: list[str] | None = None) -> list[dict]:
    """utility.csv (and each method's protect/<method>.csv): every (ε, draw) of every method, and
    its noise-free limit at ε = ∞."""
    blocks = []
    for method in methods or release_methods(config, dataset):
        eps, repeats = release_grid(config, method)
        blocks.append({"dataset": [dataset], "mechanism": [method], "eps": eps, "repeat": repeats})
        if noise_free_draws(config, method):
            blocks.append({"dataset": [dataset], "mechanism": [method], "eps": [float("inf")],
                           "repeat": noise_free_draws(config, method)})
    return blocks


def mia(config: dict, dataset: str, targets: list[str] | None = None) -> list[dict]:
    """mia.csv (and each target's attack/<target>.csv): every attack on the clean head (its one
    attack counts as adaptive) and, non-adaptive and adaptive, on every release of every method."""
    blocks = []
    for target in targets or ["none", *release_methods(config, dataset)]:
        key = {"dataset": [dataset], "mechanism": [target], "attack": list(MIA_ATTACKS)}
        if target == "none":
            blocks.append(key | {"adaptive": [True], "eps": NONE, "repeat": [0]})
        else:
            eps, repeats = release_grid(config, target)
            blocks.append(key | {"adaptive": [False, True], "eps": eps, "repeat": repeats})
    return blocks


def audited(config: dict) -> list[str]:
    """The targets of LiRA and both audits: the clean head and every method of the protect rule."""
    return ["none", *config["protect"]["mechanisms"]]


def _lira_keys(config: dict, dataset: str, target: str) -> dict:
    if target == "none":
        return {"dataset": [dataset], "method": [target], "adaptive": [True], "eps": NONE}
    return {"dataset": [dataset], "method": [target], "adaptive": [False, True], "eps": config["protect"]["eps"]}


def lira(config: dict, dataset: str, targets: list[str] | None = None) -> list[dict]:
    """lira.csv and attack/lira/scores_<target>.parquet (per key T × pool scores): every LiRA
    variant on every target."""
    return [_lira_keys(config, dataset, t) | {"attack": list(config["attack"]["lira"]["attacks"])}
            for t in targets or audited(config)]


def lira_references(config: dict, dataset: str) -> list[dict]:
    """attack/lira/references.csv: every LiRA and RMIA attack of the config on the clean heads at
    1, 2, 4, … of the shadow heads."""
    lira = config["attack"]["lira"]
    return [{"dataset": [dataset], "attack": [a for a in lira["attacks"] if a in REFERENCE_ATTACKS],
             "references": reference_counts(lira["shadows"])}]


def hypothesis_test_audit(config: dict, dataset: str, targets: list[str] | None = None) -> list[dict]:
    """audit/hypothesis_test_<target>.csv: the Clopper-Pearson audit of every LiRA row."""
    return [block | {"audit": ["hypothesis_test"]} for block in lira(config, dataset, targets)]


def one_run_audit(config: dict, dataset: str) -> list[dict]:
    """audit/one_run.csv: one canary training per (target, ε) and canary kind, the loss attack."""
    kinds = [one_run_audit_name(kind) for kind in config["audit"]["one_run"]["kinds"]]
    return [_lira_keys(config, dataset, t) | {"adaptive": [True], "attack": ["loss"], "audit": kinds}
            for t in audited(config)]


def canary_audit(config: dict, dataset: str) -> list[dict]:
    """audit/canary_dpsgd.csv: the gradient-canary audits of the DP-SGD head at audit.canary.eps
    (none without a DP-SGD head)."""
    if "dpsgd" not in config["protect"]["mechanisms"]:
        return []
    return [{"dataset": [dataset], "method": ["dpsgd"], "eps": list(config["audit"]["canary"]["eps"]),
             "attack": [CANARY_ATTACK], "adaptive": [True], "audit": list(CANARY_AUDITS)}]


def crafted_pair_audit(config: dict, dataset: str) -> list[dict]:
    """audit/crafted_pair_certified.csv: the crafted-pair audits of every certified release at
    audit.canary.eps, the Gaussian-DP fit only where the noise is Gaussian (none without a
    certified release)."""
    eps = list(config["audit"]["canary"]["eps"])
    return [{"dataset": [dataset], "method": [m], "eps": eps, "attack": [CRAFTED_ATTACK], "adaptive": [True],
             "audit": [a for a in CRAFTED_AUDITS
                       if a == "crafted_pair_test" or isinstance(release_method(m).noise, Gaussian)]}
            for m in certified_methods(config)]


def certified_methods(config: dict) -> list[str]:
    """The releases of the certified head among protect.mechanisms."""
    return [m for m in config["protect"]["mechanisms"] if release_method(m).head == "certified"]


def audit(config: dict, dataset: str) -> list[dict]:
    """audit.csv: both audits of every target, the canary audits of the DP-SGD head and the
    crafted-pair audits of the certified heads."""
    return (hypothesis_test_audit(config, dataset) + one_run_audit(config, dataset) + canary_audit(config, dataset)
            + crafted_pair_audit(config, dataset))


def contrastive(config: dict, dataset: str) -> list[dict]:
    """contrastive/metrics.csv: every membership and the attribute attack on every target model
    (supervised; contrastive = Talos at λ = 0; Talos at every other λ) and repeat; the membership
    attacks again on the membership task's models where the dataset has a task of its own for them."""
    section = config["contrastive"]
    entry = section["datasets"][dataset]
    lambdas = {"supervised": NONE, "contrastive": [0.0],
               "talos": [lam for lam in section["talos"]["lambdas"] if lam != 0]}
    repeats = list(range(section["repeats"]))
    inferences = [MEMBERSHIP] + ([MEMBERSHIP_TASK] if membership_task_of(entry) != entry["task"] else [])
    blocks = []
    for target in TARGET_KINDS:
        if not lambdas[target]:
            continue  # no Talos λ > 0 configured
        key = {"dataset": [dataset], "target": [target], "lambda": lambdas[target], "repeat": repeats}
        blocks += [key | {"inference": inferences, "attack": list(MEMBERSHIP_ATTACKS)},
                   key | {"inference": [ATTRIBUTE], "attack": [ATTRIBUTE_ATTACK]}]
    return blocks


def semileak(config: dict, dataset: str, repeat: int) -> list[dict]:
    """semileak/repeat<r>/metrics.csv: the baselines and A_DA (default K, similarity) against every
    algorithm at every checkpoint; at the last step A_DA's views and similarity grids and the top-1
    defence; the supervised reference (members: all) and DP-SGD at every ε at their last step."""
    section = config["semileak"]
    train, attack, defences = section["train"], section["attack"], section["defences"]
    views, similarity = attack["views"], attack["similarity"]
    steps, last = train["steps"], [train["steps"]]
    baselines = {"attack": [NN_ATTACK, *METRIC_ATTACKS], "similarity": NONE, "views": NONE}
    default = {"attack": [DA_ATTACK], "similarity": [similarity], "views": [views]}
    ablations = [{"attack": [DA_ATTACK], "similarity": [similarity], "views": attack["views_grid"]},
                 {"attack": [DA_ATTACK], "similarity": attack["similarities"], "views": [views]}]

    def block(target, eps, step, defence, attacks, kinds=MEMBER_KINDS):
        return {"dataset": [dataset], "repeat": [repeat], "target": [target], "eps": eps, "step": step,
                "defence": [defence],
                **attacks, "member_kind": list(kinds)}

    checkpoints = list(range(train["checkpoint_every"], steps + 1, train["checkpoint_every"]))
    blocks = []
    for algorithm in section["algorithms"]:
        blocks += [block(algorithm, NONE, checkpoints, "none", attacks) for attacks in (baselines, default)]
        blocks += [block(algorithm, NONE, last, "none", attacks) for attacks in ablations]
        if defences["top1"]:
            blocks += [block(algorithm, NONE, last, "top1", attacks) for attacks in (baselines, default)]
    blocks += [block(SUPERVISED, NONE, last, "none", attacks, ["all"]) for attacks in (baselines, default)]
    if "dpsgd" in defences:
        dp = defences["dpsgd"]
        blocks += [block(DPSGD_TARGET, dp["eps"], [dp["steps"]], "none", attacks) for attacks in (baselines, default)]
    return blocks


def semileak_history(config: dict, role: str, target: str) -> list[dict]:
    """semileak/<role>/<target>_history.csv: one row per checkpoint step (DP-SGD: per ε, its last step)."""
    section = config["semileak"]
    train, dpsgd = section["train"], section["defences"].get("dpsgd")
    if target == DPSGD_TARGET:
        return [{"role": [role], "target": [target], "eps": dpsgd["eps"], "step": [dpsgd["steps"]]}]
    steps = list(range(train["checkpoint_every"], train["steps"] + 1, train["checkpoint_every"]))
    return [{"role": [role], "target": [target], "eps": NONE, "step": steps}]


def dpadapter(config: dict, dataset: str) -> list[dict]:
    """dpadapter/results.csv: standard (ρ = 0), SAM and DPAdapter at every radius, each DP-SGD
    fine-tuned at every ε and repeat."""
    section = config["dpadapter"]
    key = {"dataset": [dataset], "eps": section["eps"], "repeat": list(range(section["repeats"]))}
    return [key | {"pretraining": ["standard"], "rho": [0.0]},
            key | {"pretraining": ["sam", "dpadapter"], "rho": section["radii"]}]


def dpcl_accounting(config: dict, dataset: str) -> list[dict]:
    """dpcl/accounting.csv: per variant, target ε (empty at a fixed noise multiplier) and role."""
    section = config["dpcl"]
    return [{"dataset": [dataset], "method": [DPCL_METHOD_OF_VARIANT[v]], "variant": [v],
             "role": ["target", "shadow"], "eps_target": section["eps"] or NONE} for v in section["variants"]]


def link_protection(config: dict, graph: str, targets: list[str] | None = None) -> list[dict]:
    """link_protection.csv (and link/protected_<target>.csv): Attack-0 with every distance and
    Attack-3 on the posteriors of the clean GCN head and of every release."""
    blocks = []
    for target in targets or ["none", *config["protect"]["mechanisms"]]:
        eps, repeats = (NONE, [0]) if target == "none" else release_grid(config, target)
        key = {"dataset": [graph], "mechanism": [target], "eps": eps, "repeat": repeats, "feature_set": ["posteriors"]}
        blocks += [key | {"attack": ["attack-0"], "distance": list(DISTANCES)}, key | {"attack": ["attack-3"],
                                                                                      "distance": NONE}]
    return blocks


def link_attacks(config: dict, graph: str) -> list[dict]:
    """link/attacks.csv: Attack-0 and Attack-2 (each information with every distance), Attack-3
    and Attack-6 on the graph's own target, in every run (the workflow's adversary knows F and g)."""
    key = {"dataset": [graph], "shadow": NONE, "run": list(range(config["link_stealing"]["runs"]))}
    return [key | {"attack": ["attack-0"], "feature_set": ["posteriors"], "distance": list(DISTANCES)},
            key | {"attack": ["attack-2"], "feature_set": list(ATTACK_2_INFORMATION), "distance": list(DISTANCES)},
            key | {"attack": ["attack-3"], "feature_set": ["posteriors"], "distance": NONE},
            key | {"attack": ["attack-6"], "feature_set": [ALL_INFORMATION], "distance": NONE}]


def link_transfer(config: dict, graph: str, shadow: str) -> list[dict]:
    """link/transfer_<shadow>.csv: Attack-1, 4 (posteriors) and 5, 7 (with F and g) trained on `shadow`."""
    key = {"dataset": [graph], "shadow": [shadow], "run": list(range(config["link_stealing"]["runs"])),
           "distance": NONE}
    return [key | {"attack": ["attack-1", "attack-4"], "feature_set": ["posteriors"]},
            key | {"attack": ["attack-5", "attack-7"], "feature_set": [ALL_INFORMATION]}]
