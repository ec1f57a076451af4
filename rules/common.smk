import json
import shlex

from pathlib import Path

from privssl import grids, stage_seeds
from privssl.artefacts.audits import (
    AUDIT_TABLE,
    CANARY_AUDIT_TABLE,
    CRAFTED_PAIR_AUDIT_TABLE,
    HYPOTHESIS_TEST_AUDIT_TABLE,
    ONE_RUN_AUDIT_TABLE,
)
from privssl.artefacts.contrastive import (
    CONTRASTIVE_GUESS_TABLE,
    CONTRASTIVE_HISTORY_TABLE,
    CONTRASTIVE_SCORE_TABLE,
    CONTRASTIVE_TABLE,
)
from privssl.artefacts.graphs import (
    LINK_ATTACK_SCORE_TABLE,
    LINK_ATTACKS_TABLE,
    LINK_PROTECTION_SCORE_TABLE,
    LINK_PROTECTION_TABLE,
    LINK_TRANSFER_SCORE_TABLE,
    LINK_TRANSFER_TABLE,
)
from privssl.artefacts.image import (
    LIRA_REFERENCES_TABLE,
    LIRA_SCORE_TABLE,
    LIRA_TABLE,
    MIA_SCORE_TABLE,
    MIA_TABLE,
    PRETRAIN_HISTORY_TABLE,
    UTILITY_TABLE,
)
from privssl.artefacts.semileak import (
    SEMILEAK_HISTORY_TABLE,
    SEMILEAK_MERGED_HISTORY_TABLE,
    SEMILEAK_SCORE_TABLE,
    SEMILEAK_TABLE,
)
from privssl.artefacts.training_time import (
    DPADAPTER_HISTORY_TABLE,
    DPADAPTER_TABLE,
    DPCL_ACCOUNTING_TABLE,
    DPCL_HISTORY_TABLE,
)
from privssl.attacks.mia_spec import REFERENCE_ATTACKS
from privssl.code_graph import library_code
from privssl.data.label_maps import membership_task_of
from privssl.release.methods import output_perturbation_methods, release_method
from privssl.release.tuning_spec import tuned_sections

DATASETS = list(config["datasets"])  # image datasets
GRAPHS = list(config.get("graphs", {}))  # graph datasets: same finetune ... attack rules, own data and encoder
# the graphs whose self-supervised head is fine-tuned, released and attacked (Part B); a graph with
# `protect: false` serves the link-stealing attacks of Part A only (e.g. a shadow domain)
PROTECTED_GRAPHS = [g for g in GRAPHS if config["graphs"][g].get("protect", True)]
# image datasets of the contrastive-privacy branch (thesis Ch. 4); the section is optional (graph-only configs)
CONTRASTIVE = list(config.get("contrastive", {}).get("datasets", {}))
MECHANISMS = config["protect"]["mechanisms"]  # release methods of the registry (src/privssl/release/methods.py)
OUTPUT_PERTURBATION = output_perturbation_methods(MECHANISMS)  # noise on a trained head: rule `protect`
TUNED = tuned_sections(MECHANISMS)  # the config sections whose settings the rule `tune` chooses
# Conda envs, relative to this file: the image track's and the graph track's (PyG).
ENV = "../envs/privssl.yaml"
GRAPH_ENV = "../envs/graph.yaml"
RESULTS = "results"
# The seed paper's own chain (pre-training, features, tuning, fine-tuning, sensitivity, releases,
# attack, and what Fig. 1-2 and Table 1 read) runs before the other branches whenever both are
# ready: its figures appear early in a run, and an error in the core shows early. Snakemake's
# `priority` only orders ready jobs and changes no output; it reserves no cores, so `make run`
# also schedules every job on one core (--max-threads 1, Makefile), or the two-thread SimCLR job
# would wait until both cores happen to be free at once.
CORE_PRIORITY = 10
# Thesis Ch. 4's chain (the contrastive targets and shadows, then their attacks) is the longest
# of the image track once its trainings are repeated: on the Fashion-MNIST preset 20 min of
# training and 24 of attacks after SimCLR. Started after the core's jobs, its attacks ran alone on
# one core for the last 24 minutes (98 min in all); started first, the replay of that run's jobs
# gives 87 min (benchmarks/schedule_replay.py, docs/benchmarks.md). On the default its jobs take
# seconds, so the paper's chain is delayed by seconds.
LONGEST_CHAIN_PRIORITY = CORE_PRIORITY + 1
# Job groups (Snakemake's `group:`; `--group-components` is not needed): on a cluster, each of a
# dataset's chains below is one submission, one queue wait, instead of one per job; a local run
# ignores groups. Each chain's later jobs take seconds (benchmarks/measured_peaks.csv), so a job
# outside it that needs only its first part waits seconds more for the whole; and its members'
# requests scale with the same dataset scale (Semi-Leak's own scale keeps semileak_data out: on
# the paper presets it would make the image track's first job a 15,000-minute request).
GROUP_SPLITS = "{dataset}_splits"  # data and contrastive_data
GROUP_ENCODER = "{dataset}_encoder"  # pretrain and encode; graph_pretrain and graph_encode
GROUP_NOISE = "{dataset}_noise"  # sensitivity and protect, the releases that need its Δ


