"""Empirical lower bounds on ε from membership-inference outcomes (privacy auditing).

A DP guarantee is an upper bound on leakage; an audit turns an attack's success into a
statistically valid LOWER bound, which shows how loose (or wrong) the claimed ε is.

(a) Hypothesis-test audit (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021). Any test of
'member vs non-member' against an (ε, δ)-DP algorithm satisfies
    FPR + e^ε FNR >= 1 − δ   and   FNR + e^ε FPR >= 1 − δ,
so observed error rates, replaced by one-sided Clopper–Pearson UPPER bounds, give
    ε >= max(log((1 − δ − FPR_ub) / FNR_ub), log((1 − δ − FNR_ub) / FPR_ub)).
Each rate gets its own one-sided bound at `confidence`; by a union bound the two hold jointly
with probability >= 1 − 2(1 − confidence). Only 'member iff score >= t' tests are tried, so
scores must be oriented (higher = more likely a member); negate an attack that is reversed.

(b) One-run audit (Steinke, Nasr & Jagielski, NeurIPS 2023): m canaries each included with
probability ½; the auditor guesses on some of them and counts correct guesses. No retraining
is needed: a single training run gives the bound.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import special, stats

from privssl.attacks.statistics import (
    check_confidence,
    clean_inputs,
    clopper_pearson_upper,
    finite_scores,
    threshold_counts,
)

EPS_SEARCH_MAX = 50.0  # one-run search range [0, EPS_SEARCH_MAX]: a result of EPS_SEARCH_MAX means "at least"
EPS_TOLERANCE = 1e-4


def _check_delta(delta: float) -> float:
    """δ is a probability; δ = 1 makes every algorithm (ε, δ)-DP and the bound vacuous."""
    delta = float(delta)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must lie in [0, 1), got {delta}")
    return delta


def _log_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """log(numerator / denominator), −inf where the numerator is <= 0 (the term then implies nothing)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(numerator > 0, np.log(np.maximum(numerator, 1e-300) / denominator), -np.inf)


def _epsilon_from_rates(fpr, fnr, delta: float) -> np.ndarray:
    """max over both DP inequalities of the ε they force, unfloored (−inf when neither applies)."""
    return np.maximum(_log_ratio(1 - delta - fpr, fnr), _log_ratio(1 - delta - fnr, fpr))


# --------------------------------------------------------------------------- (a) hypothesis-test audit


def epsilon_lower_bound_at(fp, n_nonmembers, fn, n_members, delta: float, confidence: float = 0.95):
    """ε lower bound of one threshold test with FP false positives and FN false negatives.

    Uses one-sided Clopper–Pearson upper bounds on FPR and FNR, so a perfect attack still only
    proves a finite ε: with FP = FN = 0 the bound is log((1 − δ − u)/u), u = 1 − (1 − confidence)^(1/n).
    Floored at 0. Vectorised over arrays of fp, fn.
    """
    delta = _check_delta(delta)
    fpr_ub = np.asarray(clopper_pearson_upper(fp, n_nonmembers, confidence))
    fnr_ub = np.asarray(clopper_pearson_upper(fn, n_members, confidence))
    bound = np.maximum(_epsilon_from_rates(fpr_ub, fnr_ub, delta), 0.0)
    return float(bound) if bound.ndim == 0 else bound


def hypothesis_test_ceiling(n_nonmembers, n_members, delta: float, confidence: float = 0.95):
    """The largest ε the hypothesis-test audit can certify on these evaluation counts: its bound
    with every decision right (FP = FN = 0), whatever the attack.

    Clopper–Pearson with 0 events out of n is u(n) = 1 − (1 − confidence)^(1/n), so the ceiling is
        max(log((1 − δ − u(n_nonmembers)) / u(n_members)), log((1 − δ − u(n_members)) / u(n_nonmembers)), 0),
    about log(n / log(1/(1 − confidence))) for n members and n non-members. A bound of 0 under a
    ceiling near 0 says the audit was blind at this n, not that the release is private.
    Vectorised over arrays of counts.
    """
    return epsilon_lower_bound_at(0, n_nonmembers, 0, n_members, delta, confidence)


def each_rate(confidence: float) -> float:
    """The one-sided confidence of each of FPR and FNR so that both bounds hold jointly at
    `confidence` (union bound): 1 − (1 − confidence) / 2. The split audits state joint confidence."""
    return 1 - (1 - check_confidence(confidence)) / 2


