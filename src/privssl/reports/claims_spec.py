"""The claims of the seed documents that the claims ledger settles, by id (resources/claims.csv
holds each one's seed, source, one-sentence statement and the paper's value). Free of pandas and
torch: artefacts.py checks the catalogue's ids against this list."""

from __future__ import annotations

from privssl.training.semi_supervised_spec import CLAIMS as SEMILEAK_BRANCH_CLAIMS

ALM_CLAIMS = ("alm_unprotected_vulnerable", "alm_protects_to_chance", "alm_loss_below_laplace",
              "alm_loss_below_gaussian")
CONTRASTIVE_CLAIMS = ("contrastive_less_membership", "contrastive_more_attribute", "talos_removes_attribute_leak",
                      "talos_no_task_cost", "talos_no_membership_cost")
# the semi-supervised report's claims, and its top-1 rows (a defence of the early-stopping quote)
SEMILEAK_CLAIMS = tuple(f"semileak_{c}" for c in (*SEMILEAK_BRANCH_CLAIMS, "top1"))
DPCL_CLAIMS = ("dpcl_above_naive", "dpcl_paper_sigmas_eps_1000")
DPADAPTER_CLAIMS = ("dpadapter_above_sam", "sam_above_standard")
LEDGER_CLAIMS = ALM_CLAIMS + CONTRASTIVE_CLAIMS + SEMILEAK_CLAIMS + DPCL_CLAIMS + DPADAPTER_CLAIMS
VERDICTS = ("reproduced", "contradicted", "unresolved")