def tuned_group(section="{section}"):
    """The group of a tuned section's `tune` job and the training that reads its choice: finetune
    (head), certified_head (certified), protect_dpsgd (dpsgd)."""
    return f"{{dataset}}_tuned_{section}"


GRAPH = f"{RESULTS}/{{dataset}}"
LIRA = config["attack"]["lira"]
ONE_RUN = config["audit"]["one_run"]
AUDITED = ["none"] + MECHANISMS  # `none`: the clean heads, the attacks' reference point
CERTIFIED_METHODS = grids.certified_methods(config)  # the releases of the certified head: rule audit_crafted_pair
# Training-time releases (rules/training_time.smk), on every image dataset when their section is present
TRAINING_TIME = grids.training_time_methods(config)
DPCL_METHODS = [m for m in TRAINING_TIME if release_method(m).head == "dpcl"]
DPADAPTER_METHODS = [m for m in TRAINING_TIME if m == "dpadapter"]


SEMILEAK = list(config.get("semileak", {}).get("datasets", {}))  # image datasets of the branch
SEMILEAK_TARGETS = (
    [*config["semileak"]["algorithms"], "supervised"]
    + (["fixmatch_dpsgd"] if "dpsgd" in config["semileak"]["defences"] else [])
    if SEMILEAK
    else []
)
# the branch's independent trainings: each repeat its own targets, shadows and attack (semileak.repeats)
SEMILEAK_REPEATS = list(range(config["semileak"]["repeats"])) if SEMILEAK else []


def semileak_seed(stage, repeat):
    """A Semi-Leak stage's seed in one repeat: repeat 0 keeps the stage's own seed, every other
    repeat a seed of its own name (privssl.stage_seeds), so that no two repeats share randomness."""
    return stage_seeds.repeat_seed(config["seed"], stage, int(repeat))


def semileak_histories(wildcards):
    """(dataset, part) of every training history one Semi-Leak repeat's attack reads: each role's
    and target's."""
    return [
        (wildcards.dataset, {"repeat": int(wildcards.repeat), "role": role, "target": target})
        for role in ("target", "shadow")
        for target in SEMILEAK_TARGETS
    ]


def semileak_scale(wildcards, key):
    """The branch's own `resources.<key>` of the dataset (its networks and steps are not the image
    track's), else the dataset's."""
    entry = config["semileak"]["datasets"].get(wildcards.dataset, {})
    return entry.get("resources", {}).get(key, dataset_scale(wildcards, key))


def semileak_section(*keys):
    """As JSON, only the keys of the `semileak` section that a job reads (as contrastive_section)."""
    section = config.get("semileak", {})
    return as_json({key: section[key] for key in keys if key in section})


def one_of(names):
    """A wildcard constraint matching exactly these names; none at all when the list is empty
    (an empty pattern would match any name and make the image and graph rules ambiguous)."""
    return "|".join(names) if names else "(?!)"


wildcard_constraints:
    dataset=one_of(DATASETS + GRAPHS),


def script(name):
    """Path of a rule's script; rules also list it as input, so editing it re-runs the rule.
    Relative to the working directory, so that moving a finished project (or running it from
    another mount point) does not change the jobs' input sets and re-run them."""
    return os.path.relpath(os.path.join(workflow.basedir, "scripts", name))


def core_priority(wildcards):
    """CORE_PRIORITY for the jobs of the paper's chain on the image datasets; none for the graph
    track's jobs of the same rules (their figures are not the paper's)."""
    return 0 if wildcards.get("dataset") in GRAPHS else CORE_PRIORITY


def library(name):
    """The digests of the library code a rule's script can run (privssl.code_graph), as a param:
    an edit of that code reruns the rule through Snakemake's `params` trigger, and an edit of code
    the script cannot reach, or of comments and docstrings, reruns nothing (docs/resuming.md)."""
    return library_code(Path(workflow.basedir, "scripts", name), Path(SRC))


