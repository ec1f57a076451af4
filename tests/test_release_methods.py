"""The release-method registry: it agrees with the config schema, and each release's claim has
the kind its sensitivity source supports."""

import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from privssl.release import calibration
from privssl.release.mechanisms import Gaussian, L2Gamma, Laplace, Logistic
from privssl.release.methods import (
    GUARANTEE_KINDS,
    KIND_LINESTYLE,
    OUTPUT_PERTURBATION_METHODS,
    PROTECT_METHODS,
    REGISTRY,
    SUBSTITUTION,
    adjacency,
    dpsgd_guarantee,
    output_perturbation_guarantee,
    output_perturbation_methods,
    release_method,
    substitution_claim,
    training_time_guarantee,
)

SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "config.schema.yaml"
POPULATION = {"sampling": "population", "delta1": 2.0, "delta2": 0.5, "m": 150, "k": 149, "gamma": 0.2}
PAPER = {"sampling": "paper", "delta1": 2.0, "delta2": 0.5, "m": 50, "k": 50}
CERTIFIED = {"sampling": "certified", "delta1": None, "delta2": 0.5}


def test_schema_enum_is_the_registry():
    schema = yaml.safe_load(SCHEMA.read_text())
    enum = schema["properties"]["protect"]["properties"]["mechanisms"]["items"]["enum"]
    assert enum == list(PROTECT_METHODS), "schemas/config.schema.yaml and src/privssl/release/methods.py disagree"


def test_every_entry_is_complete():
    for name, method in REGISTRY.items():
        assert method.name == name
        assert method.dp_kind in ("pure_dp", "approx_dp") or (method.release, method.dp_kind) == (
            "training_time", "heuristic_dp")
        assert method.release in ("output_perturbation", "dpsgd", "training_time")
        if method.release == "output_perturbation":
            assert method.noise is not None and method.noise.calibrate is not None, name
        assert method.colour and method.marker and method.label
    assert set(KIND_LINESTYLE) == set(GUARANTEE_KINDS)
    assert len({m.colour for m in REGISTRY.values()}) == len(REGISTRY), "two methods share a colour"


def test_unknown_method_named():
    with pytest.raises(ValueError, match="'cauchy'.*allowed: alm"):
        release_method("cauchy")


SAMPLED = [m for m in OUTPUT_PERTURBATION_METHODS if REGISTRY[m].head != "certified"]  # a proven Δ is never sampled


@pytest.mark.parametrize("name", SAMPLED)
def test_population_delta_gives_random_dp_and_paper_delta_none(name):
    claim = output_perturbation_guarantee(name, 0.5, 1e-5, POPULATION)
    assert claim.kind == "random_dp"
    assert "γ=0.2" in claim.statement and "149-th smallest of 150" in claim.statement
    assert "reference distribution" in claim.statement and "substitution" in claim.statement
    none = output_perturbation_guarantee(name, 0.5, 1e-5, PAPER)
    assert none.kind == "none" and none.statement.startswith("none: ") and "private data" in none.statement


@pytest.mark.parametrize("name, kind, text", [("certified_gaussian", "approx_dp", "(1, 1e-05)-DP"),
                                               ("certified_pure", "pure_dp", "1-DP")])
def test_certified_delta_gives_a_proven_guarantee(name, kind, text):
    claim = output_perturbation_guarantee(name, 1.0, 1e-5, CERTIFIED)
    assert claim.kind == kind and claim.statement.startswith(text) and "Δ2 = 0.5 proven" in claim.statement


@pytest.mark.parametrize("eps", [0.5, 0.999, 1.0, 10.0])
def test_classical_gaussian_proven_only_below_one(eps):
    claim = output_perturbation_guarantee("gaussian", eps, 1e-5, POPULATION)
    assert (claim.kind == "none") == (eps >= 1)
    analytic = output_perturbation_guarantee("gaussian_analytic", eps, 1e-5, POPULATION)
    assert analytic.kind == "random_dp"


def test_scales_are_the_calibration_formulas_and_the_noise_the_papers_family():
    noise = {name: REGISTRY[name].noise for name in OUTPUT_PERTURBATION_METHODS}
    assert noise["alm"] == Logistic(calibration.l1_scale)  # Theorem 4.1: logistic noise, s = Δ1/ε
    assert noise["laplace"] == Laplace(calibration.l1_scale)
    assert noise["gaussian"] == Gaussian(calibration.classical_gaussian_sigma)
    assert noise["gaussian_analytic"] == noise["certified_gaussian"] == Gaussian(calibration.analytic_gaussian_sigma)
    assert noise["certified_pure"] == L2Gamma(calibration.l2_norm_scale)
    assert noise["alm"] != Laplace(calibration.l1_scale)  # a family is told apart by its kind, not only its scale
    assert {REGISTRY[m].sensitivity_key() for m in ("alm", "laplace")} == {"delta1"}
    assert {REGISTRY[m].sensitivity_key() for m in ("gaussian", "certified_pure")} == {"delta2"}


