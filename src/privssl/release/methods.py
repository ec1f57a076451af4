"""The one registry of the ways a head is released, and the exact privacy claim of each release.

An entry says how the release is made (noise calibration and unit-noise family, or DP-SGD), which
head and which sensitivity it needs, the kind of guarantee it can support and its plot style.
The config schema's enum (tests/test_release_methods.py checks it), the rule targets of the
Snakefile, the plots and the `guarantee` / `guarantee_kind` columns all read this registry; a
stage's seed does not (privssl.stage_seeds). Adding a method is one entry here; a new
noise is one family in `privssl.release.mechanisms` (its sampler, log-density and calibration).

The *kind* of a release's guarantee depends on the method and on where its sensitivity comes
from (`sensitivity.json`, key `sampling`):

| sensitivity source       | what the ε of an output-perturbation release means                  |
|--------------------------|----------------------------------------------------------------------|
| `certified` (a proof)    | ε-DP (`pure_dp`) or (ε, δ)-DP (`approx_dp`), every neighbouring pair |
| `population` (sampled)   | (ε, γ)-random DP over the reference pool's distribution (`random_dp`)|
| `paper` (sampled in d)   | no guarantee (`none`): the noise scale is a function of the private d|

Free of torch on purpose: the Snakefile imports it before any job runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from privssl.release import calibration
from privssl.release.mechanisms import Gaussian, L2Gamma, Laplace, Logistic, NoiseFamily

GUARANTEE_KINDS = ("pure_dp", "approx_dp", "random_dp", "heuristic_dp", "none")
# Plot line style per guarantee kind: solid proven, dashed random DP, dash-dot an accountant's ε
# over a sensitivity that is not proven (DPCL), dotted none.
KIND_LINESTYLE = {"pure_dp": "-", "approx_dp": "-", "random_dp": "--", "heuristic_dp": "-.", "none": ":"}
SUBSTITUTION = "substitution of one record of the fine-tuning set d (|d| fixed)"
# The claim of a utility row at ε = ∞ (privssl.release.tuning): a reference point, never released.
NOISE_FREE = "none: the noise-free limit (ε = ∞), the method's training without noise, clipping kept; not a release"
ADD_REMOVE = "addition or removal of one record of the fine-tuning set d"
# On a graph the head is trained on DGI embeddings of the whole graph, d's nodes and edges
# included: what the noise protects is only which labelled nodes trained the head.
GRAPH_PUBLIC = ("; the graph (node features and edges) is treated as public: the DGI encoder was trained on the "
                "whole graph, d's nodes and edges included, so the claim covers the membership of a labelled node "
                "in the head's training set only")


# The head, the certified head and DP-SGD train with settings chosen on the public reference
# split (privssl.release.tuning): the choice reads no record of d, so it costs no privacy.
TUNED_ON_PUBLIC = "training settings chosen on public data only (rule tune), at no privacy cost"


def adjacency(method: "ReleaseMethod", graph: bool = False) -> str:
    """The neighbouring relation a release of `method` is private under, in words: on a graph,
    the membership of one labelled node in the head's training set, the graph itself public."""
    if not graph:
        return method.adjacency
    return method.adjacency.replace("one record of the fine-tuning set d", "one labelled node of the head's "
                                    "training set d") + GRAPH_PUBLIC


@dataclass(frozen=True)
class ReleaseMethod:
    """One way of releasing a head, and what its ε can mean."""

    name: str
    label: str  # legend text
    colour: str
    marker: str
    release: str  # "output_perturbation": noise on a trained head | "dpsgd": noise during training of the head |
    #               "training_time": a whole network trained privately by its own branch of the DAG
    head: str  # which trained head is released: "finetune" (A_S) | "certified" (regularised LR) | "dpsgd" |
    #            the branch of a training-time method ("dpcl", "dpadapter")
    sensitivity: str  # which sensitivity the noise scale needs: "l1" | "l2" | "certified_l2" | "none"
    dp_kind: str  # the guarantee given a true sensitivity: "pure_dp" | "approx_dp"
    adjacency: str
    noise: NoiseFamily | None = None  # the noise and its calibration (privssl.release.mechanisms)
    proof_holds: Callable[[float], bool] = lambda eps: True  # ε where the calibration is a proof
    proof_note: str = ""  # why not, where it is not

    @property
    def uses_delta(self) -> bool:
        return self.dp_kind == "approx_dp"

    def sensitivity_key(self) -> str:
        """The key of sensitivity.json that holds the sensitivity this method's scale uses."""
        return {"l1": "delta1", "l2": "delta2", "certified_l2": "delta2"}[self.sensitivity]