def _result(eps: float, threshold: float, fp: int, fn: int, n_members: int, n_nonmembers: int) -> dict:
    return {"eps_lower_bound": float(eps), "threshold": float(threshold), "fp": int(fp), "fn": int(fn),
            "n_members": int(n_members), "n_nonmembers": int(n_nonmembers)}


def epsilon_lower_bound(scores, is_member, delta: float, confidence: float = 0.95) -> dict:
    """Largest ε lower bound over all thresholds 'member iff score >= t' (every distinct score and +inf).

    Caveat: the maximum over thresholds is taken on the same data the bound is computed from,
    so the stated confidence is optimistic (multiple comparisons: each threshold is its own
    test). Use `epsilon_lower_bound_split` for a bound that keeps its nominal level.
    """
    delta, confidence = _check_delta(delta), check_confidence(confidence)
    thresholds, tp, fp = threshold_counts(scores, is_member)
    n_members, n_nonmembers = int(tp[0]), int(fp[0])
    fn = n_members - tp
    bounds = epsilon_lower_bound_at(fp, n_nonmembers, fn, n_members, delta, confidence)
    best = int(np.argmax(bounds))
    return _result(bounds[best], thresholds[best], fp[best], fn[best], n_members, n_nonmembers)


def _selected_threshold(scores_select, member_select, delta: float, confidence: float) -> tuple[float, float, int]:
    """(threshold, its Clopper–Pearson bound on the selection data, the selection queries): the
    threshold with the largest bound; of tied thresholds the first (lowest)."""
    thresholds, tp_select, fp_select = threshold_counts(scores_select, member_select)
    members, nonmembers = int(tp_select[0]), int(fp_select[0])
    selected = epsilon_lower_bound_at(fp_select, nonmembers, members - tp_select, members, delta, confidence)
    best = int(np.argmax(selected))
    return float(thresholds[best]), float(selected[best]), members + nonmembers


def _evaluated(threshold: float, scores_eval, member_eval, delta: float, confidence: float) -> dict:
    """The one test 'member iff score >= threshold' on the evaluation data, and its bound."""
    scores, is_member = clean_inputs(scores_eval, member_eval)
    guess = scores >= threshold
    fp, fn = int((guess & ~is_member).sum()), int((~guess & is_member).sum())
    n_members, n_nonmembers = int(is_member.sum()), int((~is_member).sum())
    eps = epsilon_lower_bound_at(fp, n_nonmembers, fn, n_members, delta, confidence)
    return _result(eps, threshold, fp, fn, n_members, n_nonmembers)


def epsilon_lower_bound_split(scores_select, member_select, scores_eval, member_eval, delta: float,
                              confidence: float = 0.95) -> dict:
    """ε lower bound of ONE threshold, chosen on selection data and tested on evaluation data.

    The threshold with the largest Clopper–Pearson bound on the selection data is fixed before
    the evaluation data are looked at, so the bound on the evaluation data is a single test and
    keeps its nominal confidence (unlike `epsilon_lower_bound`). Selecting by the bound rather than
    by the plug-in ε keeps away from thresholds in the far tail, whose handful of selection counts
    promise an ε the evaluation half cannot confirm (the crafted pair's Gaussian releases, μ = 0.18,
    10⁵ per world: 0 at the plug-in's threshold, 0.035 at the bound's). Which of the two DP
    inequalities binds needs no separate choice: both are evaluated at that threshold; of tied
    thresholds the first (lowest) is kept.
    """
    delta, confidence = _check_delta(delta), check_confidence(confidence)
    threshold, _, selected_on = _selected_threshold(scores_select, member_select, delta, confidence)
    return _evaluated(threshold, scores_eval, member_eval, delta, confidence) | {"selected_on": selected_on}


def epsilon_lower_bound_split_among(statistics_select: dict, member_select, statistics_eval: dict, member_eval,
                                    delta: float, confidence: float = 0.95) -> dict:
    """`epsilon_lower_bound_split` where the selection data also choose the statistic: of the named
    scores (the same names in both dicts), the one whose best threshold has the largest bound on the
    selection data (of ties the first named) is the one test on the evaluation data, which so keeps
    its nominal confidence whatever the number of statistics tried. The result names it."""
    delta, confidence = _check_delta(delta), check_confidence(confidence)
    if not statistics_select or set(statistics_select) != set(statistics_eval):
        raise ValueError(f"need the same statistics on both halves, got {sorted(statistics_select)} and "
                         f"{sorted(statistics_eval)}")
    chosen = {name: _selected_threshold(scores, member_select, delta, confidence)
              for name, scores in statistics_select.items()}
    name = max(chosen, key=lambda k: chosen[k][1])  # max keeps the first of ties
    threshold, _, selected_on = chosen[name]
    return (_evaluated(threshold, statistics_eval[name], member_eval, delta, confidence)
            | {"selected_on": selected_on, "statistic": name})