def resource(name):
    """Path of a file of resources/ (reference values quoted from the papers), relative like `script`."""
    return os.path.relpath(os.path.join(workflow.basedir, "resources", name))


def as_json(value):
    """A config section as one shell-quoted JSON argument."""
    return shlex.quote(json.dumps(value, sort_keys=True))


def contrastive_section(*keys):
    """As JSON, only the keys of the `contrastive` section that a job reads, so that its params
    change only with them (new attack settings do not retrain the models)."""
    section = config.get("contrastive", {})  # absent in a graph-only config
    return as_json({key: section[key] for key in keys if key in section})


def torch_threads(rule):
    """The rule's torch intra-op thread count (config `torch_threads`: the rule's, else `default`),
    which is also the count of threads it asks the scheduler for."""
    counts = config["torch_threads"]
    return counts.get(rule, counts["default"])


def threads_option(rule):
    """`--threads N` for the rule's script, a param rather than {threads}: float sums depend on the
    count, and Snakemake grants fewer threads under --cores 1, others under --set-threads. As a
    param, a changed count reruns the rule; it carries the option's name because Snakemake
    compares a rule's params as a set of values, where a bare count could equal another param's."""
    return f"--threads {torch_threads(rule)}"


def stage_seed(stage):
    """The stage's seed: a hash of the config seed and the stage's name (privssl.stage_seeds), so
    adding or removing a stage or a release method changes no other stage's randomness."""
    return stage_seeds.stage_seed(config["seed"], stage)


def tuning_sections(section):
    """The config sections a section's tuning reads: its own, the release grid (`protect`) where
    its score is taken after noise, the sampler (`sensitivity`) whose Δ the head's noise needs, and
    of `tuning` only the folds, its own grid and (the head's) the arithmetic of its trainings; so a
    change of the certified grid does not retune (and retrain) the released head."""
    keys = {
        "head": ["head", "protect", "sensitivity"],
        "certified": ["certified", "protect"],
        "dpsgd": ["dpsgd", "protect"],
    }[section]
    tuning = config.get("tuning", {})
    read = ("folds", section, f"{section}_precision")  # only the head has one
    return {key: config[key] for key in keys} | {"tuning": {k: tuning[k] for k in read if k in tuning}}


def tuning_config(section):
    """tuning_sections as JSON, the tune job's --config."""
    return as_json(tuning_sections(section))


def choice_config(*sections):
    """`--choice-config` of a script that reads tuned settings: per section, what its tuning read,
    so that the script checks the chosen file against the config's grid before any work."""
    tuned_here = [s for s in sections if s in TUNED]
    if not tuned_here:
        return ""
    return f"--choice-config {as_json({s: tuning_sections(s) for s in tuned_here})}"


def tune_inputs(wildcards):
    """The script of the section, the features, and for DP-SGD the head's choice (its heads train
    with the chosen architecture)."""
    inputs = {
        "script": script(f"tune_{wildcards.section}.py"),
        "features": f"{RESULTS}/{wildcards.dataset}/finetune/features.pt",
    }
    if wildcards.section == "dpsgd":
        inputs["head_spec"] = f"{RESULTS}/{wildcards.dataset}/tuning/head.json"
    return inputs


def tuned(section):
    """The settings rule `tune` chose for a config section (privssl.release.tuning)."""
    return f"{RESULTS}/{{dataset}}/tuning/{section}.json"


def tuned_inputs(*sections):
    """Inputs `<section>_spec` of the tuned settings among `sections` that this run tunes."""
    return {f"{section}_spec": tuned(section) for section in sections if section in TUNED}


def spec_option(option, section):
    """`--<option> @<tuned settings>` for a script; empty where the run does not tune `section`
    (no release method of the config trains with it)."""
    if section not in TUNED:
        return ""
    return lambda w: f"--{option} @{tuned(section).format(dataset=w.dataset)}"


# the tuned section each kind of LiRA heads trains with: only that choice is an input of its job
LIRA_HEAD_SECTION = {"finetune": "head", "certified": "certified"}


def kind_spec_option(option, section, kind):
    """spec_option for the LiRA heads of one kind only (its other options are not passed)."""
    option_of = spec_option(option, section)
    return lambda w: option_of(w) if w.head_kind == kind and callable(option_of) else ""


