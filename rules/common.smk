import json

DATASETS = list(config["datasets"])  # image datasets
GRAPHS = list(config.get("graphs", {}))  # graph datasets: same finetune ... attack rules, own data and encoder
MECHANISMS = config["protect"]["mechanisms"]
SCRIPTS = os.path.join(workflow.basedir, "scripts")
ENV = os.path.join(workflow.basedir, "envs", "privssl.yaml")
RESULTS = "results"


def one_of(names):
    """A wildcard constraint matching exactly these names; none at all when the list is empty
    (an empty pattern would match any name and make the image and graph rules ambiguous)."""
    return "|".join(names) if names else "(?!)"


wildcard_constraints:
    dataset=one_of(DATASETS + GRAPHS),
    mechanism=one_of(MECHANISMS),


def script(name):
    """Path of a rule's script; rules also list it as input, so editing it re-runs the rule."""
    return os.path.join(SCRIPTS, name)


def as_json(value):
    """A config section as one shell-quoted JSON argument."""
    return "'" + json.dumps(value, sort_keys=True) + "'"


def stage_seed(stage):
    """A seed per stage, derived from the config seed, so stages draw independent randomness."""
    stages = (["splits", "pretrain", "sensitivity", "shadow", "attack"]
              + [f"protect_{m}" for m in ("alm", "laplace", "gaussian", "gaussian_analytic")]
              + ["link_target", "link_protect"])
    return config["seed"] * 100 + stages.index(stage)


def final_outputs():
    outputs = []
    if DATASETS:
        outputs += [
            f"{RESULTS}/figures/fig1_utility_loss.png",
            f"{RESULTS}/figures/fig1_utility_loss.pdf",
            f"{RESULTS}/figures/fig2_mia.png",
            f"{RESULTS}/figures/fig2_mia.pdf",
            f"{RESULTS}/tables/table1.csv",
            f"{RESULTS}/tables/table1.md",
        ]
    if GRAPHS:
        outputs += [
            f"{RESULTS}/figures/link_stealing.png",
            f"{RESULTS}/figures/link_stealing.pdf",
            f"{RESULTS}/tables/link_stealing.csv",
            f"{RESULTS}/tables/link_stealing.md",
            f"{RESULTS}/figures/graph_protection.png",
            f"{RESULTS}/figures/graph_protection.pdf",
        ]
    return outputs