REGISTRY: dict[str, ReleaseMethod] = {m.name: m for m in (
    ReleaseMethod("alm", "ALM (logistic)", "tab:red", "o", "output_perturbation", "finetune", "l1", "pure_dp",
                  SUBSTITUTION, noise=Logistic(calibration.l1_scale)),
    ReleaseMethod("laplace", "Laplace", "tab:blue", "s", "output_perturbation", "finetune", "l1", "pure_dp",
                  SUBSTITUTION, noise=Laplace(calibration.l1_scale)),
    ReleaseMethod("gaussian", "Gaussian (classical)", "tab:green", "^", "output_perturbation", "finetune", "l2",
                  "approx_dp", SUBSTITUTION, noise=Gaussian(calibration.classical_gaussian_sigma),
                  proof_holds=lambda eps: eps < 1,
                  proof_note="the classical Gaussian calibration is a proof only for ε < 1"),
    ReleaseMethod("gaussian_analytic", "Gaussian (analytic)", "tab:olive", "v", "output_perturbation", "finetune",
                  "l2", "approx_dp", SUBSTITUTION, noise=Gaussian(calibration.analytic_gaussian_sigma)),
    ReleaseMethod("certified_gaussian", "certified LR + analytic Gaussian", "tab:purple", "D", "output_perturbation",
                  "certified", "certified_l2", "approx_dp", SUBSTITUTION,
                  noise=Gaussian(calibration.analytic_gaussian_sigma)),
    ReleaseMethod("certified_pure", "certified LR + Gamma-norm (ε-DP)", "tab:brown", "P", "output_perturbation",
                  "certified", "certified_l2", "pure_dp", SUBSTITUTION, noise=L2Gamma(calibration.l2_norm_scale)),
    ReleaseMethod("dpsgd", "DP-SGD head (Opacus)", "tab:cyan", "X", "dpsgd", "dpsgd", "none", "approx_dp",
                  ADD_REMOVE),
    # Training-time releases (rules/training_time.smk): encoder and head trained on d under DP.
    ReleaseMethod("dpcl_naive", "contrastive DP-SGD, naive (Δg = 4|B|C)", "tab:pink", "<", "training_time", "dpcl",
                  "none", "approx_dp", SUBSTITUTION),
    ReleaseMethod("dpcl", "DPCL, noisy connection point (Δg = 4C)", "tab:gray", ">", "training_time", "dpcl", "none",
                  "heuristic_dp", SUBSTITUTION),
    ReleaseMethod("dpadapter", "DPAdapter pre-training + DP-SGD", "tab:orange", "*", "training_time", "dpadapter",
                  "none", "approx_dp", SUBSTITUTION),
)}
METHODS = tuple(REGISTRY)
OUTPUT_PERTURBATION_METHODS = tuple(n for n, m in REGISTRY.items() if m.release == "output_perturbation")
# `protect.mechanisms`: the releases of the fine-tuned head; the training-time ones have their own sections
PROTECT_METHODS = tuple(n for n, m in REGISTRY.items() if m.release != "training_time")
TRAINING_TIME_METHODS = tuple(n for n, m in REGISTRY.items() if m.release == "training_time")
DPCL_METHOD_OF_VARIANT = {"naive": "dpcl_naive", "dpcl": "dpcl"}  # config `dpcl.variants` -> release method


def release_method(name: str) -> ReleaseMethod:
    if name not in REGISTRY:
        raise ValueError(f"unknown release method {name!r}; allowed: {', '.join(METHODS)}")
    return REGISTRY[name]


def output_perturbation_methods(names) -> list[str]:
    """The names among `names` whose release is noise added to a trained head."""
    return [n for n in names if release_method(n).release == "output_perturbation"]


@dataclass(frozen=True)
class Guarantee:
    kind: str  # one of GUARANTEE_KINDS
    statement: str  # the claim, exactly