def clustered_rate_upper(errors, trials, confidence: float = 0.95) -> float:
    """One-sided upper bound on an error rate whose trials come in clusters (a LiRA candidate decided
    by each of T target heads): `errors` and `trials` per cluster. The pooled rate p = Σ errors /
    Σ trials with its cluster-robust variance V = Σ_j (e_j − p t_j)² / (Σ t)² over the J clusters
    with trials (without the J/(J − 1) factor, so that one trial a cluster gives n* = n and exact
    Clopper–Pearson; the audits have hundreds of clusters); the bound is Clopper–Pearson at the
    effective size n* = p(1 − p)/V (at most the trials), the interval of Korn & Graubard (1998) for
    clustered binary data. A rate of 0 or 1 has no variance to estimate: n* is then the clusters, as
    if each decided once."""
    confidence = check_confidence(confidence)
    errors, trials = np.asarray(errors, dtype=float), np.asarray(trials, dtype=float)
    used = trials > 0
    errors, trials = errors[used], trials[used]
    clusters, total = len(trials), float(trials.sum())
    if clusters == 0:
        raise ValueError("a clustered rate needs at least one cluster with trials")
    p = float(errors.sum()) / total
    if p >= 1:
        return 1.0
    variance = float(((errors - p * trials) ** 2).sum()) / total ** 2
    effective = min(total, p * (1 - p) / variance) if p > 0 and variance > 0 else float(clusters)
    k = p * effective
    return float(stats.beta.ppf(confidence, k + 1, effective - k))


def epsilon_lower_bound_split_clustered(scores_select, member_select, scores_eval, member_eval, clusters_eval,
                                        delta: float, confidence: float = 0.95) -> dict:
    """`epsilon_lower_bound_split` for decisions that come in clusters (`clusters_eval`: each
    evaluation decision's cluster, a LiRA candidate): the threshold chosen on the selection data as
    there, the FPR and FNR of the one test bounded by `clustered_rate_upper`, so that T decisions of
    one candidate count as what they are worth, not as T independent trials. The result adds the
    clusters behind each rate and the ceiling those allow (every decision right)."""
    delta, confidence = _check_delta(delta), check_confidence(confidence)
    threshold, _, selected_on = _selected_threshold(scores_select, member_select, delta, confidence)
    scores, is_member = clean_inputs(scores_eval, member_eval)
    clusters = np.asarray(clusters_eval)
    if clusters.shape != scores.shape:
        raise ValueError(f"need one cluster per evaluation decision, got {clusters.shape} for {scores.shape}")
    ids, cluster = np.unique(clusters, return_inverse=True)
    guess = scores >= threshold

    def per_cluster(side: np.ndarray, wrong: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.bincount(cluster[side], weights=wrong[side], minlength=len(ids)),
                np.bincount(cluster[side], minlength=len(ids)))

    fp, nonmembers = per_cluster(~is_member, guess.astype(float))
    fn, members = per_cluster(is_member, (~guess).astype(float))
    fpr_ub, fnr_ub = clustered_rate_upper(fp, nonmembers, confidence), clustered_rate_upper(fn, members, confidence)
    eps = max(float(_epsilon_from_rates(np.array(fpr_ub), np.array(fnr_ub), delta)), 0.0)
    n_out, n_in = int((nonmembers > 0).sum()), int((members > 0).sum())
    return (_result(eps, threshold, int(fp.sum()), int(fn.sum()), int(members.sum()), int(nonmembers.sum()))
            | {"selected_on": selected_on, "member_clusters": n_in, "nonmember_clusters": n_out,
               "eps_ceiling": float(hypothesis_test_ceiling(n_out, n_in, delta, confidence))})


# --------------------------------------------------------------------------- (b) one-run audit


def _check_count(value, name: str) -> int:
    """Guess counts must be non-negative integers."""
    if int(value) != value or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value}")
    return int(value)


