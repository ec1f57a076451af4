"""Names of the paper's membership attacks, the rows of every attacked release (torch-free: the
config's grids, privssl.grids, name them before any job). One owner for what the attack rules
write and the readers expect."""

METRIC_ATTACKS = ("confidence", "entropy", "modified_entropy", "loss", "correctness")
ATTACKS = ("shadow_mlp", *METRIC_ATTACKS)  # the shadow-model MLP, then the metric attacks
