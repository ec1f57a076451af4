"""The claim catalogues: the thesis's contrastive and Semi-Leak claims and the claims ledger's
(resources/*.csv), each with one row per claim its reader settles."""

from __future__ import annotations

from typing import Callable

import pandas as pd

from privssl.artefacts.specs import Num, Text, fail
from privssl.attacks.contrastive_spec import CLAIMS
from privssl.reports.claims_spec import LEDGER_CLAIMS
from privssl.training.semi_supervised_spec import CLAIMS as SEMILEAK_CLAIMS


def every_claim_once(claims: tuple[str, ...]) -> Callable[[object, pd.DataFrame], None]:
    """A catalogue's relation: one row for each claim its reader settles. A claim given twice is
    refused (a dict by claim would keep the last of two paper values silently), and so is a missing
    one, before the reader computes anything."""
    def check(path, frame: pd.DataFrame) -> None:
        first: dict[str, int] = {}
        for line, claim in enumerate(frame["claim"], start=2):
            if claim in first:
                fail(path, "claim", f"the claim {claim!r} on line {line} repeats line {first[claim]}",
                     "each claim once")
            first[claim] = line
        missing = [c for c in claims if c not in first]
        if missing:
            fail(path, "claim", f"no row for {', '.join(missing)}", f"a row for each of the {len(claims)} claims "
                                                                     f"the report settles: {', '.join(claims)}")
    return check


# resources/thesis_contrastive.csv: the thesis's statement and quoted values of each contrastive claim
THESIS_CLAIMS = {"claim": Text(CLAIMS), "statement": Text(), "quoted_values": Text(), "source": Text(),
                 "relations": every_claim_once(CLAIMS)}
# the same columns, thesis Ch. 3's claims (resources/thesis_semileak.csv)
THESIS_SEMILEAK = {**THESIS_CLAIMS, "claim": Text(SEMILEAK_CLAIMS), "relations": every_claim_once(SEMILEAK_CLAIMS)}
# resources/claims.csv: the claims ledger's catalogue, one row per claim of the seeds; paper_difference:
# the difference the paper states (its smallest, oriented as the ledger's row), empty where it states none
PAPER_CLAIMS = {"claim": Text(LEDGER_CLAIMS), "seed": Text(), "source": Text(), "statement": Text(),
                "paper_value": Text(), "paper_difference": Num(0, low_open=True, nan=True),
                "relations": every_claim_once(LEDGER_CLAIMS)}
