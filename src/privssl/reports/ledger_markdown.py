"""The claims ledger as Markdown: a summary per seed and verdict (the unresolved rows split by
why), the regime each family of claims rests on, one line per row, the claims' statements and the
verdict rules (privssl.reports.claims_ledger builds the rows)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privssl.reports.claims_spec import NOT_TESTED
from privssl.reports.contrastive_report import _cell, difference_text, interval_text, need_text
from privssl.reports.regime import NOT_REACHED, PAPER_LEAKS, REACHED, UNRESOLVED_BECAUSE
from privssl.reports.verdicts import CONTRADICTED, REPRODUCED, UNRESOLVED

def _value(value, lo, hi, n, draws) -> str:
    if lo == hi:  # a bound or a computed value
        return f"{value:.4g}"
    if pd.isna(n):  # a bound with a margin ("roughly 50 %")
        return f"{value:.3g} ± {(hi - lo) / 2:.3g} (margin)"
    units = f" ({int(n)}{'' if pd.isna(draws) or draws == 1 else f' × {int(draws)}'})"
    return interval_text(value, lo, hi) + units


SUMMARY_COLUMNS = (REPRODUCED, CONTRADICTED, *(f"{UNRESOLVED}: {why}" for why in UNRESOLVED_BECAUSE), NOT_TESTED)


def summary(ledger: pd.DataFrame) -> pd.DataFrame:
    """Rows per seed and verdict, the unresolved ones split by why (regime, data, neither)."""
    outcome = ledger.verdict.where(ledger.verdict != UNRESOLVED, UNRESOLVED + ": " + ledger.unresolved_because.astype(str))
    counts = pd.crosstab(ledger.seed, outcome)
    unknown = sorted(set(counts.columns) - set(SUMMARY_COLUMNS))
    if unknown:
        raise ValueError(f"ledger outcomes {unknown} are none of {SUMMARY_COLUMNS}")
    return counts.reindex(columns=list(SUMMARY_COLUMNS), fill_value=0)


def regime_table(ledger: pd.DataFrame) -> pd.DataFrame:
    """One row per leak the claims rest on (dataset, family, target): ours beside the paper's, and
    the ledger's verdicts that rest on it."""
    rows = ledger[ledger.regime.isin([REACHED, NOT_REACHED])]
    keys = ["dataset", "regime_family", "regime_target"]
    out = []
    for key, group in rows.groupby(keys, sort=False):
        first = group.iloc[0]
        verdicts = group.verdict.where(group.verdict != UNRESOLVED, UNRESOLVED + " (" + group.unresolved_because + ")")
        out.append({**dict(zip(keys, key)), "value": first.regime_value, "lo": first.regime_lo, "hi": first.regime_hi,
                    "n": first.regime_n, "chance": first.regime_chance, "paper": first.regime_paper,
                    "paper_text": PAPER_LEAKS[first.regime_family][1], "regime": first.regime,
                    "claims": ", ".join(dict.fromkeys(group.claim)),
                    "verdicts": ", ".join(f"{count} {v}" for v, count in verdicts.value_counts().items())})
    return pd.DataFrame(out)


def _verdict_cell(r) -> str:
    return f"**{r.verdict}**" + (f" ({r.unresolved_because})" if r.verdict == UNRESOLVED else "")


def markdown(ledger: pd.DataFrame) -> str:
    """A summary per seed and verdict, the regime each family rests on, the rows per claim, and the
    verdict rules."""
    if ledger.empty:
        return "No claim was measured: the config runs no image dataset and no claim branch.\n"
    counts = summary(ledger)
    lines = ["| seed | " + " | ".join(SUMMARY_COLUMNS) + " |", "|---|" + "---:|" * len(SUMMARY_COLUMNS)]
    lines += [f"| {seed} | " + " | ".join(str(int(c)) for c in row) + " |" for seed, row in counts.iterrows()]
    regimes = regime_table(ledger)
    if not regimes.empty:
        lines += ["", "The regime: the leak each family of claims rests on, ours beside the paper's. A comparison of "
                  "leaks exists only where this leak lies above its chance level beyond its interval; where it does "
                  "not, a reproduction is not one and an unresolved row needs the regime before it needs records.",
                  "", "| dataset | the leak the claims rest on | ours [95 % CI] (records) | chance | paper | regime "
                  "| claims resting on it |", "|---|---|---:|---:|---|---|---|"]
        for r in regimes.itertuples(index=False):
            lines.append(f"| {r.dataset} | {_cell(r.regime_target)} | {interval_text(r.value, r.lo, r.hi, r.n)} "
                         f"| {r.chance:.3f} | {_cell(r.paper_text)} | **{r.regime}** | {_cell(r.claims)}: "
                         f"{_cell(r.verdicts)} |")
    lines += ["", "| dataset | claim | setting | paper | ours [95 % CI] (records × draws) | reference [95 % CI] "
              "| difference [95 % CI] | test | verdict | records for 80 % power | size vs the paper's | note |",
              "|---|---|---|---|---:|---:|---:|---|---|---:|---|---|"]
    for r in ledger.itertuples(index=False):
        if r.verdict == NOT_TESTED:
            lines.append(f"| | {r.claim} | | {_cell(r.paper_value)} | | | | | **{r.verdict}** | | | {_cell(r.note)} |")
            continue
        difference = "" if pd.isna(r.difference) else f"{difference_text(r.difference, r.difference_lo, r.difference_hi)} ({r.design})"
        size = "" if not r.magnitude else f"{r.magnitude} ({r.paper_difference:+.3g})"
        lines.append(f"| {r.dataset} | {r.claim} | {_cell(r.setting)} | {_cell(r.paper_value)} "
                     f"| {_value(r.value, r.value_lo, r.value_hi, r.n, r.draws)} "
                     f"| {_value(r.reference, r.reference_lo, r.reference_hi, r.n_reference, np.nan)} "
                     f"| {_cell(difference)} | {_cell(r.test)} | {_verdict_cell(r)} | {need_text(r.n_for_80pct_power)} "
                     f"| {size} | {_cell(r.quantity)}; {_cell(r.compared)}{'; ' + _cell(r.note) if r.note else ''} |")
    lines += ["", "The claims:", ""]
    for claim, group in ledger.groupby("claim", sort=False):
        first = group.iloc[0]
        lines.append(f"- **{claim}** ({first.seed}, {first.source}): {first.statement}")
    lines += ["", "Intervals are 95 % with the record as the independent unit: (records × draws) counts the records and "
              "the noise draws or trainings each was decided under, which are repeated measurements, not new records. "
              "Two releases decided on the same records are compared by their difference paired on the records. A "
              "claim is tested as worded: 'a > b' is reproduced when the difference's interval lies above 0 and "
              "contradicted when below; 'roughly', 'barely' and 'no cost' by the margin named in the test column "
              "(the ledger's; the papers give none). A claim about leaks is judged only in its regime (the table "
              "above): on a model whose leak is not above chance a reproduction is unresolved (regime not reached). "
              "Otherwise unresolved, with the records at which a replication would settle the claim (of several parts: "
              "its least settled part) with 80 % power if the measured difference held ('more draws, not records' where the noise draws' spread alone "
              "prevents it; not settled by data where no n can). Where the paper states the size of the difference "
              "(its smallest), 'size vs the paper's' says whether our interval lies below it, above it, or covers "
              "it. A value without an interval is a bound or a computation."]
    return "\n".join(lines) + "\n"