def test_dpsgd_claim_states_its_accounting():
    claim = dpsgd_guarantee(1.0, 1e-5, 1.234, 1 / 3, 90, 1.0, "rdp")
    assert claim.kind == "approx_dp"
    for text in ("(1, 1e-05)-DP", "σ = 1.234", "C = 1", "q = 0.3333", "90 steps", "rdp accountant",
                 "addition or removal"):
        assert text in claim.statement


def test_unknown_sensitivity_source_named():
    with pytest.raises(ValueError, match="'oracle'"):
        output_perturbation_guarantee("alm", 1.0, 1e-5, {**POPULATION, "sampling": "oracle"})


@pytest.mark.parametrize("claim", [
    lambda graph: output_perturbation_guarantee("alm", 1.0, 1e-5, POPULATION, graph),
    lambda graph: output_perturbation_guarantee("certified_pure", 1.0, 1e-5, CERTIFIED, graph),
    lambda graph: dpsgd_guarantee(1.0, 1e-5, 1.234, 1 / 3, 90, 1.0, "pld", graph),
], ids=["sampled", "certified", "dpsgd"])
def test_a_release_on_a_graph_claims_the_membership_of_a_labelled_node_only(claim):
    """The DGI encoder saw the whole graph, d's nodes and edges included: on a graph the claim is
    the membership of a labelled node in the head's training set, the graph itself public."""
    image, graph = claim(False).statement, claim(True).statement
    assert "one record of the fine-tuning set d" in image and "treated as public" not in image
    assert "one record of the fine-tuning set d" not in graph
    assert "one labelled node of the head's training set d" in graph
    assert "the graph (node features and edges) is treated as public" in graph
    assert claim(True).kind == claim(False).kind


def test_tuned_releases_say_their_settings_cost_no_privacy():
    for claim in (output_perturbation_guarantee("alm", 1.0, 1e-5, POPULATION),
                  output_perturbation_guarantee("certified_gaussian", 1.0, 1e-5, CERTIFIED),
                  dpsgd_guarantee(1.0, 1e-5, 1.234, 1 / 3, 90, 1.0, "pld")):
        assert "chosen on public data only (rule tune), at no privacy cost" in claim.statement


# ------------------------------------------------------------------------------------ each claim, word for word

TAIL = ("adjacency: substitution of one record of the fine-tuning set d (|d| fixed); training settings chosen on "
        "public data only (rule tune), at no privacy cost")


@pytest.mark.parametrize("name, sensitivity, kind, statement", [
    ("alm", POPULATION, "random_dp", "(0.5, γ=0.2)-random DP over the reference distribution; Δ1 = 2, the 149-th "
                                     f"smallest of 150 sampled pairs; {TAIL}"),
    ("gaussian_analytic", POPULATION, "random_dp", "(0.5, 1e-05, γ=0.2)-random DP over the reference distribution; "
                                                   f"Δ2 = 0.5, the 149-th smallest of 150 sampled pairs; {TAIL}"),
    ("laplace", PAPER, "none", "none: Δ1 = 2 estimated from the private data (50 pairs inside d, sets of size |d|-1)"),
    ("gaussian", PAPER, "none", "none: Δ2 = 0.5 estimated from the private data (50 pairs inside d, sets of size "
                                "|d|-1)"),
    ("certified_pure", CERTIFIED, "pure_dp", f"0.5-DP; Δ2 = 0.5 proven (Chaudhuri et al. 2011 bound); {TAIL}"),
    ("certified_gaussian", CERTIFIED, "approx_dp", f"(0.5, 1e-05)-DP; Δ2 = 0.5 proven (Chaudhuri et al. 2011 bound); "
                                                   f"{TAIL}"),
])
def test_each_output_perturbation_claim_names_its_sensitivity_and_budget(name, sensitivity, kind, statement):
    """Δ1 for the l1-calibrated methods (ALM, Laplace), Δ2 for the others; δ only in an (ε, δ)
    method's budget; the image adjacency unless a graph is named."""
    claim = output_perturbation_guarantee(name, 0.5, 1e-5, sensitivity)
    assert (claim.kind, claim.statement) == (kind, statement)