def one_run_guesses(scores, k_plus: int, k_minus: int) -> np.ndarray:
    """Guesses in {−1, 0, +1}: +1 ('included') on the k_plus highest scores, −1 on the k_minus lowest.

    Abstaining on the middle lets the auditor bet only where the attack is confident, which is
    what makes the one-run bound tight. Ties are broken by position (stable sort).
    """
    scores = finite_scores(scores)
    k_plus, k_minus = _check_count(k_plus, "k_plus"), _check_count(k_minus, "k_minus")
    if k_plus + k_minus > scores.size:
        raise ValueError(f"k_plus + k_minus must be <= len(scores) = {scores.size}, got {k_plus} + {k_minus}")
    order = np.argsort(scores, kind="stable")
    guesses = np.zeros(scores.size, dtype=int)
    guesses[order[scores.size - k_plus:]] = 1
    guesses[order[:k_minus]] = -1
    return guesses


def one_run_p_value(v: int, r: int, m: int, eps: float, delta: float) -> float:
    """Upper bound on P[W >= v] for an (ε, δ)-DP algorithm (Steinke, Nasr & Jagielski 2023, Thm 3.1 / App. D).

    W = correct guesses out of r, m canaries. With q = e^ε/(1 + e^ε) and
    f(u) = P[Binomial(r, q) >= u]:
        P[W >= v] <= f(v) + 2 m δ · max_{1 <= i <= v} (f(v − i) − f(v)) / i.
    (The paper's max runs over i <= m; for i > v, f(v − i) = 1 and the ratio only shrinks.)
    δ = 0 leaves the binomial tail: correct guesses are dominated by ε-randomised response.
    """
    q = special.expit(eps)
    tail = stats.binom.sf(v - 1, r, q)
    if delta == 0 or v == 0:
        return float(min(tail, 1.0))
    i = np.arange(1, v + 1)
    alpha = np.max((stats.binom.sf(v - i - 1, r, q) - tail) / i)
    return float(min(tail + 2 * m * delta * alpha, 1.0))


def one_run_epsilon_lower_bound(v: int, r: int, m: int, delta: float, confidence: float = 0.95) -> float:
    """Largest ε rejected by the one-run test: P[W >= v] bound <= 1 − confidence (0 if none is).

    Binary search over [0, 50] to 1e-4, on the lower side of the boundary (the reported value is
    rejected). It relies on the p-value bound being nondecreasing in ε. That holds for δ = 0
    (binomial tail in q) and whenever 2mδ <= 1: d/dq of f(v) + (c/i)(f(v − i) − f(v)) is
    r[(1 − c/i) b(v − 1) + (c/i) b(v − i − 1)] >= 0 for c = 2mδ <= i (b the Binomial(r − 1, q)
    pmf), and a max of nondecreasing functions is nondecreasing. δ >= 1/(2m) is a vacuous
    guarantee anyway (it allows revealing a canary); a warning is issued then.
    """
    delta, significance = _check_delta(delta), 1.0 - check_confidence(confidence)
    v, r, m = _check_count(v, "v"), _check_count(r, "r"), _check_count(m, "m")
    if not v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    if 2 * m * delta > 1:
        warnings.warn(f"2*m*delta = {2 * m * delta:g} > 1: the one-run p-value may not be monotone in eps; "
                      "the binary search then finds a rejection boundary, not necessarily the largest eps",
                      stacklevel=2)

    def rejected(eps: float) -> bool:
        return one_run_p_value(v, r, m, eps, delta) <= significance

    if not rejected(0.0):
        return 0.0
    if rejected(EPS_SEARCH_MAX):
        return EPS_SEARCH_MAX
    lo, hi = 0.0, EPS_SEARCH_MAX  # invariant: lo rejected, hi not
    while hi - lo > EPS_TOLERANCE:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rejected(mid) else (lo, mid)
    return lo


def one_run_ceiling(r: int, m: int, delta: float, confidence: float = 0.95) -> float:
    """The largest ε the one-run audit can certify with r guesses on m canary slots: its bound with
    all r guesses right, one_run_epsilon_lower_bound(r, r, m, delta, confidence).

    For δ = 0, P[W >= r] = q^r, so the ceiling is logit((1 − confidence)^(1/r)), about
    log(r / log(1/(1 − confidence))); δ > 0 lowers it. The search caps it, like the bound, at
    EPS_SEARCH_MAX, so a ceiling of EPS_SEARCH_MAX reads "at least EPS_SEARCH_MAX" (at δ = 0 that
    takes r ~ 1e22 guesses, so no audit here reaches it).
    """
    return one_run_epsilon_lower_bound(r, r, m, delta, confidence)