def output_perturbation_guarantee(name: str, eps: float, delta: float, sensitivity: dict,
                                  graph: bool = False) -> Guarantee:
    """The claim of releasing a head with `name`'s noise at (ε, δ), given the sensitivity record.

    `sensitivity` is the content of sensitivity.json (or the certified head's record); its
    `sampling` says where Δ comes from: `certified`, `population` or `paper`. `graph`: the head
    was trained on node embeddings of a graph (adjacency()).
    """
    method = release_method(name)
    if method.release != "output_perturbation":
        raise ValueError(f"{name!r} is not an output-perturbation method")
    source = sensitivity["sampling"]
    which = "Δ2" if method.sensitivity in ("l2", "certified_l2") else "Δ1"
    value = sensitivity[method.sensitivity_key()]
    if not method.proof_holds(eps):
        return Guarantee("none", f"none: {method.proof_note} (ε = {eps:g})")
    budget = f"({eps:g}, {delta:g})" if method.uses_delta else f"{eps:g}"
    if source == "certified":
        return Guarantee(method.dp_kind, f"{budget}-DP; {which} = {value:.6g} proven "
                         f"(Chaudhuri et al. 2011 bound); adjacency: {adjacency(method, graph)}; {TUNED_ON_PUBLIC}")
    if source == "population":
        budget = (f"({eps:g}, {delta:g}, γ={sensitivity['gamma']:g})" if method.uses_delta
                  else f"({eps:g}, γ={sensitivity['gamma']:g})")
        return Guarantee("random_dp", f"{budget}-random DP over the reference distribution; {which} = {value:.6g}, "
                         f"the {sensitivity['k']}-th smallest of {sensitivity['m']} sampled pairs; "
                         f"adjacency: {adjacency(method, graph)}; {TUNED_ON_PUBLIC}")
    if source == "paper":
        return Guarantee("none", f"none: {which} = {value:.6g} estimated from the private data "
                         f"({sensitivity['m']} pairs inside d, sets of size |d|-1)")
    raise ValueError(f"unknown sensitivity sampling {source!r}; allowed: certified, population, paper")


def dpsgd_guarantee(eps: float, delta: float, noise_multiplier: float, sample_rate: float, steps: int,
                    clip_norm: float, accountant: str, graph: bool = False) -> Guarantee:
    """The claim of a DP-SGD head: (ε, δ)-DP from the accountant of the Poisson-subsampled Gaussian."""
    library = {"rdp": "Opacus' Rényi DP", "pld": "dp_accounting's privacy loss distribution",
               "prv": "Opacus' privacy random variable"}.get(accountant, accountant)
    return Guarantee("approx_dp", f"({eps:g}, {delta:g})-DP by DP-SGD (σ = {noise_multiplier:.4g}, C = {clip_norm:g}, "
                     f"Poisson rate q = {sample_rate:.4g}, {steps} steps, {accountant} accountant: {library}); "
                     f"adjacency: {adjacency(REGISTRY['dpsgd'], graph)}; {TUNED_ON_PUBLIC}")


def training_time_guarantee(name: str, eps: float, delta: float, noise_multiplier: float, mechanisms: str,
                            sensitivity: str) -> Guarantee:
    """The claim of a training-time release: the RDP accountant's (ε, δ) for sampling without
    replacement (privssl.accounting.dpcl) over the mechanisms it released. Its kind is the method's
    `dp_kind`: `approx_dp` where every sensitivity is proven, `heuristic_dp` where the gradient's
    rests on the DPCL paper's argument (privssl.training.dpcl)."""
    method = release_method(name)
    if method.release != "training_time":
        raise ValueError(f"{name!r} is not a training-time method")
    rests = "proven sensitivities" if method.dp_kind == "approx_dp" else "the DPCL paper's heuristic gradient sensitivity"
    return Guarantee(method.dp_kind, f"({eps:g}, {delta:g})-DP, resting on {rests}: {sensitivity}; σ = "
                     f"{noise_multiplier:.4g} on {mechanisms}; RDP accountant, fixed-size batches sampled without "
                     f"replacement (Wang et al. 2019); adjacency: {method.adjacency}")


def substitution_claim(name: str, eps: float, delta: float) -> tuple[float, float]:
    """(ε, δ) the method claims for the *substitution* of one record, the neighbouring relation
    every membership audit here tests (a candidate in or out of a training set of fixed size |d|).

    Methods whose adjacency is substitution claim their own (ε, δ) (δ = 0 for the pure ones).
    Under addition/removal (DP-SGD) a substitution is a removal then an addition, so group
    privacy gives (2ε, (1 + e^ε) δ): the two steps' δ's add after the first is scaled by e^ε
    (P[M(d) ∈ S] ≤ e^ε P[M(d'') ∈ S] + δ ≤ e^ε (e^ε P[M(d') ∈ S] + δ) + δ). Where that δ reaches
    1 there is no claim, returned as ε = ∞ at the method's own δ (the audit still measures what
    it can at that δ)."""
    method = release_method(name)
    own_delta = 0.0 if method.dp_kind == "pure_dp" else delta  # the accountant's δ too (heuristic_dp)
    if method.adjacency == SUBSTITUTION:
        return eps, own_delta
    if own_delta == 0:
        return 2 * eps, 0.0
    # (1 + e^ε) δ in logs: e^ε overflows a float beyond ε ≈ 709, where a tiny δ can still keep it below 1
    log_group = math.log(own_delta) + eps + math.log1p(math.exp(-eps))
    return (2 * eps, math.exp(log_group)) if log_group < 0 else (math.inf, own_delta)