@pytest.mark.parametrize("accountant, library", [("rdp", "Opacus' Rényi DP"),
                                                 ("pld", "dp_accounting's privacy loss distribution"),
                                                 ("prv", "Opacus' privacy random variable"), ("other", "other")])
def test_the_dpsgd_claim_names_the_library_of_its_accountant(accountant, library):
    claim = dpsgd_guarantee(1.0, 1e-5, 1.234, 1 / 3, 90, 1.0, accountant)
    assert claim.statement == (f"(1, 1e-05)-DP by DP-SGD (σ = 1.234, C = 1, Poisson rate q = 0.3333, 90 steps, "
                               f"{accountant} accountant: {library}); adjacency: addition or removal of one record of "
                               "the fine-tuning set d; training settings chosen on public data only (rule tune), at no "
                               "privacy cost")


def test_a_training_time_claim_says_what_its_sensitivity_rests_on():
    proven = training_time_guarantee("dpcl_naive", 4.0, 1e-5, 0.73, "gradient", "Δg = 4|B|C = 512")
    assert (proven.kind, proven.statement) == (
        "approx_dp", "(4, 1e-05)-DP, resting on proven sensitivities: Δg = 4|B|C = 512; σ = 0.73 on gradient; RDP "
                     "accountant, fixed-size batches sampled without replacement (Wang et al. 2019); adjacency: "
                     "substitution of one record of the fine-tuning set d (|d| fixed)")
    heuristic = training_time_guarantee("dpcl", 4.0, 1e-5, 0.73, "gradient; similarity", "Δg = 4C = 4")
    assert heuristic.kind == "heuristic_dp"
    assert heuristic.statement.startswith("(4, 1e-05)-DP, resting on the DPCL paper's heuristic gradient "
                                          "sensitivity: Δg = 4C = 4; σ = 0.73 on gradient; similarity; RDP")
    with pytest.raises(ValueError, match="^'alm' is not a training-time method$"):
        training_time_guarantee("alm", 4.0, 1e-5, 0.73, "gradient", "Δg")
    with pytest.raises(ValueError, match="^'dpsgd' is not an output-perturbation method$"):
        output_perturbation_guarantee("dpsgd", 1.0, 1e-5, POPULATION)


def test_without_a_graph_every_claim_is_about_a_record_of_d():
    for claim in (output_perturbation_guarantee("alm", 1.0, 1e-5, POPULATION),
                  dpsgd_guarantee(1.0, 1e-5, 1.234, 1 / 3, 90, 1.0, "pld")):
        assert "one record of the fine-tuning set d" in claim.statement and "public" in claim.statement
        assert "treated as public" not in claim.statement
    assert adjacency(REGISTRY["alm"]) == SUBSTITUTION


def test_the_output_perturbation_methods_among_names_keep_their_order():
    assert output_perturbation_methods(["dpsgd", "certified_pure", "dpcl", "alm"]) == ["certified_pure", "alm"]
    with pytest.raises(ValueError, match="^unknown release method 'cauchy'; allowed: alm, laplace, gaussian, "
                                         "gaussian_analytic, certified_gaussian, certified_pure, dpsgd, dpcl_naive, "
                                         "dpcl, dpadapter$"):
        output_perturbation_methods(["alm", "cauchy"])


def test_a_group_delta_of_exactly_one_is_no_claim():
    """(2ε, (1 + e^ε) δ) with (1 + e^0)·½ = 1: a δ of 1 allows anything, so there is no claim."""
    assert substitution_claim("dpsgd", 0.0, 0.5) == (math.inf, 0.5)
    assert substitution_claim("dpsgd", 0.0, 0.4999) == (0.0, pytest.approx(0.9998))


def test_a_huge_eps_with_a_tiny_delta_is_no_claim():
    # (1 + e^800) · 5e-305 ≈ e^99: no claim at any δ < 1; the capped formula gives (1600, 0.507)
    assert substitution_claim("dpsgd", 800.0, 5e-305) == (math.inf, 5e-305)


def test_a_pure_method_under_addition_or_removal_claims_twice_its_eps_at_delta_0(monkeypatch):
    """Group privacy over the two steps of a substitution: (2ε, (1 + e^ε) · 0) = (2ε, 0). No
    registered method is pure under addition/removal, so one is registered here."""
    monkeypatch.setitem(REGISTRY, "pure_add_remove", replace(REGISTRY["dpsgd"], dp_kind="pure_dp"))
    assert substitution_claim("pure_add_remove", 3.0, 1e-5) == (6.0, 0.0)
