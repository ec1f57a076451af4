import json

DATASETS = list(config["datasets"])
MECHANISMS = config["protect"]["mechanisms"]
SCRIPTS = os.path.join(workflow.basedir, "scripts")
ENV = os.path.join(workflow.basedir, "envs", "privssl.yaml")
RESULTS = "results"

wildcard_constraints:
    dataset="|".join(DATASETS),
    mechanism="|".join(MECHANISMS),


def script(name):
    """Path of a rule's script; rules also list it as input, so editing it re-runs the rule."""
    return os.path.join(SCRIPTS, name)


def as_json(value):
    """A config section as one shell-quoted JSON argument."""
    return "'" + json.dumps(value, sort_keys=True) + "'"


def stage_seed(stage):
    """A seed per stage, derived from the config seed, so stages draw independent randomness."""
    stages = ["splits", "pretrain", "sensitivity", "shadow", "attack"] + [f"protect_{m}" for m in
                                                                           ("alm", "laplace", "gaussian", "gaussian_analytic")]
    return config["seed"] * 100 + stages.index(stage)


def final_outputs():
    return [
        f"{RESULTS}/figures/fig1_utility_loss.png",
        f"{RESULTS}/figures/fig1_utility_loss.pdf",
        f"{RESULTS}/figures/fig2_mia.png",
        f"{RESULTS}/figures/fig2_mia.pdf",
        f"{RESULTS}/tables/table1.csv",
        f"{RESULTS}/tables/table1.md",
    ]
