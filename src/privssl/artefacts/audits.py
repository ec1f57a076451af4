"""The audit tables (rules audit_one_run, audit_canary, audit_crafted_pair, lira's hypothesis
test, merged into audit.csv by membership_tables): their schema, the relations between their
columns (counts, ceilings, each row's claim its release's) and the rows the config asks of each."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privssl.artefacts.specs import COUNT, Flag, Num, Text, check_numbers, fail
from privssl.artefacts.tables import _METHOD, Table, _first_line
from privssl.audit.audit_names import CANARY_ATTACK, CANARY_AUDITS, CRAFTED_ATTACK, CRAFTED_AUDITS, THREAT_MODELS
from privssl.audit.one_run_spec import one_run_audit_name
from privssl.grids import audited, certified_methods, lira_keys
from privssl.release.mechanisms import Gaussian
from privssl.release.methods import ADD_REMOVE, GUARANTEE_KINDS, REGISTRY, release_method


# --------------------------------------------------------------------------------- relations

def one_run_counts(path, frame: pd.DataFrame) -> None:
    """A one-run audit row guesses on at most its canaries and is right at most on every guess:
    correct <= n (guesses) <= canaries; otherwise its lower bound is computed from impossible counts."""
    if "canaries" not in frame.columns:  # a hypothesis-test audit only
        return
    one_run = frame.audit.str.startswith("one_run").to_numpy()
    for name in ("canaries", "correct"):
        check_numbers(path, name, frame[name], Num(0, integer=True), nan_ok=~one_run)
    _first_line(path, "n", one_run & (frame.n > frame.canaries).to_numpy(), frame.n,
                "at most the row's canaries (the auditor guesses on canary slots only)")
    _first_line(path, "correct", one_run & (frame.correct > frame.n).to_numpy(), frame.correct,
                "at most the row's n, the guesses made")


def bounds_within_ceilings(path, frame: pd.DataFrame) -> None:
    """An audit row's ceiling is its own bound with every decision right (privssl.audit.bounds), and
    the bound only falls as errors are added: a bound above its ceiling was not computed from the
    row's counts. A parametric canary audit's ceiling is the claim (privssl.audit.gradient_canary),
    which its rule never lets a bound pass. The tolerance is float rounding only."""
    over = (frame.eps_lower_bound > frame.eps_ceiling * (1 + 1e-9) + 1e-12).to_numpy()
    _first_line(path, "eps_lower_bound", over, frame.eps_lower_bound,
                "at most the row's eps_ceiling, the bound of the same audit with every decision right")


# the audits whose claim is the release's own adjacency (the canary: add/remove for DP-SGD; the crafted
# pair: substitution); every other audit tests the substitution of one record (release.methods.substitution_claim)
OWN_ADJACENCY_ATTACKS = (CANARY_ATTACK, CRAFTED_ATTACK)
PARAMETRIC_AUDITS = ("white_box_gdp", "final_model_gdp", "crafted_pair_gdp")  # their ceiling is the claim
PROVEN_BY_CONSTRUCTION = ("certified_gaussian", "certified_pure", "dpsgd")  # no sampled sensitivity: never weaker


def audit_claims_are_the_releases(path, frame: pd.DataFrame) -> None:
    """Each row's claim is its release's (privssl.release.methods), so that an edited claim or kind
    cannot move the ledger: `claimed_eps` is ε for the canary and crafted-pair audits and the
    substitution claim for the others (ε, or 2ε or ∞ for DP-SGD's addition/removal); a release whose
    guarantee rests on no sampled sensitivity has its registry kind at every finite ε; a parametric
    audit's ceiling is its claim."""
    claimed, eps = frame.claimed_eps.to_numpy(dtype=float), frame.eps.to_numpy(dtype=float)
    released = (frame.method != "none").to_numpy()
    own = frame.attack.isin(OWN_ADJACENCY_ATTACKS).to_numpy()
    add_remove = frame.method.map(lambda m: m in REGISTRY and REGISTRY[m].adjacency == ADD_REMOVE).to_numpy(bool)
    doubled = np.isclose(claimed, 2 * eps, rtol=1e-12) | np.isinf(claimed)
    wrong = released & ~np.where(own | ~add_remove, np.isclose(claimed, eps, rtol=1e-12), doubled)
    wrong |= ~released & ~np.isinf(claimed)
    _first_line(path, "claimed_eps", wrong, frame.claimed_eps,
                "the release's own claim: ε for the canary and crafted-pair audits, the substitution claim (ε; 2ε or "
                "∞ for DP-SGD) for the others, ∞ for the unprotected head")
    kind = frame.method.map(lambda m: REGISTRY[m].dp_kind if m in PROVEN_BY_CONSTRUCTION else None)
    wrong = (kind.notna() & np.isfinite(eps) & (frame.guarantee_kind != kind)).to_numpy()
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        fail(path, "guarantee_kind", f"{frame.guarantee_kind.iloc[i]!r} for {frame.method.iloc[i]} on line {i + 2}",
             f"{kind.iloc[i]!r}, the registry's guarantee of {frame.method.iloc[i]} (privssl.release.methods)")
    parametric = frame.audit.isin(PARAMETRIC_AUDITS).to_numpy()
    _first_line(path, "eps_ceiling", parametric & ~np.isclose(frame.eps_ceiling.to_numpy(dtype=float), claimed,
                                                              rtol=1e-12), frame.eps_ceiling,
                "the row's claimed_eps: a parametric audit's ceiling is its claim")


def audit_relations(path, frame: pd.DataFrame) -> None:
    """A table's schema names one relation check; audit.csv has three."""
    one_run_counts(path, frame)
    bounds_within_ceilings(path, frame)
    audit_claims_are_the_releases(path, frame)


# --------------------------------------------------------------------------------- schema

# an audit row's attack key, as the attack rows' (artefacts.image: no track module imports another)
_KEY = {"dataset": Text(), "attack": Text(), "adaptive": Flag()}
AUDIT = {**_KEY, "method": _METHOD, "eps": Num(0, low_open=True, nan_where=("method", "none")),
         "delta": Num(0, 1, high_open=True), "claimed_eps": Num(0, low_open=True, finite=False),  # none: ∞
         "guarantee_kind": Text(GUARANTEE_KINDS), "audit": Text(), "threat_model": Text(THREAT_MODELS),
         "eps_lower_bound": Num(0),
         "eps_ceiling": Num(0),  # the bound were every decision right: what the audit could prove at its n
         "n": COUNT, "grid": (("dataset", "method", "audit", "attack", "adaptive"), ("eps",)),
         "relations": audit_relations}


# --------------------------------------------------------------------------------- the tables, declared

def hypothesis_test_audit_rows(config: dict, dataset: str, target: str | None = None) -> list[dict]:
    """audit/hypothesis_test_<target>.csv: the Clopper-Pearson audit of every LiRA row."""
    return [lira_keys(config, dataset, t) | {"attack": list(config["attack"]["lira"]["attacks"]),
                                             "audit": ["hypothesis_test"]}
            for t in ([target] if target is not None else audited(config))]


def one_run_audit_rows(config: dict, dataset: str) -> list[dict]:
    """audit/one_run.csv: one canary training per (target, ε) and canary kind, the loss attack."""
    kinds = [one_run_audit_name(kind) for kind in config["audit"]["one_run"]["kinds"]]
    return [lira_keys(config, dataset, t) | {"adaptive": [True], "attack": ["loss"], "audit": kinds}
            for t in audited(config)]


def canary_audit_rows(config: dict, dataset: str) -> list[dict]:
    """audit/canary_dpsgd.csv: the gradient-canary audits of the DP-SGD head at audit.canary.eps
    (none without a DP-SGD head)."""
    if "dpsgd" not in config["protect"]["mechanisms"]:
        return []
    return [{"dataset": [dataset], "method": ["dpsgd"], "eps": list(config["audit"]["canary"]["eps"]),
             "attack": [CANARY_ATTACK], "adaptive": [True], "audit": list(CANARY_AUDITS)}]


def crafted_pair_audit_rows(config: dict, dataset: str) -> list[dict]:
    """audit/crafted_pair_certified.csv: the crafted-pair audits of every certified release at
    audit.canary.eps, the Gaussian-DP fit only where the noise is Gaussian (none without a
    certified release)."""
    eps = list(config["audit"]["canary"]["eps"])
    return [{"dataset": [dataset], "method": [m], "eps": eps, "attack": [CRAFTED_ATTACK], "adaptive": [True],
             "audit": [a for a in CRAFTED_AUDITS
                       if a == "crafted_pair_test" or isinstance(release_method(m).noise, Gaussian)]}
            for m in certified_methods(config)]


def audit_rows(config: dict, dataset: str) -> list[dict]:
    """audit.csv: both audits of every target, the canary audits of the DP-SGD head and the
    crafted-pair audits of the certified heads."""
    return (hypothesis_test_audit_rows(config, dataset) + one_run_audit_rows(config, dataset)
            + canary_audit_rows(config, dataset) + crafted_pair_audit_rows(config, dataset))


AUDIT_TABLE = Table("audit.csv", AUDIT, audit_rows)
HYPOTHESIS_TEST_AUDIT_TABLE = Table(None, AUDIT, hypothesis_test_audit_rows, part="audit/hypothesis_test_{target}.csv")
ONE_RUN_AUDIT_TABLE = Table("audit/one_run.csv", AUDIT, one_run_audit_rows)
CANARY_AUDIT_TABLE = Table("audit/canary_dpsgd.csv", AUDIT, canary_audit_rows)
CRAFTED_PAIR_AUDIT_TABLE = Table("audit/crafted_pair_certified.csv", AUDIT, crafted_pair_audit_rows)