def released_head(method):
    """The trained head a release method adds its noise to, and that head's sensitivity record."""
    if release_method(method).head == "certified":
        return f"{RESULTS}/{{dataset}}/certified/head.pt", f"{RESULTS}/{{dataset}}/certified/sensitivity.json"
    return f"{RESULTS}/{{dataset}}/finetune/head.pt", f"{RESULTS}/{{dataset}}/sensitivity.json"


def final_outputs():
    outputs = [f"{RESULTS}/tables/claims.csv", f"{RESULTS}/tables/claims.md"]
    if DATASETS:
        outputs += [
            f"{RESULTS}/figures/fig1_utility_loss.png",
            f"{RESULTS}/figures/fig1_utility_loss.pdf",
            f"{RESULTS}/figures/fig2_mia.png",
            f"{RESULTS}/figures/fig2_mia.pdf",
            f"{RESULTS}/figures/fig3_frontier.png",
            f"{RESULTS}/figures/fig3_frontier.pdf",
            f"{RESULTS}/tables/table1.csv",
            f"{RESULTS}/tables/table1.md",
            f"{RESULTS}/tables/table2.csv",
            f"{RESULTS}/tables/table2.md",
            f"{RESULTS}/figures/fig4_roc.png",
            f"{RESULTS}/figures/fig4_roc.pdf",
            f"{RESULTS}/figures/fig5_audit.png",
            f"{RESULTS}/figures/fig5_audit.pdf",
            f"{RESULTS}/figures/fig_references.png",
            f"{RESULTS}/figures/fig_references.pdf",
            f"{RESULTS}/tables/lira_references.md",
        ]
    if CONTRASTIVE:
        outputs += [
            f"{RESULTS}/figures/fig_contrastive_privacy.png",
            f"{RESULTS}/figures/fig_contrastive_privacy.pdf",
            f"{RESULTS}/figures/fig_talos_lambda.png",
            f"{RESULTS}/figures/fig_talos_lambda.pdf",
            f"{RESULTS}/tables/contrastive.csv",
            f"{RESULTS}/tables/contrastive.md",
        ]
    if config.get("semileak", {}).get("datasets"):
        outputs += [
            f"{RESULTS}/figures/fig_semileak_{name}.{ext}"
            for name in ("attacks", "steps", "ablations")
            for ext in ("png", "pdf")
        ]
        outputs += [f"{RESULTS}/tables/semileak.csv", f"{RESULTS}/tables/semileak.md"]
    if TRAINING_TIME:
        outputs += [
            f"{RESULTS}/figures/fig_training_time_dp.png",
            f"{RESULTS}/figures/fig_training_time_dp.pdf",
        ]
    if DPCL_METHODS:
        outputs += [f"{RESULTS}/tables/dpcl_accounting.csv", f"{RESULTS}/tables/dpcl_accounting.md"]
        outputs += files(DPCL_HISTORY_TABLE, DATASETS)
    if DPADAPTER_METHODS:
        outputs += [f"{RESULTS}/tables/dpadapter.csv", f"{RESULTS}/tables/dpadapter.md"]
    if GRAPHS:
        outputs += [
            f"{RESULTS}/figures/link_stealing.png",
            f"{RESULTS}/figures/link_stealing.pdf",
            f"{RESULTS}/tables/link_stealing.csv",
            f"{RESULTS}/tables/link_stealing.md",
        ]
    if PROTECTED_GRAPHS:
        outputs += [f"{RESULTS}/figures/graph_protection.png", f"{RESULTS}/figures/graph_protection.pdf"]
    if DATASETS or GRAPHS:
        outputs.append(f"{RESULTS}/digest.md")
    return outputs


def branch_arguments(input):
    """The claim branches' arguments of a job that builds the claims ledger (rules `claims` and
    `digest`), from the job's inputs of each branch: none where the config runs no such branch."""
    words = []
    if input.contrastive:
        words += ["--contrastive", *input.contrastive]
        words += ["--contrastive-scores", *input.contrastive_scores]
        words += ["--contrastive-guesses", *input.contrastive_guesses]
    if input.semileak:
        defaults = {
            "--early-stopping": config["semileak"]["defences"]["early_stopping"],
            "--views": config["semileak"]["attack"]["views"],
            "--similarity": config["semileak"]["attack"]["similarity"],
        }
        words += ["--semileak", *input.semileak, "--semileak-scores", *input.semileak_scores]
        words += [word for pair in defaults.items() for word in pair]
    if input.dpadapter:
        words += ["--dpadapter", *input.dpadapter]
    if DPCL_METHODS:
        words.append("--dpcl-paper")
    return " ".join(shlex.quote(str(word)) for word in words)


