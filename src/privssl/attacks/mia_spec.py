"""Names of the paper's membership attacks, the rows of every attacked release (torch-free: the
tables' declared rows, privssl.artefacts.image, name them before any job). One owner for what the attack rules
write and the readers expect."""

# Song & Mittal 2021 (seed 003 Ch. 4): a membership score per record from its posterior, thresholded
# on shadow data (privssl.attacks.mia.metric_scores computes each). The one list of every track.
METRIC_ATTACKS = ("confidence", "entropy", "modified_entropy", "loss", "correctness")
# loss = log p_y orders the records as the confidence p_y does (ties apart only below p_y = 1e-30),
# so its AUC, TPR and threshold accuracy are the confidence's. The contrastive and Semi-Leak theses
# list the other four, and their tracks leave the duplicate row out.
DISTINCT_METRIC_ATTACKS = tuple(a for a in METRIC_ATTACKS if a != "loss")
ATTACKS = ("shadow_mlp", *METRIC_ATTACKS)  # the shadow-model MLP, then the metric attacks

# the attacks that score target heads against the shadow (reference) heads (privssl.attacks.reference_attacks)
LIRA_ATTACKS = {"lira_online": ("online", "per_example"), "lira_offline": ("offline", "per_example"),
                "lira_online_global": ("online", "global"), "lira_offline_global": ("offline", "global")}
RMIA_ATTACKS = {"rmia_online": "online", "rmia_offline": "offline"}
CALIBRATED_LOSS_ATTACK = "calibrated_loss"  # Watson et al. 2022: the loss minus the OUT references' (attacks.difficulty)
REFERENCE_ATTACKS = (*LIRA_ATTACKS, *RMIA_ATTACKS, CALIBRATED_LOSS_ATTACK)


def reference_counts(shadows: int) -> list[int]:
    """1, 2, 4, … reference heads up to all of them (the last one even when not a power of two)."""
    counts = [2 ** i for i in range(shadows.bit_length()) if 2 ** i <= shadows]
    return counts if counts[-1] == shadows else [*counts, shadows]
