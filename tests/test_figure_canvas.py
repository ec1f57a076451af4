"""Nothing on a figure leaves its canvas: save_figure refuses a figure whose legend, title, label
or text runs past an edge (naming it, the side and the pixels), and every figure function of the
library, drawn from small synthetic frames with every release method (the longest legend) and
two datasets, passes that check and is written.

The frames are built here from per-record 0/1 decisions, as the rules write them
(privssl.io.pack_decisions), so that every estimator the figures call has what it reads."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from privssl.attacks.contrastive_spec import ATTRIBUTE_ATTACK, MEMBERSHIP_ATTACKS  # noqa: E402
from privssl.io import pack_decisions  # noqa: E402
from privssl.release.methods import METHODS, REGISTRY  # noqa: E402
from privssl.reports import training_time_report  # noqa: E402
from privssl.audit.audit_names import CANARY_AUDITS, CRAFTED_AUDITS  # noqa: E402
from privssl.reports.audit_plots import figure4, figure5  # noqa: E402
from privssl.reports.contrastive_plots import privacy_figure, talos_lambda_figure  # noqa: E402
from privssl.reports.plotting import (  # noqa: E402
    canvas_overflows,
    figure1,
    figure2,
    figure3,
    graph_protection_figure,
    link_stealing_figure,
    save_figure,
)
from privssl.reports.semileak_plots import ablations_figure, attacks_figure, steps_figure  # noqa: E402

DATASETS = ("digits", "fashion")
EPS = (0.1, 1.0, 10.0, 100.0)
DRAWS = 2
N_TEST, N_MEMBERS = 40, 20  # records per draw: test images; members (= non-members) queried


# --------------------------------------------------------------------------------- the check itself

def _figure_with_legend_at(x: float) -> plt.Figure:
    """One panel and a figure legend whose frame's left edge is at x (figure fraction)."""
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    ax.plot([0, 1], [0, 1], label="a long enough label for the legend")
    fig.legend(loc="center left", bbox_to_anchor=(x, 0.5), borderaxespad=0, title="outside")
    return fig


def test_a_legend_past_the_left_edge_is_refused_by_name_side_and_pixels(tmp_path):
    path = tmp_path / "cut.png"
    with pytest.raises(ValueError, match=r"figure legend 'outside' overflows the canvas on the left by \d+\.\d px"):
        save_figure(_figure_with_legend_at(-0.3), [path])
    assert not path.exists()  # nothing written


def test_the_overflow_is_measured_in_pixels_of_the_written_file():
    """A legend 0.3 of a 4-inch figure past the left edge at 150 dpi: 180 px."""
    fig = _figure_with_legend_at(-0.3)
    (problem,) = canvas_overflows(fig)
    plt.close(fig)
    pixels = float(problem.split("left by ")[1].split(" px")[0])
    assert pixels == pytest.approx(0.3 * 4 * 150, abs=1)


@pytest.mark.parametrize("cut, message", [
    (lambda fig, ax: ax.set_title("a title far too long for its small panel " * 3), r"title of panel 1 .* on the "
                                                                                      r"left by .*right by"),
    (lambda fig, ax: fig.suptitle("suptitle", x=1.0, ha="left"), r"figure text 'suptitle' .* on the right by"),
    (lambda fig, ax: ax.text(0.5, -2.0, "below", transform=ax.transAxes), r"text 'below' of panel 1 .* on the bottom"),
    (lambda fig, ax: ax.legend(loc="upper left", bbox_to_anchor=(0.5, 1.6)), r"legend .* of panel 1 .* on the top"),
])
def test_titles_texts_and_panel_legends_past_an_edge_are_refused(cut, message):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1], label="line")
    cut(fig, ax)
    with pytest.raises(ValueError, match=message):
        save_figure(fig, [])


def test_a_figure_inside_its_canvas_is_written(tmp_path):
    paths = [tmp_path / "inside.png", tmp_path / "inside.pdf"]
    save_figure(_figure_with_legend_at(0.1), paths)
    assert all(p.stat().st_size > 0 for p in paths)