def lira_head_kind(method):
    """The clean heads a method's releases start from: the certified learner's, else A_S's
    (DP-SGD trains its own, on the same sets)."""
    return "certified" if method != "none" and release_method(method).head == "certified" else "finetune"


def release_inputs(wildcards):
    """The method's release file (noise scale per ε) and utility CSV (guarantee kinds); none for `none`."""
    if wildcards.target == "none":
        return {}
    return {
        "release": f"{RESULTS}/{wildcards.dataset}/protect/{wildcards.target}.pt",
        "utility": UTILITY_TABLE.path(RESULTS, wildcards.dataset, wildcards.target),
    }


def release_args(wildcards, input):
    if wildcards.target == "none":
        return ""
    return f"--release {shlex.quote(input.release)} --utility {shlex.quote(input.utility)}"


def transfer_pairs():
    """Every (target, shadow) pair of distinct graphs, for Attack-1, 4, 5, 7."""
    return [(t, s) for t in GRAPHS for s in GRAPHS if s != t]


def clean_accuracy(wildcards, input):
    """Test accuracy of the clean release (the non-private head A_S), the utility loss's reference."""
    with open(input.metrics) as handle:
        return json.load(handle)["test_accuracy"]


def training_time_release(method):
    """The release file of a training-time method, in the folder of the branch that trains it."""
    branch = release_method(method).head  # dpcl | dpadapter
    return f"{RESULTS}/{{dataset}}/{branch}/{method}.pt"


def grid(table, datasets, values=None):
    """The config's rows of each dataset's file of `table` (its declaration, privssl.artefacts.
    <track>), or with `values` of each of its parts (one per target, repeat, ...), by path."""
    return table.expected(config, RESULTS, datasets, values)


def released(dataset):
    """The release methods of a dataset, in the order of its merged tables' parts: the protect
    rule's, then on images the training-time branches' (privssl.grids, as the tables' rows)."""
    return grids.release_methods(config, dataset)


def mia_scores(datasets):
    """The per-record scores of every attack/<target>.csv of these datasets: the readers of
    mia.csv take each row's decisions from them (artefacts.image.load_mia)."""
    return part_paths(MIA_SCORE_TABLE, [(d, t) for d in datasets for t in ["none", *released(d)]])


def audit_parts(dataset):
    """The parts of a dataset's audit.csv with the config's rows of each, by path, in order:
    the hypothesis test of every target, the one-run audits, the canary audits of the DP-SGD head
    and the crafted-pair audits of the certified releases where the config has them."""
    return (
        grid(HYPOTHESIS_TEST_AUDIT_TABLE, [dataset], AUDITED)
        | grid(ONE_RUN_AUDIT_TABLE, [dataset])
        | grid(CANARY_AUDIT_TABLE, [dataset] if "dpsgd" in MECHANISMS else [])
        | grid(CRAFTED_PAIR_AUDIT_TABLE, [dataset] if CERTIFIED_METHODS else [])
    )


def files(table, datasets, values=None):
    """Each dataset's file of `table`, or with `values` each of its parts, in that order (a
    dataset may be the wildcard "{dataset}": a rule's outputs and inputs)."""
    if values is None:
        return [table.path(RESULTS, dataset) for dataset in datasets]
    return [table.path(RESULTS, dataset, value) for dataset in datasets for value in values]


def part_paths(table, pairs):
    """The parts of `table` named by (dataset, value) pairs, in that order."""
    return [table.path(RESULTS, dataset, value) for dataset, value in pairs]


def parts(table, pairs):
    """The config's rows of the parts of `table` named by (dataset, value) pairs, by path."""
    return {path: table.rows(config, *pair) for path, pair in zip(part_paths(table, pairs), pairs)}


def release_records(dataset, methods):
    """The fields every release file of these methods must record (privssl.grids.release_record)."""
    return {
        (training_time_release(m) if m in TRAINING_TIME else f"{RESULTS}/{{dataset}}/protect/{m}.pt").format(
            dataset=dataset
        ): grids.release_record(config, m)
        for m in methods
    }


def sensitivity_records(dataset, methods):
    """The settings every sensitivity record these methods calibrate on must record."""
    return {
        released_head(m)[1].format(dataset=dataset): grids.sensitivity_record(config, dataset, release_method(m).head)
        for m in methods
    }


def expect(*grids_by_path):
    """A reader's --expect argument: the grids of every table it reads, by path."""
    return f"--expect {as_json({path: blocks for g in grids_by_path for path, blocks in g.items()})}"
