"""The claims of the seed documents that the claims ledger settles, by id (resources/claims.csv
holds each one's seed, source, one-sentence statement and the paper's value). Free of pandas and
torch: artefacts.claims checks the catalogue's ids against this list."""

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
# the releases' own guarantees against their audits (privssl.reports.audit_claims)
AUDIT_CLAIMS = ("proven_release_below_claim", "tight_audit_reaches_claim")
LEDGER_CLAIMS = ALM_CLAIMS + CONTRASTIVE_CLAIMS + SEMILEAK_CLAIMS + DPCL_CLAIMS + DPADAPTER_CLAIMS + AUDIT_CLAIMS
VERDICTS = ("reproduced", "contradicted", "unresolved")
# the ledger's row of a claim the run measured nothing for: kept, with what would measure it
NOT_TESTED = "not tested"
LEDGER_VERDICTS = VERDICTS + (NOT_TESTED,)
# what a run must measure for each claim to be tested (the config keys that produce it)
MEASURED_BY = {
    "alm_unprotected_vulnerable": "an image dataset (`datasets`): the attack on the clean head",
    "alm_protects_to_chance": "an image dataset with `alm` in protect.mechanisms",
    "alm_loss_below_laplace": "an image dataset with `alm` and `laplace` in protect.mechanisms at a common ε",
    "alm_loss_below_gaussian": "an image dataset with `alm` and `gaussian` in protect.mechanisms at a common ε",
    "contrastive_less_membership": "the `contrastive` section with a dataset",
    "contrastive_more_attribute": "the `contrastive` section with a dataset",
    "talos_removes_attribute_leak": "the `contrastive` section with a Talos λ > 0 in contrastive.talos.lambdas",
    "talos_no_task_cost": "the `contrastive` section with a Talos λ > 0 in contrastive.talos.lambdas",
    "talos_no_membership_cost": "the `contrastive` section with a Talos λ > 0 in contrastive.talos.lambdas",
    "semileak_ada_above_baselines": "the `semileak` section with FixMatch, FlexMatch or UDA in semileak.algorithms",
    "semileak_ada_unlabelled": "the `semileak` section with FixMatch, FlexMatch or UDA in semileak.algorithms",
    "semileak_no_overfitting": "the `semileak` section with FixMatch, FlexMatch or UDA in semileak.algorithms",
    "semileak_js_rises_with_auc": "the `semileak` section with its training checkpoints (semileak.train.checkpoint_every)",
    "semileak_views": "semileak.attack.views_grid with a count of views other than semileak.attack.views",
    "semileak_similarity": "semileak.attack.similarities with a similarity other than semileak.attack.similarity",
    "semileak_early_stopping": "semileak.defences.early_stopping, a checkpoint before the last step",
    "semileak_dpsgd": "semileak.defences.dpsgd with an ε",
    "semileak_top1": "semileak.defences.top1: true",
    "dpcl_above_naive": "the `dpcl` section with both variants, dpcl and naive, at a common ε",
    "dpcl_paper_sigmas_eps_1000": "the `dpcl` section (its paper rows are computed, not trained)",
    "dpadapter_above_sam": "the `dpadapter` section",
    "sam_above_standard": "the `dpadapter` section",
    "proven_release_below_claim": "an image dataset with a proven release (certified_*, dpsgd) in protect.mechanisms",
    "tight_audit_reaches_claim": "an image dataset with dpsgd or a certified_* release in protect.mechanisms (their "
                                 "tight audits, at audit.canary.eps)",
}

# The claims about what a training procedure does (a model kind's leak, one procedure against
# another): one training's luck (its seeds, another machine's float sums) moves their estimates
# beyond the records' interval, so each needs MIN_TRAININGS independent trainings per arm, the
# training a random effect of its interval (privssl.attacks.repeated). The ALM claims compare
# releases of one trained head (the noise draws are their randomness), the DPCL accounting and
# the audits' rows are computations: none of them is here.
TRAINING_PROCEDURE_CLAIMS = CONTRASTIVE_CLAIMS + SEMILEAK_CLAIMS + ("dpcl_above_naive",) + DPADAPTER_CLAIMS
MIN_TRAININGS = 3