def test_clipped_and_hidden_artists_are_not_counted():
    """A text clipped to its panel, an annotation whose point is outside the panel (not drawn),
    and a panel whose axes are off are not on the canvas, wherever their boxes would be."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(4, 2), layout="constrained")
    left.set(xlim=(0, 1), ylim=(0, 1))
    left.text(0.5, 0.5, "clipped " * 40, clip_on=True)
    left.annotate("not drawn", (5.0, 5.0), xytext=(-400, 0), textcoords="offset points")
    right.set_ylabel("a label far out " * 10)
    right.axis("off")
    assert canvas_overflows(fig) == []
    plt.close(fig)


# --------------------------------------------------------------------------------- synthetic frames

def _kind(method: str, eps: float) -> str:
    entry = REGISTRY[method]
    if method == "gaussian" and eps >= 1:
        return "none"  # the classical calibration proves nothing at ε ≥ 1
    if entry.release == "output_perturbation" and entry.head == "finetune":
        return "random_dp"  # Δ sampled from the reference pool
    return entry.dp_kind


def _bits(rng, rate: float, n: int) -> np.ndarray:
    return rng.random(n) < rate


@pytest.fixture(scope="module")
def release_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """utility.csv and mia.csv rows of every registry method at every ε (and ALM's ε = ∞ limit), on
    two datasets; post-hoc rows carry the non-private head's decisions, training-time rows do not."""
    rng = np.random.default_rng(0)
    utility, mia = [], []
    for dataset in DATASETS:
        clean = _bits(rng, 0.9, N_TEST)
        for repeat in range(DRAWS):
            bits = _bits(rng, 0.7, 2 * N_MEMBERS)
            mia.append({"dataset": dataset, "mechanism": "none", "eps": np.nan, "repeat": repeat,
                        "attack": "shadow_mlp", "adaptive": True, "accuracy": bits.mean(), "auc": 0.7,
                        "n_members": N_MEMBERS, "n_nonmembers": N_MEMBERS, "decisions": pack_decisions(bits)})
        for method in METHODS:
            post_hoc = REGISTRY[method].release != "training_time"
            for eps in EPS + ((math.inf,) if method == "alm" else ()):
                for repeat in range(DRAWS):
                    right = _bits(rng, 0.9 * (1 - 0.5 / (1 + eps)), N_TEST)
                    kind = "none" if math.isinf(eps) else _kind(method, eps)
                    utility.append({"dataset": dataset, "mechanism": method, "eps": eps, "repeat": repeat,
                                    "guarantee_kind": kind, "guarantee": f"{kind} at ε = {eps:g}",
                                    "clean_accuracy": clean.mean(), "accuracy": right.mean(),
                                    "utility_loss": 1 - right.mean() / clean.mean(), "n_test": N_TEST,
                                    "decisions": pack_decisions(right),
                                    "clean_decisions": pack_decisions(clean) if post_hoc else np.nan,
                                    "best_clean_decisions": pack_decisions(clean) if post_hoc else np.nan})
                    if math.isinf(eps):
                        continue
                    bits = _bits(rng, 0.5 + 0.02 * math.log10(eps), 2 * N_MEMBERS)
                    mia.append({"dataset": dataset, "mechanism": method, "eps": eps, "repeat": repeat,
                                "attack": "shadow_mlp", "adaptive": True, "accuracy": bits.mean(), "auc": 0.55,
                                "n_members": N_MEMBERS, "n_nonmembers": N_MEMBERS, "decisions": pack_decisions(bits)})
    return pd.DataFrame(utility), pd.DataFrame(mia)


def _links() -> pd.DataFrame:
    rows = []
    for dataset in DATASETS:
        for (attack, distance), auc in ((("attack-0", "correlation"), 0.8), (("attack-3", np.nan), 0.9)):
            rows += [{"dataset": dataset, "mechanism": "none", "eps": np.nan, "attack": attack, "distance": distance,
                      "run": run, "auc": auc} for run in range(2)]
            rows += [{"dataset": dataset, "mechanism": method, "eps": eps, "attack": attack, "distance": distance,
                      "run": run, "auc": auc - 0.1 / eps - 0.01 * run}
                     for method in METHODS[:7] for eps in EPS for run in range(2)]
    return pd.DataFrame(rows)


def _link_table() -> pd.DataFrame:
    """link_report.headline's columns: the best shadow per transfer attack."""
    attacks = [("attack-0", "correlation", None), ("attack-1", None, "citeseer"), ("attack-2", None, None),
               ("attack-3", None, None), ("attack-4", None, "citeseer"), ("attack-5", None, "pubmed"),
               ("attack-6", None, None), ("attack-7", None, "pubmed")]
    return pd.DataFrame([{"dataset": dataset, "attack": attack, "distance": distance, "shadow": shadow,
                          "auc_mean": 0.8 + 0.01 * i, "auc_std": 0.02, "thesis_auc": 0.85}
                         for dataset in DATASETS for i, (attack, distance, shadow) in enumerate(attacks)])


AUDIT_THREATS = {"hypothesis_test": "black_box", "one_run_mislabelled": "black_box",
                 "one_run_in_distribution": "black_box", **CANARY_AUDITS, **CRAFTED_AUDITS}


def _audit_frames() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """lira.csv rows, ROC curves (as roc_curves gives them) and audit.csv rows for every method on two
    datasets, at one ε (Fig. 4 draws a column per ε of the grid: one keeps the test fast; fig. 5's
    legend still lists all)."""
    lira, roc, audit = [], [], []
    grid = np.geomspace(1e-3, 1, 20)
    for dataset in DATASETS:
        for method in ("none", *METHODS[:7]):
            for eps in ((np.nan,) if method == "none" else (1.0,)):
                for attack in ("lira", "loss"):
                    lira.append({"dataset": dataset, "method": method, "eps": eps, "attack": attack,
                                 "adaptive": True, "tpr_at_1pct_fpr": 0.02, "tpr_at_10pct_fpr": 0.2, "auc": 0.6,
                                 "n_nonmembers": 500})
                    roc += [{"dataset": dataset, "method": method, "eps": eps, "attack": attack, "adaptive": True,
                             "fpr": f, "tpr": min(1.0, f ** 0.8)} for f in grid]
                    for kind, threat in AUDIT_THREATS.items():  # every audit's legend entry
                        audit.append({"dataset": dataset, "method": method, "eps": eps, "attack": attack,
                                      "claimed_eps": math.inf if method == "none" else eps, "audit": kind,
                                      "threat_model": threat, "eps_lower_bound": 0.5, "eps_ceiling": 4.0})
    return pd.DataFrame(lira), pd.DataFrame(roc), pd.DataFrame(audit)


def _contrastive_metrics() -> pd.DataFrame:
    """metrics.csv rows of the contrastive branch: per dataset, the supervised and contrastive
    models and Talos at two λ, two repeats each, with per-record decisions."""
    rng = np.random.default_rng(1)
    n_test, n, rows = 40, 2 * N_MEMBERS, []
    for dataset in DATASETS:
        for target, lam in (("supervised", np.nan), ("contrastive", 0.0), ("talos", 1.0), ("talos", 3.0)):
            for repeat in range(DRAWS):
                task = _bits(rng, 0.8, n_test)
                model = {"dataset": dataset, "target": target, "lambda": lam, "repeat": repeat,
                         "task_accuracy": task.mean(), "n_test": n_test, "task_decisions": pack_decisions(task)}
                for attack in MEMBERSHIP_ATTACKS:
                    bits = _bits(rng, 0.6, n)
                    rows.append({**model, "inference": "membership", "attack": attack, "accuracy": bits.mean(),
                                 "n": n, "auc": 0.6, "baseline": np.nan, "decisions": pack_decisions(bits),
                                 "baseline_decisions": np.nan})
                bits, base = _bits(rng, 0.5, n), _bits(rng, 0.4, n)
                rows.append({**model, "inference": "attribute", "attack": ATTRIBUTE_ATTACK, "accuracy": bits.mean(),
                             "n": n, "auc": np.nan, "baseline": base.mean(), "decisions": pack_decisions(bits),
                             "baseline_decisions": pack_decisions(base)})
    return pd.DataFrame(rows)


SEMILEAK_STEPS, SEMILEAK_EARLY = (200, 1000), 200


def _semileak_metrics() -> pd.DataFrame:
    """metrics.csv rows of the semi-supervised branch: FixMatch at two checkpoints (one algorithm:
    the narrowest figures, a column of panels, under the widest legends and titles), the top-1
    defence, FixMatch by DP-SGD at two ε, A_DA's views and similarity ablations; AUC intervals as
    the attack rule writes them (their width does not matter to the layout)."""
    rows = []

    def add(dataset, target, eps, step, defence):
        model = {"dataset": dataset, "repeat": 0, "target": target, "eps": eps, "step": step,
                 "steps": SEMILEAK_STEPS[-1],
                 "defence": defence, "test_accuracy": 0.7, "test_accuracy_lo": 0.65, "test_accuracy_hi": 0.75,
                 "n_test": 400, "train_accuracy": 0.72, "train_accuracy_lo": 0.67, "train_accuracy_hi": 0.77,
                 "n_train": 400, "js_entropy": 0.1, "js_entropy_lo": 0.05, "js_entropy_hi": 0.15,
                 "noise_multiplier": np.nan if np.isnan(eps) else 1.2, "eps_spent": eps,
                 "delta": np.nan if np.isnan(eps) else 1e-5, "accountant": np.nan if np.isnan(eps) else "pld",
                 "test_decisions": "", "ranks": ""}
        attacks = [(a, np.nan, np.nan, True) for a in ("nn", "correctness", "confidence", "entropy",
                                                        "modified_entropy")]
        attacks.append(("data_augmentation", "js", 10, True))
        if step == SEMILEAK_STEPS[-1] and defence == "none":
            attacks += [("data_augmentation", "js", k, False) for k in (1, 50)]
            attacks += [("data_augmentation", s, 10, False) for s in ("cosine", "correlation", "euclidean")]
        for attack, similarity, views, default in attacks:
            for kind, members in (("all", 400), ("labelled", 40), ("unlabelled", 360)):
                rows.append({**model, "attack": attack, "similarity": similarity, "views": views,
                             "is_default": default, "member_kind": kind, "n_members": members, "n_nonmembers": 400,
                             "auc": 0.7, "auc_lo": 0.65, "auc_hi": 0.75})

    for dataset in DATASETS:
        for algorithm in ("fixmatch",):
            for step in SEMILEAK_STEPS:
                add(dataset, algorithm, np.nan, step, "none")
            add(dataset, algorithm, np.nan, SEMILEAK_STEPS[-1], "top1")
        for eps in (1.0, 10.0):
            add(dataset, "fixmatch_dpsgd", eps, SEMILEAK_STEPS[-1], "none")
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------- every figure

def _figures(release_frames) -> dict:
    utility, mia = release_frames
    lira, roc, audit = _audit_frames()
    contrastive, semileak = _contrastive_metrics(), _semileak_metrics()
    one_utility, one_mia = utility[utility.dataset == DATASETS[0]], mia[mia.dataset == DATASETS[0]]
    return {
        # the default run's shape: one image dataset, one column of panels under the full legend
        # (the narrowest canvas for it; Fig. 1, 3 and the training-time figure share that legend)
        "fig2 (one dataset)": lambda: figure2(one_utility, one_mia),
        "fig1": lambda: figure1(utility),
        "fig2": lambda: figure2(utility, mia),
        "fig3": lambda: figure3(utility),
        "fig_training_time_dp": lambda: training_time_report.figure(utility, mia, dict.fromkeys(DATASETS, N_TEST)),
        "graph_protection": lambda: graph_protection_figure(utility, mia, _links()),
        "link_stealing": lambda: link_stealing_figure(_link_table()),
        "fig4": lambda: figure4(lira, roc),
        "fig5": lambda: figure5(audit),
        "contrastive_privacy": lambda: privacy_figure(contrastive),
        "talos_lambda": lambda: talos_lambda_figure(contrastive),
        "semileak_attacks": lambda: attacks_figure(semileak),
        "semileak_steps": lambda: steps_figure(semileak, SEMILEAK_EARLY),
        "semileak_ablations": lambda: ablations_figure(semileak, SEMILEAK_EARLY),
    }


FIGURES = ("fig2 (one dataset)", "fig1", "fig2", "fig3", "fig_training_time_dp", "graph_protection", "link_stealing", "fig4", "fig5",
           "contrastive_privacy", "talos_lambda", "semileak_attacks", "semileak_steps", "semileak_ablations")
# every registry method in the figure legend
LONG_LEGEND = {"fig2 (one dataset)", "fig1", "fig2", "fig3", "graph_protection"}


@pytest.mark.parametrize("name", FIGURES)
def test_every_figure_stays_inside_its_canvas_and_is_written(release_frames, name, tmp_path):
    fig = _figures(release_frames)[name]()
    if name in LONG_LEGEND:
        entries = {t.get_text() for legend in fig.legends for t in legend.get_texts()}
        assert {REGISTRY[m].label for m in METHODS} <= entries
    path = tmp_path / f"{name.split()[0]}.png"
    save_figure(fig, [path])
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
